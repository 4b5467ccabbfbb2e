package reader

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/segfmt"
	"github.com/loamhq/loam/shared/walfmt"
)

// Reads from the bucket are shared: concurrent misses of one WAL object, or of one segment
// block, make one read. A shared read runs detached from the callers that wait for it (its
// own deadline, ReadTimeout): a caller that goes away leaves the wait, and the read goes
// on for the others.

type flightCall struct {
	done chan struct{}
	val  any
	err  error
}

// shared runs fn once for every concurrent caller of key, under a context of its own, and
// waits for it or for ctx, whichever ends first.
func (r *Reader) shared(ctx context.Context, key string, fn func(ctx context.Context) (any, error)) (any, error) {
	r.flightMu.Lock()
	c := r.flight[key]
	if c == nil {
		c = &flightCall{done: make(chan struct{})}
		r.flight[key] = c
		r.flightMu.Unlock()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ReadTimeout)
		go func() {
			defer cancel()
			c.val, c.err = fn(sctx)
			r.flightMu.Lock()
			delete(r.flight, key)
			r.flightMu.Unlock()
			close(c.done)
		}()
	} else {
		r.flightMu.Unlock()
	}
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// span returns patched batches of one index entry holding offset: a whole WAL chunk, or
// the block of a segment that holds offset, from the chunk cache or read from the bucket.
func (r *Reader) span(ctx context.Context, k pkey, e meta.IndexEntry, offset int64) (*span, error) {
	if e.Kind == meta.KindSegment {
		return r.segmentSpan(ctx, k, e, offset)
	}
	ck := chunkKey{object: e.Object, stream: k.stream, partition: k.partition, block: -1}
	if it := r.chunks.get(ck); it != nil {
		r.cfg.Metrics.hit("chunk")
		return r.serve(ctx, it, e)
	}
	var obj *walObject
	for try := 0; ; try++ {
		v, err := r.shared(ctx, "wal\x00"+e.Object, func(ctx context.Context) (any, error) {
			// A read of this object may have finished between the miss above and this
			// flight: then its chunks are cached, and the object is not read again.
			if try < 2 && r.chunks.get(ck) != nil {
				return (*walObject)(nil), nil
			}
			return r.readObject(ctx, e.Object)
		})
		if err != nil {
			return nil, err
		}
		obj = v.(*walObject)
		if obj != nil {
			break
		}
		if it := r.chunks.get(ck); it != nil {
			r.cfg.Metrics.hit("chunk")
			return r.serve(ctx, it, e)
		}
		// This fetch joined a flight that found another partition's chunk cached and
		// read nothing: go again (the third try reads whatever the cache holds).
	}
	it := r.chunks.get(ck)
	if it == nil {
		// Not kept by the read (not tracked here when it ran, or evicted since): cut it
		// from the object the read returned.
		i, ok := chunkIndex(obj.index, k.stream, k.partition)
		if !ok {
			return nil, fmt.Errorf("reader: %s holds no chunk of stream %d partition %d, its index entry [%d+%d] says it does",
				e.Object, k.stream, k.partition, e.Offset, e.Length)
		}
		var err error
		if it, err = chunkOf(obj, i); err != nil {
			return nil, err
		}
		it = r.chunks.put(ck, it)
	}
	return r.serve(ctx, it, e)
}

// walObject is a whole WAL object as one shared read returns it.
type walObject struct {
	key   string
	body  []byte
	index *walfmt.Object
}

// keepWholeFraction: a WAL object no larger than this fraction of the chunk cache is kept
// whole (a fetch of any of its partitions soon after costs no read).
const keepWholeFraction = 64

// readObject reads a whole WAL object with one GET, checks it, and keeps its chunks in the
// chunk cache: all of them when the object is small next to the cache, else the chunk of
// every partition this node tracks (fetched or written here lately, or being looked up).
// A partition not tracked yet when such a read ran, whose chunk is asked for after it,
// costs another read.
func (r *Reader) readObject(ctx context.Context, key string) (*walObject, error) {
	r.cfg.Metrics.hit("object")
	b, err := r.cfg.Bucket.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reader: read %s: %w", key, err)
	}
	o, err := walfmt.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("reader: %s: %w", key, err)
	}
	obj := &walObject{key: key, body: b, index: o}
	keep := make([]int, 0, len(o.Chunks))
	whole := int64(len(b)) <= r.cfg.ChunkCacheBytes/keepWholeFraction
	r.mu.Lock()
	for i, ref := range o.Chunks {
		if k := (pkey{ref.StreamID, ref.Partition}); whole || r.parts[k] != nil || r.loading[k] != nil {
			keep = append(keep, i)
		}
	}
	r.mu.Unlock()
	for _, i := range keep {
		ref := o.Chunks[i]
		it, err := chunkOf(obj, i)
		if err != nil {
			return nil, err
		}
		r.chunks.put(chunkKey{object: key, stream: ref.StreamID, partition: ref.Partition, block: -1}, it)
	}
	if m := r.cfg.Metrics; m != nil {
		m.chunkBytes.Set(float64(r.chunks.size()))
	}
	return obj, nil
}

// chunkOf copies chunk i's payload out of its object (so the cache holds what it
// accounts for, not the whole object). A sealed chunk is kept sealed, with its identity:
// the first fetch of it opens it (seal.go).
func chunkOf(obj *walObject, i int) (*chunkItem, error) {
	ref := obj.index.Chunks[i]
	hdr, payload, err := walfmt.DecodeChunk(obj.body[ref.Offset : ref.Offset+ref.Length])
	if err != nil {
		return nil, fmt.Errorf("reader: %s [%d+%d]: %w", obj.key, ref.Offset, ref.Length, err)
	}
	if hdr.Encrypted != ref.Encrypted {
		return nil, fmt.Errorf("reader: %s [%d+%d]: the chunk header and the index disagree on whether it is encrypted", obj.key, ref.Offset, ref.Length)
	}
	data := append([]byte(nil), payload...)
	it := &chunkItem{data: data, size: int64(len(data)), at: ref.Offset, n: ref.Length}
	if ref.Encrypted {
		it.sealed = &envelope.ChunkID{Object: obj.key, Index: uint32(i), StreamID: ref.StreamID, Partition: ref.Partition}
	}
	return it, nil
}

// serveChunk returns the chunk's batches with baseOffsets patched from e, patching them
// the first time.
func serveChunk(it *chunkItem, e meta.IndexEntry) (*span, error) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.at != e.Offset || it.n != e.Length {
		return nil, fmt.Errorf("reader: %s: the index entry of offset %d says its chunk is at [%d+%d], the object has it at [%d+%d]",
			e.Object, e.BaseOffset, e.Offset, e.Length, it.at, it.n)
	}
	if it.sp != nil {
		if it.sp.base == e.BaseOffset {
			return it.sp, nil
		}
		return nil, fmt.Errorf("reader: %s: the chunk was served at offset %d, its index entry now says %d", e.Object, it.sp.base, e.BaseOffset)
	}
	// A WAL batch still carries the producer's baseOffset: offsets are dense in a chunk.
	off := e.BaseOffset
	rest := it.data
	for len(rest) > 0 {
		batch, tail, err := recordbatch.Parse(rest)
		if err != nil {
			return nil, fmt.Errorf("reader: %s [%d+%d] at offset %d: %w", e.Object, e.Offset, e.Length, off, err)
		}
		_ = recordbatch.SetBaseOffset(batch.Raw, off)
		off += batch.OffsetCount()
		rest = tail
	}
	it.sp = &span{base: e.BaseOffset, end: e.End(), data: it.data}
	return it.sp, nil
}

// segmentSpan returns the block of a segment holding (or following) offset.
func (r *Reader) segmentSpan(ctx context.Context, k pkey, e meta.IndexEntry, offset int64) (*span, error) {
	seg, err := r.segmentInfo(ctx, e)
	if err != nil {
		return nil, err
	}
	if seg.Header.Encoding != segfmt.EncodingKafka {
		// Its groups are column chunks, not Kafka batches (ReadArrowColumns reads them).
		return nil, fmt.Errorf("reader: %s is an %v segment: fetch it as arrow", e.Object, seg.Header.Encoding)
	}
	block := blockOf(seg, offset)
	if block < 0 {
		// No batch of the segment holds or follows offset (compacted away).
		return &span{base: offset, end: e.End()}, nil
	}
	ck := chunkKey{object: e.Object, stream: k.stream, partition: k.partition, block: block}
	if it := r.chunks.get(ck); it != nil {
		r.cfg.Metrics.hit("chunk")
		return it.sp, nil
	}
	v, err := r.shared(ctx, fmt.Sprintf("seg\x00%s\x00%d", e.Object, block), func(ctx context.Context) (any, error) {
		sp, err := r.readBlock(ctx, e, seg, block)
		if err != nil {
			return nil, err
		}
		r.chunks.put(ck, &chunkItem{data: sp.data, sp: sp, size: int64(len(sp.data))})
		return sp, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*span), nil
}
