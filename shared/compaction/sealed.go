package compaction

import (
	"context"
	"errors"
	"fmt"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
)

// ErrSealedSegments: the partition's segments are sealed with its namespace's key
// (under ns/<id>/seg/) and this compactor has no Config.Keys to open them.
var ErrSealedSegments = errors.New("compaction: sealed segments of a namespace with a key, and no namespace keys configured")

// Segments of namespaces with a key (docs/encryption.md): with Config.Keys set, the
// compactor reads and writes through an envelope.PagesBucket, so it opens a keyed
// namespace's sealed segments and writes the compacted ones sealed, under the same
// ns/<id>/seg/ prefix. A namespace whose key cannot be had is left as it is
// (ErrKeyUnavailable from Partition, nothing swapped; the sweep goes on with the other
// partitions and reports it with its errors).

// sealedPages wraps cfg.Bucket in a PagesBucket when keys are configured.
func sealedPages(cfg *Config) error {
	if cfg.Keys == nil {
		return nil
	}
	pb, err := envelope.NewPagesBucket(envelope.PagesConfig{Bucket: cfg.Bucket, Keys: cfg.Keys, PageSize: cfg.PageSize, SSEKMS: cfg.SSEKMS})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	cfg.Bucket = pb
	return nil
}

// checkSealed refuses a run of sealed segments when no keys are configured.
func (c *Compactor) checkSealed(segs []meta.IndexEntry) error {
	if c.cfg.Keys != nil {
		return nil
	}
	for _, e := range segs {
		if _, ok := envelope.SealedNamespace(e.Object); ok {
			return fmt.Errorf("%s: %w", e.Object, ErrSealedSegments)
		}
	}
	return nil
}

// segmentKey is where a compacted segment of the run old is put: under its namespace's
// ns/<id>/ when the stream's namespace has a key (or the run was sealed), else key.
func (c *Compactor) segmentKey(ctx context.Context, stream uint64, old []meta.IndexEntry, key string) (string, error) {
	for _, e := range old {
		if id, ok := envelope.SealedNamespace(e.Object); ok {
			return envelope.SegmentKey(id, key), nil
		}
	}
	if c.cfg.Keys == nil {
		return key, nil
	}
	k, keyed, err := c.cfg.Keys.NamespaceOf(ctx, stream)
	if err != nil {
		return "", err
	}
	if keyed {
		return envelope.SegmentKey(k.ID, key), nil
	}
	return key, nil
}

// refreshKeys lists the namespace keys once per sweep, so a shred or rotation is seen.
func (c *Compactor) refreshKeys(ctx context.Context) {
	if c.cfg.Keys == nil {
		return
	}
	if err := c.cfg.Keys.Refresh(ctx); err != nil {
		c.cfg.Logger.Warn("namespace keys refresh failed", "err", err)
	}
}
