// Package arrowstream is what the log node's APIs share to produce to and read from arrow
// streams (encoding arrow, shared/arrowenc) besides JSON: a cache of the streams' schema
// versions, the placement of a client's Arrow record batches on partitions as writer
// requests, and the decoding of stored frames into record batches from an offset. The
// HTTP API (Arrow IPC produce), the gRPC API (produce of IPC bytes, fetch of records built
// on the fly), Arrow Flight (DoGet, DoPut) and the Kafka gateway (RecordBatch v2 built on
// the fly) use it.
package arrowstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
)

// Schema cache bounds: parsed schemas by (stream, version), cleared when full; the latest
// version of a stream is asked of the sequencer again after LatestTTL.
const (
	MaxCachedSchemas = 1024
	LatestTTL        = 2 * time.Second
)

// ErrNoSchemas is returned when the node's sequencer client keeps no schemas.
var ErrNoSchemas = errors.New("arrowstream: this node's sequencer client keeps no stream schemas")

type schemaKey struct {
	stream  uint64
	version uint32
}

type latest struct {
	version uint32
	at      time.Time
}

// Schemas caches stream schemas read from the sequencer. Memory: at most MaxCachedSchemas
// parsed schemas and as many latest-version entries.
type Schemas struct {
	mc     meta.Client
	mu     sync.Mutex
	byKey  map[schemaKey]*arrowenc.Schema
	latest map[uint64]latest
}

// NewSchemas returns a cache over mc (which must implement meta.SchemaClient for arrow
// streams to be served).
func NewSchemas(mc meta.Client) *Schemas { return &Schemas{mc: mc} }

// Get returns version v (0: the latest) of stream id's schema and its version.
func (c *Schemas) Get(ctx context.Context, id uint64, v uint32) (*arrowenc.Schema, uint32, error) {
	now := time.Now()
	c.mu.Lock()
	if v == 0 {
		if l, ok := c.latest[id]; ok && now.Sub(l.at) < LatestTTL {
			v = l.version
		}
	}
	if v != 0 {
		if sch := c.byKey[schemaKey{id, v}]; sch != nil {
			c.mu.Unlock()
			return sch, v, nil
		}
	}
	c.mu.Unlock()
	sc, ok := c.mc.(meta.SchemaClient)
	if !ok {
		return nil, 0, ErrNoSchemas
	}
	got, err := sc.GetSchema(ctx, id, v)
	if err != nil {
		return nil, 0, err
	}
	sch, err := arrowenc.ParseSchema(got.Schema)
	if err != nil {
		return nil, 0, fmt.Errorf("arrowstream: stream %d schema version %d: %w", id, got.Version, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil || len(c.byKey) >= MaxCachedSchemas {
		c.byKey = make(map[schemaKey]*arrowenc.Schema)
	}
	if c.latest == nil || len(c.latest) >= MaxCachedSchemas {
		c.latest = make(map[uint64]latest)
	}
	c.byKey[schemaKey{id, got.Version}] = sch
	if v == 0 {
		c.latest[id] = latest{version: got.Version, at: now}
	}
	return sch, got.Version, nil
}

// Forget drops what the cache knows of stream id's latest version, so the next Get asks
// the sequencer (after this node stored a new version).
func (c *Schemas) Forget(id uint64) {
	c.mu.Lock()
	delete(c.latest, id)
	c.mu.Unlock()
}

// GetFunc returns version v (0: the latest) of a stream's schema and its version.
type GetFunc func(ctx context.Context, v uint32) (*arrowenc.Schema, uint32, error)

// Match returns the version of stream st's schema that got (a client's Arrow schema)
// conforms to (MatchWith, with this cache).
func (c *Schemas) Match(ctx context.Context, st meta.Stream, got *arrow.Schema) (*arrowenc.Schema, uint32, error) {
	return MatchWith(ctx, st, got, func(ctx context.Context, v uint32) (*arrowenc.Schema, uint32, error) { return c.Get(ctx, st.ID, v) })
}

// MatchWith returns the version of stream st's schema that got (a client's Arrow schema)
// conforms to (arrowenc.Conform): the latest, or an older version with as many columns.
// Versions only append columns, so the column count finds the candidate (a binary search).
// The error, which wraps arrowenc.ErrSchemaMismatch, names the first difference from the
// latest version.
func MatchWith(ctx context.Context, st meta.Stream, got *arrow.Schema, get GetFunc) (*arrowenc.Schema, uint32, error) {
	sch, v, err := get(ctx, 0)
	if err != nil {
		return nil, 0, err
	}
	first := arrowenc.Conform(sch, got)
	if first == nil {
		return sch, v, nil
	}
	// More columns than the latest known version: a newer one may have been stored since
	// the latest was read (a cache keeps it up to LatestTTL).
	for next := v + 1; got.NumFields() > len(sch.Fields) && next <= meta.MaxSchemaVersions; next++ {
		newer, _, err := get(ctx, next)
		if errors.Is(err, meta.ErrSchemaNotFound) {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		if arrowenc.Conform(newer, got) == nil {
			return newer, next, nil
		}
		if len(newer.Fields) >= got.NumFields() {
			break
		}
	}
	lo, hi := uint32(1), v
	for got.NumFields() < len(sch.Fields) && lo < hi {
		mid := lo + (hi-lo)/2 // lo <= mid < hi
		old, _, err := get(ctx, mid)
		if err != nil {
			return nil, 0, err
		}
		switch n := len(old.Fields); {
		case n == got.NumFields() && arrowenc.Conform(old, got) == nil:
			return old, mid, nil
		case n <= got.NumFields():
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return nil, 0, fmt.Errorf("%w (schema version %d of stream %q)", first, v, st.Name)
}
