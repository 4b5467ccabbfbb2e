package arrowstream

import (
	"context"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
)

// Batch is stored rows of an arrow stream: Batch's row i has offset Offset+i. Its schema
// is the stored frame's (the version SchemaID's, metadata included).
type Batch struct {
	Offset   int64
	SchemaID uint32
	Batch    arrow.RecordBatch
}

// Read is a read of an arrow stream's partition: the batches from the offset asked (the
// first sliced to start there), the next offset to read and the partition's bounds.
// Release frees the batches.
type Read struct {
	Batches       []Batch
	NextOffset    int64
	HighWatermark int64
	LogStart      int64
}

// Release frees the batches.
func (r *Read) Release() {
	for _, b := range r.Batches {
		b.Batch.Release()
	}
	r.Batches = nil
}

// Rows returns the rows read.
func (r *Read) Rows() int64 {
	var n int64
	for _, b := range r.Batches {
		n += b.Batch.NumRows()
	}
	return n
}

// ReadBatches reads partition p of stream id from offset: up to about maxBytes of stored
// frames (at least one chunk when there is one; reader.ReadArrow), waiting up to maxWait
// for data when offset is the high watermark, decoded into batches that alias the chunks.
// Memory: the chunks read (maxBytes plus one chunk).
func ReadBatches(ctx context.Context, rd *reader.Reader, id uint64, p int32, offset, maxBytes int64, maxWait time.Duration) (*Read, error) {
	if err := rd.WaitArrow(ctx, id, p, offset, maxWait); err != nil {
		return nil, err
	}
	res, err := ReadArrow(ctx, rd, id, p, offset, maxBytes)
	if err != nil {
		return nil, err
	}
	out := &Read{NextOffset: offset, HighWatermark: res.HighWatermark, LogStart: res.LogStart}
	if len(res.Chunks) == 0 {
		out.NextOffset = max(offset, res.NextOffset)
	}
	for _, c := range res.Chunks {
		frames, err := arrowenc.DecodePayload(c.Payload)
		if err != nil {
			out.Release()
			return nil, err
		}
		off := c.BaseOffset
		for _, f := range frames {
			for _, b := range f.Batches {
				rows := b.NumRows()
				if off+rows > offset {
					skip := max(0, offset-off)
					var sl arrow.RecordBatch
					if skip == 0 {
						b.Retain()
						sl = b
					} else {
						sl = b.NewSlice(skip, rows)
					}
					out.Batches = append(out.Batches, Batch{Offset: off + skip, SchemaID: f.SchemaID, Batch: sl})
				}
				off += rows
				out.NextOffset = max(out.NextOffset, off)
			}
		}
		arrowenc.ReleaseFrames(frames)
	}
	return out, nil
}

// ReadArrow is rd.ReadArrow with an offset outside the partition answered as
// *reader.ErrOutOfRange (with the partition's bounds), as a kafka stream's fetch answers
// it, rather than as the sequencer's lookup refusal.
func ReadArrow(ctx context.Context, rd *reader.Reader, id uint64, p int32, offset, maxBytes int64) (reader.ArrowResult, error) {
	if err := rd.CheckArrowRange(ctx, id, p, offset); err != nil {
		return reader.ArrowResult{}, err
	}
	res, err := rd.ReadArrow(ctx, id, p, offset, maxBytes)
	if errors.Is(err, meta.ErrOffsetOutOfRange) {
		// The bounds moved since the check (retention trimmed the log): check again.
		if cerr := rd.CheckArrowRange(ctx, id, p, offset); cerr != nil {
			return reader.ArrowResult{}, cerr
		}
	}
	return res, err
}

// ReadArrowFrames is reader.ReadArrowFrames with ReadArrow's range check: an offset outside
// the partition's bounds answers offset_out_of_range (checked again when the bounds moved
// during the read).
func ReadArrowFrames(ctx context.Context, rd *reader.Reader, q reader.ArrowRead) (reader.ArrowFrames, error) {
	if err := rd.CheckArrowRange(ctx, q.StreamID, q.Partition, q.Offset); err != nil {
		return reader.ArrowFrames{}, err
	}
	res, err := rd.ReadArrowFrames(ctx, q)
	if errors.Is(err, meta.ErrOffsetOutOfRange) {
		if cerr := rd.CheckArrowRange(ctx, q.StreamID, q.Partition, q.Offset); cerr != nil {
			return reader.ArrowFrames{}, cerr
		}
	}
	return res, err
}

// ReadArrowColumns is reader.ReadArrowColumns with ReadArrow's range check.
func ReadArrowColumns(ctx context.Context, rd *reader.Reader, q reader.ArrowRead) (reader.ArrowResult, error) {
	if err := rd.CheckArrowRange(ctx, q.StreamID, q.Partition, q.Offset); err != nil {
		return reader.ArrowResult{}, err
	}
	res, err := rd.ReadArrowColumns(ctx, q)
	if errors.Is(err, meta.ErrOffsetOutOfRange) {
		if cerr := rd.CheckArrowRange(ctx, q.StreamID, q.Partition, q.Offset); cerr != nil {
			return reader.ArrowResult{}, cerr
		}
	}
	return res, err
}
