package envelope

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// Catalog tells which streams belong to a namespace with a key, and seals and opens their
// chunks with a Keyring. It follows the metastore's namespace keys (meta.NamespaceKey):
// every Refresh (each second under Run, and whenever a stream it does not know is asked
// for) it lists them and
//
//   - on a rotation (a higher generation) makes the Keyring seal new chunks under a new
//     key-encryption key; chunks sealed before keep opening while their KMS key exists;
//   - on a shred this node has not confirmed, forgets the namespace's key material,
//     calls Drop (which drops every cached plaintext of its streams: tail caches, chunk
//     cache, on-disk block cache) and then confirms it (meta AckNamespaceShred), so the
//     shred's caller can wait until every live node has.
//
// A stream's namespace never changes and stream ids are never reused, so a stream the map
// holds needs no metastore call; one it does not hold (created since the last listing)
// makes the call list the keys and the streams again, so a stream created after its
// namespace got a key is sealed from its first chunk, and one still unknown is refused
// (meta.ErrStreamNotFound: deleted). Bound: one entry (about 40 bytes) per live stream of
// the cluster (each listing replaces the map) and one NamespaceKey per keyed namespace.
type Catalog struct {
	cfg CatalogConfig

	refreshMu sync.Mutex // one refresh at a time

	mu      sync.RWMutex
	keys    map[string]meta.NamespaceKey // by namespace name
	streams map[uint64]string            // stream id -> namespace name
	gens    map[string]uint64            // the generation the keyring seals under
	dropped map[string]bool              // shreds this node confirmed
}

// CatalogMeta is the part of meta.Client a Catalog calls.
type CatalogMeta interface {
	ListNamespaceKeys(ctx context.Context) ([]meta.NamespaceKey, error)
	AckNamespaceShred(ctx context.Context, ns, node string) (meta.NamespaceKey, error)
	ListNamespaces(ctx context.Context) ([]string, error)
	ListStreams(ctx context.Context, ns string) ([]meta.Stream, error)
}

// CatalogConfig configures a Catalog.
type CatalogConfig struct {
	Meta CatalogMeta
	// Keyring seals and opens chunks; nil on a node without KMS: the chunks of keyed
	// namespaces then answer ErrKeyUnavailable (never written in clear).
	Keyring *Keyring
	// NodeID confirms shreds as this node. Empty (a function: the segmenter, compaction):
	// a shred only makes the keyring forget the namespace's keys; nothing is confirmed.
	NodeID  string
	Refresh time.Duration // how often Run lists the namespace keys (default 1 s)
	// Drop drops every cached plaintext of the streams of a shredded namespace; it runs
	// before the node confirms the shred. nil: the node caches nothing.
	Drop   func(k meta.NamespaceKey, streams []uint64) error
	Logger *slog.Logger
}

// NewCatalog checks cfg.
func NewCatalog(cfg CatalogConfig) (*Catalog, error) {
	if cfg.Meta == nil {
		return nil, errors.New("envelope: catalog: Meta is required")
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Catalog{cfg: cfg, keys: map[string]meta.NamespaceKey{}, streams: map[uint64]string{},
		gens: map[string]uint64{}, dropped: map[string]bool{}}, nil
}

// Keyring is the catalog's keyring.
func (c *Catalog) Keyring() *Keyring { return c.cfg.Keyring }

// Run refreshes the catalog every Refresh until ctx ends.
func (c *Catalog) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Refresh)
	defer t.Stop()
	for {
		if err := c.Refresh(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("namespace keys refresh failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh lists the namespace keys and acts on rotations and shreds.
func (c *Catalog) Refresh(ctx context.Context) error {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	return c.refreshKeys(ctx)
}

func (c *Catalog) refreshKeys(ctx context.Context) error {
	ks, err := c.cfg.Meta.ListNamespaceKeys(ctx)
	if err != nil {
		return fmt.Errorf("envelope: list namespace keys: %w", err)
	}
	keys := make(map[string]meta.NamespaceKey, len(ks))
	for _, k := range ks {
		keys[k.Namespace] = k
	}
	c.mu.Lock()
	c.keys = keys
	var shred []meta.NamespaceKey
	for _, k := range ks {
		if g, ok := c.gens[k.Namespace]; ok && k.Generation > g && c.cfg.Keyring != nil {
			c.cfg.Keyring.Rotate(k.ID)
		}
		c.gens[k.Namespace] = k.Generation
		if k.Shredded() && !c.dropped[k.Namespace] {
			shred = append(shred, k)
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, k := range shred {
		if err := c.shred(ctx, k); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// shred drops what this node holds of k's namespace and confirms it.
func (c *Catalog) shred(ctx context.Context, k meta.NamespaceKey) error {
	if c.cfg.Keyring != nil {
		c.cfg.Keyring.Forget(k.ID)
	}
	if c.cfg.Drop != nil {
		if err := c.listStreams(ctx); err != nil {
			return err
		}
		c.mu.RLock()
		var ids []uint64
		for id, ns := range c.streams {
			if ns == k.Namespace {
				ids = append(ids, id)
			}
		}
		c.mu.RUnlock()
		slices.Sort(ids)
		if err := c.cfg.Drop(k, ids); err != nil {
			return fmt.Errorf("envelope: namespace %s: drop cached plaintext: %w", k.Namespace, err)
		}
	}
	if c.cfg.NodeID != "" && !slices.Contains(k.Dropped, c.cfg.NodeID) {
		if _, err := c.cfg.Meta.AckNamespaceShred(ctx, k.Namespace, c.cfg.NodeID); err != nil {
			return fmt.Errorf("envelope: namespace %s: confirm the shred: %w", k.Namespace, err)
		}
	}
	c.mu.Lock()
	c.dropped[k.Namespace] = true
	c.mu.Unlock()
	c.cfg.Logger.Info("namespace key shredded: key material and cached plaintext dropped", "namespace", k.Namespace)
	return nil
}

// listStreams lists every namespace's streams into the map.
func (c *Catalog) listStreams(ctx context.Context) error {
	names, err := c.cfg.Meta.ListNamespaces(ctx)
	if err != nil {
		return fmt.Errorf("envelope: list namespaces: %w", err)
	}
	found := map[uint64]string{}
	for _, ns := range names {
		ss, err := c.cfg.Meta.ListStreams(ctx, ns)
		if errors.Is(err, meta.ErrNamespaceNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("envelope: list streams of %s: %w", ns, err)
		}
		for _, s := range ss {
			found[s.ID] = s.Namespace
		}
	}
	c.mu.Lock()
	c.streams = found // streams deleted since drop out: the map holds the live ones
	c.mu.Unlock()
	return nil
}

// lookup answers stream's namespace key: ok false when its namespace has none.
func (c *Catalog) lookup(ctx context.Context, stream uint64) (meta.NamespaceKey, bool, error) {
	c.mu.RLock()
	ns, known := c.streams[stream]
	k, keyed := c.keys[ns]
	c.mu.RUnlock()
	if !known {
		// A stream the map does not hold (created since it was listed): list the keys
		// and the streams again.
		c.refreshMu.Lock()
		err := c.refreshKeys(ctx)
		if err == nil {
			err = c.listStreams(ctx)
		}
		c.refreshMu.Unlock()
		if err != nil {
			return meta.NamespaceKey{}, false, err
		}
		c.mu.RLock()
		ns, known = c.streams[stream]
		k, keyed = c.keys[ns]
		c.mu.RUnlock()
	}
	if !known {
		// Deleted, or never existed: refused, as the sequencer would refuse its commit.
		return meta.NamespaceKey{}, false, fmt.Errorf("envelope: stream %d is in no namespace: %w", stream, meta.ErrStreamNotFound)
	}
	return k, keyed, nil
}

// NamespaceOf answers the namespace key of stream's namespace; ok false when it has none.
func (c *Catalog) NamespaceOf(ctx context.Context, stream uint64) (meta.NamespaceKey, bool, error) {
	return c.lookup(ctx, stream)
}

// Of is the Keyring's view of a namespace key.
func Of(k meta.NamespaceKey) Namespace {
	return Namespace{ID: k.ID, Name: k.Namespace, KeyARN: k.KeyARN}
}

// SealChunk seals the chunk id of a keyed namespace's stream: sealed bytes and the length
// of their envelope, or ok false (the stream's namespace has no key: write it as it is).
// ErrKeyUnavailable when its key cannot be had.
func (c *Catalog) SealChunk(ctx context.Context, id ChunkID, plaintext []byte) (sealed []byte, envLen int, ok bool, err error) {
	k, keyed, err := c.lookup(ctx, id.StreamID)
	if err != nil || !keyed {
		return nil, 0, false, err
	}
	if c.cfg.Keyring == nil {
		return nil, 0, false, noKMS(k)
	}
	sealed, err = c.cfg.Keyring.Seal(ctx, Of(k), id, plaintext)
	if err != nil {
		return nil, 0, false, err
	}
	n, err := EnvelopeLen(sealed)
	return sealed, n, err == nil, err
}

// OpenChunk opens a sealed chunk id: ErrKeyUnavailable (naming the namespace) when its key
// cannot be had or its namespace has no key on record, ErrSealed when it does not open.
func (c *Catalog) OpenChunk(ctx context.Context, id ChunkID, sealed []byte) ([]byte, error) {
	k, keyed, err := c.lookup(ctx, id.StreamID)
	if err != nil {
		return nil, err
	}
	if !keyed {
		return nil, fmt.Errorf("%w: stream %d: a sealed chunk, and its namespace has no key on record", ErrKeyUnavailable, id.StreamID)
	}
	if c.cfg.Keyring == nil {
		return nil, noKMS(k)
	}
	return c.cfg.Keyring.Open(ctx, Of(k), id, sealed)
}

func noKMS(k meta.NamespaceKey) error {
	return fmt.Errorf("%w: namespace %s: this log node has no KMS configured", ErrKeyUnavailable, k.Namespace)
}

// Keyed reports whether stream's namespace has a key (its chunks are sealed).
func (c *Catalog) Keyed(ctx context.Context, stream uint64) (bool, error) {
	_, keyed, err := c.lookup(ctx, stream)
	return keyed, err
}
