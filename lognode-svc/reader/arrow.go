package reader

import "context"

// ArrowChunk is one committed chunk of an arrow stream, or one group of an arrow segment:
// its first offset and its payload (arrow frames, shared/arrowenc), whose rows take
// offsets BaseOffset onward.
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

// ReadArrow reads the chunks of an arrow stream's partition from offset on, every column
// (ReadArrowColumns, arrow_segment.go, with no columns named): WAL chunks as they are,
// segment groups as one frame each, until maxBytes read from the bucket (at least one
// chunk when there is one). It does not wait: a read at the high watermark returns no
// chunks.
func (r *Reader) ReadArrow(ctx context.Context, streamID uint64, partition int32, offset int64, maxBytes int64) (ArrowResult, error) {
	return r.ReadArrowColumns(ctx, ArrowRead{StreamID: streamID, Partition: partition, Offset: offset, MaxBytes: maxBytes})
}
