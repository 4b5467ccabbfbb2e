package reader

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/walfmt"
)

// Opener opens sealed chunks (envelope.Catalog): envelope.ErrKeyUnavailable, naming the
// namespace, when its key cannot be had; envelope.ErrSealed when the chunk does not open.
type Opener interface {
	OpenChunk(ctx context.Context, id envelope.ChunkID, sealed []byte) ([]byte, error)
}

// serve opens a sealed chunk (once: the cache then holds its plaintext) and serves it. A
// chunk that does not open stays sealed in the cache, so a fetch after its key is back
// (re-enabled in KMS) opens it; nothing of it is served meanwhile.
func (r *Reader) serve(ctx context.Context, it *chunkItem, e meta.IndexEntry) (*span, error) {
	if err := r.open(ctx, it); err != nil {
		return nil, err
	}
	return serveChunk(it, e)
}

func (r *Reader) open(ctx context.Context, it *chunkItem) error {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.sealed == nil {
		return nil
	}
	id := *it.sealed
	if r.cfg.Opener == nil {
		return fmt.Errorf("reader: %s chunk %d (stream %d partition %d): %w: sealed, and this node has no KMS configured",
			id.Object, id.Index, id.StreamID, id.Partition, envelope.ErrKeyUnavailable)
	}
	pt, err := r.cfg.Opener.OpenChunk(ctx, id, it.data)
	if err != nil {
		return fmt.Errorf("reader: %s chunk %d (stream %d partition %d): %w", id.Object, id.Index, id.StreamID, id.Partition, err)
	}
	it.data, it.sealed = pt, nil
	return nil
}

// chunkIndex is the position of (stream, partition)'s chunk in o: part of a sealed
// chunk's identity.
func chunkIndex(o *walfmt.Object, stream uint64, partition int32) (int, bool) {
	return slices.BinarySearchFunc(o.Chunks, [2]int64{int64(stream), int64(partition)}, func(c walfmt.ChunkRef, k [2]int64) int {
		switch {
		case c.StreamID < uint64(k[0]):
			return -1
		case c.StreamID > uint64(k[0]):
			return 1
		}
		return int(c.Partition) - int(k[1])
	})
}

// DropNamespace drops everything the reader caches of a shredded namespace: the streams'
// tail-cache spans, chunks and blocks, tracked state, and the on-disk blocks of objects
// under prefix (the namespace's segments, ns/<id>/). It runs before the node confirms
// the shred.
func (r *Reader) DropNamespace(streams []uint64, prefix string) error {
	for _, s := range streams {
		r.Forget(s)
	}
	if r.disk != nil && prefix != "" {
		r.disk.removePrefix(prefix)
	}
	r.segs.removePrefix(prefix)
	return nil
}

// nsDiskPrefix is the file-name prefix of a namespace's objects (ns/<id>/...) in the disk
// cache, "ns-<id>-", so a shred finds their files by name, also after a restart; other
// keys have none.
func nsDiskPrefix(key string) string {
	rest, ok := strings.CutPrefix(key, "ns/")
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, "/")
	if !ok || id == "" || strings.Trim(id, "0123456789") != "" {
		return ""
	}
	return "ns-" + id + "-"
}

// removePrefix drops the files of objects under prefix (a namespace's ns/<id>/).
func (c *diskCache) removePrefix(prefix string) {
	name := nsDiskPrefix(prefix)
	if name == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, el := range c.items {
		if strings.HasPrefix(n, name) {
			c.dropLocked(el)
		}
	}
}

func (c *infoCache) removePrefix(prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, el := range c.items {
		if strings.HasPrefix(k, prefix) {
			c.lru.Remove(el)
			delete(c.items, k)
		}
	}
}
