package reader

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/walfmt"
)

// ArrowChunk is one committed chunk of an arrow stream: its first offset and its payload
// (arrow frames, shared/arrowenc), whose rows take offsets BaseOffset onward.
type ArrowChunk struct {
	BaseOffset int64
	Payload    []byte
}

// ArrowResult is what ReadArrow returns.
type ArrowResult struct {
	Chunks        []ArrowChunk // the first may start before the offset asked
	NextOffset    int64
	HighWatermark int64
	LogStart      int64
}

// maxArrowEntries bounds the index entries one ReadArrow looks up.
const maxArrowEntries = 64

// ReadArrow reads the chunks of an arrow stream's partition from offset on, with range
// GETs of the WAL chunks the sequencer's index names, until maxBytes of payload (at least
// one chunk when there is one). It does not wait: a read at the high watermark returns no
// chunks. It bypasses the caches, which hold Kafka batches. Memory: at most maxBytes plus
// one chunk. Segments of arrow streams do not exist yet: an entry of another kind fails.
func (r *Reader) ReadArrow(ctx context.Context, streamID uint64, partition int32, offset int64, maxBytes int64) (ArrowResult, error) {
	entries, st, err := r.cfg.Meta.Lookup(ctx, streamID, partition, offset, maxArrowEntries)
	if err != nil {
		return ArrowResult{}, err
	}
	out := ArrowResult{NextOffset: offset, HighWatermark: st.HighWatermark, LogStart: st.LogStart}
	var size int64
	for _, e := range entries {
		if len(out.Chunks) > 0 && size+e.Length > maxBytes {
			break
		}
		if e.Kind != meta.KindWAL {
			return ArrowResult{}, fmt.Errorf("reader: arrow stream %d partition %d: index entry at offset %d is a %v, not a WAL chunk", streamID, partition, e.BaseOffset, e.Kind)
		}
		payload, err := walfmt.ReadChunk(ctx, r.cfg.Bucket, e.Object, walfmt.ChunkRef{StreamID: streamID, Partition: partition,
			Encoding: walfmt.EncodingArrow, Records: e.Count, Offset: e.Offset, Length: e.Length})
		if err != nil {
			return ArrowResult{}, err
		}
		out.Chunks = append(out.Chunks, ArrowChunk{BaseOffset: e.BaseOffset, Payload: payload})
		out.NextOffset = e.End()
		size += e.Length
	}
	return out, nil
}
