package compaction

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
)

// batchLengthPrefix is a RecordBatch's baseOffset (8 bytes) and batchLength (4 bytes):
// the batch's size is batchLengthPrefix + batchLength.
const batchLengthPrefix = 12

// batchReader reads an index entry's data region batch by batch with range GETs of about
// chunk bytes, so it holds at most max(chunk, the largest batch) + chunk bytes whatever the
// entry's size. Its buffer is reused across entries.
type batchReader struct {
	bucket objstore.Bucket
	chunk  int64
	buf    []byte // data read and not yet returned is buf[start:]

	entry      meta.IndexEntry
	pos        int64 // next byte of the entry's region to read, relative to the region
	start      int
	prevOffset int64 // the end of the last batch returned, to check order
}

// reset starts reading e's data region.
func (r *batchReader) reset(e meta.IndexEntry) {
	r.entry, r.pos, r.start, r.buf = e, 0, 0, r.buf[:0]
	r.prevOffset = e.BaseOffset
}

// next returns the entry's next batch (its Raw valid until the next call), or ok false at
// the end of the region.
func (r *batchReader) next(ctx context.Context) (b recordbatch.Batch, ok bool, err error) {
	avail := func() int { return len(r.buf) - r.start }
	left := func() int64 { return r.entry.Length - r.pos }
	if avail() == 0 && left() == 0 {
		return b, false, nil
	}
	if avail() < batchLengthPrefix {
		if err := r.fill(ctx, batchLengthPrefix); err != nil {
			return b, false, err
		}
	}
	n := int64(batchLengthPrefix) + int64(int32(binary.BigEndian.Uint32(r.buf[r.start+8:])))
	if n <= batchLengthPrefix || n > int64(avail())+left() {
		return b, false, fmt.Errorf("compaction: %s: batch at byte %d of its data region claims %d bytes, %d are left: %w",
			r.entry.Object, r.entry.Offset+r.pos-int64(avail()), n, int64(avail())+left(), recordbatch.ErrCorrupt)
	}
	if int64(avail()) < n {
		if err := r.fill(ctx, int(n)); err != nil {
			return b, false, err
		}
	}
	b, _, err = recordbatch.Parse(r.buf[r.start : r.start+int(n)])
	if err != nil {
		return b, false, fmt.Errorf("compaction: %s: %w", r.entry.Object, err)
	}
	if b.BaseOffset < r.prevOffset || b.LastOffset() >= r.entry.End() {
		return b, false, fmt.Errorf("compaction: %s: batch [%d, %d] out of order or outside its entry [%d, %d): %w",
			r.entry.Object, b.BaseOffset, b.LastOffset(), r.prevOffset, r.entry.End(), recordbatch.ErrCorrupt)
	}
	r.prevOffset = b.LastOffset() + 1
	r.start += int(n)
	return b, true, nil
}

// last reports whether the batch next returned last was the entry's last.
func (r *batchReader) last() bool { return r.start == len(r.buf) && r.pos == r.entry.Length }

// fill makes at least need bytes available, reading chunk bytes at a time (more when one
// batch is bigger). The caller checked that the region holds them.
func (r *batchReader) fill(ctx context.Context, need int) error {
	have := copy(r.buf, r.buf[r.start:])
	r.buf, r.start = r.buf[:have], 0
	want := min(max(int64(need-have), r.chunk), r.entry.Length-r.pos)
	if want <= 0 || int64(have)+want < int64(need) {
		return fmt.Errorf("compaction: %s: data region ends inside a batch: %w", r.entry.Object, recordbatch.ErrTruncated)
	}
	data, err := r.bucket.GetRange(ctx, r.entry.Object, r.entry.Offset+r.pos, want)
	if err != nil {
		return fmt.Errorf("compaction: read %s: %w", r.entry.Object, err)
	}
	if int64(len(data)) != want {
		return fmt.Errorf("compaction: read %s at %d: %d bytes, want %d: %w", r.entry.Object, r.entry.Offset+r.pos, len(data), want, recordbatch.ErrTruncated)
	}
	r.buf = append(r.buf, data...)
	r.pos += want
	return nil
}
