package segfmt

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/loamhq/loam/shared/recordbatch"
)

// Writer builds one segment object in memory, batch by batch. Use NewWriter, Add every
// batch in offset order, then Finish. A Writer is not safe for concurrent use.
type Writer struct {
	h        Header
	explicit bool // h.BaseOffset/EndOffset were given; batches must lie within them
	buf      []byte
	batches  []BatchRef
	prevEnd  int64 // end offset of the last batch added
	done     bool

	schemas []ArrowSchema   // arrow segments: schemas added
	groups  []ArrowGroupRef // arrow segments: the column ranges of each group added

	offsets, records int64
	minTS, maxTS     int64
}

// NewWriter starts a segment with h's Encoding, StreamID, Partition and CreatedMs.
//
// BaseOffset and EndOffset are the range of offsets the segment stands for. Leave both
// zero to take them from the batches (the first batch's base offset, the last batch's
// end); set both to cover a wider range, as compaction does when it removed records at
// either end. The timestamps and counts in h are ignored: Finish computes them.
//
// A kafka segment takes batches (Add), an arrow segment schemas and groups (AddSchema,
// AddGroup); another encoding or a bad range fails with ErrInvalid.
func NewWriter(h Header) (*Writer, error) { return NewWriterBuffer(h, nil) }

// NewWriterBuffer is NewWriter building the object in buf[:0], so that a caller writing
// many segments reuses one buffer (allocating and first touching 64 MiB costs more than
// building a segment in it). The object Finish returns shares buf's memory when it fits.
func NewWriterBuffer(h Header, buf []byte) (*Writer, error) {
	switch {
	case h.Encoding != EncodingKafka && h.Encoding != EncodingArrow:
		return nil, fmt.Errorf("segfmt: new writer: unknown %v: %w", h.Encoding, ErrInvalid)
	case h.Partition < 0:
		return nil, fmt.Errorf("segfmt: new writer: negative partition %d: %w", h.Partition, ErrInvalid)
	}
	explicit := h.BaseOffset != 0 || h.EndOffset != 0
	if explicit && (h.BaseOffset < 0 || h.EndOffset <= h.BaseOffset) {
		return nil, fmt.Errorf("segfmt: new writer: offset range [%d, %d) is empty or negative: %w",
			h.BaseOffset, h.EndOffset, ErrInvalid)
	}
	if buf == nil {
		buf = make([]byte, 0, 64<<10)
	}
	w := &Writer{
		h: Header{Encoding: h.Encoding, StreamID: h.StreamID, Partition: h.Partition, CreatedMs: h.CreatedMs,
			BaseOffset: h.BaseOffset, EndOffset: h.EndOffset},
		explicit: explicit,
		buf:      append(buf[:0], make([]byte, HeaderSize)...),
		minTS:    math.MaxInt64,
		maxTS:    math.MinInt64,
	}
	return w, nil
}

// Size is the size of a segment whose data region is dataBytes bytes in batches batches
// (with no optional sections): Reserve(Size(...)) spares every reallocation.
func Size(dataBytes int64, batches int) int64 {
	return HeaderSize + dataBytes + HeaderSize + SectionHeaderSize + indexEntryCountField +
		int64(batches)*IndexEntrySize + TrailerSize
}

// Reserve makes room for an object of size bytes in all, sparing reallocations when the
// caller knows the segment's size (see Size).
func (w *Writer) Reserve(size int64) {
	if size > int64(cap(w.buf)) && size <= math.MaxInt {
		w.buf = slices.Grow(w.buf, int(size)-len(w.buf))
	}
}

// Len is the number of bytes added so far, header included: the object's size before
// the index and trailer.
func (w *Writer) Len() int64 { return int64(len(w.buf)) }

// Batches is the number of batches added so far.
func (w *Writer) Batches() int { return len(w.batches) }

// Add appends one batch: Kafka RecordBatch v2 bytes with their assigned base offset
// already set (recordbatch.SetBaseOffset), exactly one batch, copied verbatim.
//
// The batch must parse (length, magic, CRC), have a known codec, lastOffsetDelta >= 0 and
// 0 <= numRecords <= lastOffsetDelta+1, start after the end of the previous batch (gaps are
// allowed) and lie within the writer's offset range if one was given. A rejected batch
// fails with ErrInvalid and leaves the writer as it was.
func (w *Writer) Add(batch []byte) error {
	if w.done {
		return fmt.Errorf("segfmt: add batch: writer already finished: %w", ErrInvalid)
	}
	if w.h.Encoding != EncodingKafka {
		return fmt.Errorf("segfmt: add batch: a %v segment holds groups (AddGroup): %w", w.h.Encoding, ErrInvalid)
	}
	b, rest, err := recordbatch.Parse(batch)
	if err != nil {
		return fmt.Errorf("segfmt: add batch %d: %w: %w", len(w.batches), err, ErrInvalid)
	}
	if len(rest) != 0 {
		return fmt.Errorf("segfmt: add batch %d at base offset %d: %d bytes after the batch: %w",
			len(w.batches), b.BaseOffset, len(rest), ErrInvalid)
	}
	if msg := batchProblem(b); msg != "" {
		return fmt.Errorf("segfmt: add batch %d at base offset %d: %s: %w", len(w.batches), b.BaseOffset, msg, ErrInvalid)
	}
	switch {
	case b.BaseOffset < 0:
		return fmt.Errorf("segfmt: add batch %d: negative base offset %d: %w", len(w.batches), b.BaseOffset, ErrInvalid)
	case len(w.batches) > 0 && b.BaseOffset < w.prevEnd:
		return fmt.Errorf("segfmt: add batch %d: base offset %d is before the previous batch's end %d: %w",
			len(w.batches), b.BaseOffset, w.prevEnd, ErrInvalid)
	case b.BaseOffset > math.MaxInt64-b.OffsetCount():
		return fmt.Errorf("segfmt: add batch %d: base offset %d + %d offsets overflows: %w",
			len(w.batches), b.BaseOffset, b.OffsetCount(), ErrInvalid)
	case w.explicit && (b.BaseOffset < w.h.BaseOffset || b.BaseOffset+b.OffsetCount() > w.h.EndOffset):
		return fmt.Errorf("segfmt: add batch %d: offsets [%d, %d) outside the segment's range [%d, %d): %w",
			len(w.batches), b.BaseOffset, b.BaseOffset+b.OffsetCount(), w.h.BaseOffset, w.h.EndOffset, ErrInvalid)
	case len(w.batches) == math.MaxUint32:
		return fmt.Errorf("segfmt: add batch: segment already holds %d batches: %w", len(w.batches), ErrInvalid)
	}
	ref := BatchRef{
		Offset:       int64(len(w.buf)),
		Length:       int32(len(batch)),
		BaseOffset:   b.BaseOffset,
		Count:        b.OffsetCount(),
		MaxTimestamp: b.MaxTimestamp,
		CRC:          batchCRC(b), // Parse checked the Kafka CRC: no second pass
	}
	w.buf = append(w.buf, batch...)
	w.batches = append(w.batches, ref)
	w.prevEnd = ref.End()
	w.offsets += ref.Count
	w.records += int64(b.NumRecords)
	w.minTS = min(w.minTS, b.FirstTimestamp)
	w.maxTS = max(w.maxTS, b.MaxTimestamp)
	return nil
}

// batchProblem checks the header fields recordbatch.Parse leaves alone, as both Add and
// Decode need them.
func batchProblem(b recordbatch.Batch) string {
	switch {
	case b.Compression() > recordbatch.Zstd || b.Compression() < recordbatch.None:
		return fmt.Sprintf("unknown %v", b.Compression())
	case b.LastOffsetDelta < 0:
		return fmt.Sprintf("lastOffsetDelta %d is negative", b.LastOffsetDelta)
	case b.NumRecords < 0 || int64(b.NumRecords) > b.OffsetCount():
		return fmt.Sprintf("numRecords %d outside 0..lastOffsetDelta+1 = %d", b.NumRecords, b.OffsetCount())
	}
	return ""
}

// Finish completes the object and returns it with its Info (whose Batches alias nothing
// in the object). A segment needs at least one batch (ErrInvalid). After Finish the
// Writer accepts nothing more; the returned bytes belong to the caller.
func (w *Writer) Finish() ([]byte, Info, error) {
	return w.finish(nil)
}

// finish is Finish with extra index sections after the batch index (tests only: version
// 1 writers write none, readers skip optional ones).
func (w *Writer) finish(extra []section) ([]byte, Info, error) {
	if w.done {
		return nil, Info{}, fmt.Errorf("segfmt: finish: writer already finished: %w", ErrInvalid)
	}
	if len(w.batches) == 0 {
		return nil, Info{}, fmt.Errorf("segfmt: finish: no batches: %w", ErrInvalid)
	}
	var arrowIdx *ArrowIndex
	var arrowLen int64
	if w.h.Encoding == EncodingArrow {
		slices.SortFunc(w.schemas, func(a, b ArrowSchema) int { return int64cmp(int64(a.ID), int64(b.ID)) })
		arrowIdx = &ArrowIndex{Schemas: w.schemas, Groups: w.groups}
		arrowLen = SectionHeaderSize + int64(len(arrowSectionBody(nil, arrowIdx)))
	}
	indexLen := int64(HeaderSize+SectionHeaderSize+indexEntryCountField) + int64(len(w.batches))*IndexEntrySize
	indexLen += arrowLen
	for _, s := range extra {
		indexLen += SectionHeaderSize + int64(len(s.body))
	}
	if indexLen > math.MaxUint32 {
		return nil, Info{}, fmt.Errorf("segfmt: finish: index of %d bytes exceeds 4 GiB: %w", indexLen, ErrInvalid)
	}
	w.done = true
	h := w.h
	if !w.explicit {
		h.BaseOffset = w.batches[0].BaseOffset
		h.EndOffset = w.batches[len(w.batches)-1].End()
	}
	h.MinTimestamp, h.MaxTimestamp = w.minTS, w.maxTS
	h.BatchCount, h.OffsetCount, h.RecordCount = int64(len(w.batches)), w.offsets, w.records

	info := Info{
		Header:     h,
		DataOffset: HeaderSize,
		DataLength: int64(len(w.buf)) - HeaderSize,
		Batches:    w.batches,
		Arrow:      arrowIdx,
		extra:      extra,
	}
	buf := w.buf
	w.buf, w.batches = nil, nil
	buf = slices.Grow(buf, int(indexLen)+TrailerSize)
	putHeader(buf[:HeaderSize], &h)
	buf = appendIndexAndTrailer(buf, &info)
	info.Size = int64(len(buf))
	return buf, info, nil
}

// putHeader writes the HeaderSize bytes of h into b.
func putHeader(b []byte, h *Header) {
	be := binary.BigEndian
	copy(b[0:8], magic)
	be.PutUint16(b[8:], Version)
	be.PutUint16(b[10:], HeaderSize)
	b[12] = byte(h.Encoding)
	b[13] = 0 // flags
	be.PutUint16(b[14:], 0)
	be.PutUint64(b[16:], h.StreamID)
	be.PutUint32(b[24:], uint32(h.Partition))
	be.PutUint32(b[28:], uint32(h.BatchCount))
	be.PutUint64(b[32:], uint64(h.BaseOffset))
	be.PutUint64(b[40:], uint64(h.EndOffset))
	be.PutUint64(b[48:], uint64(h.OffsetCount))
	be.PutUint64(b[56:], uint64(h.RecordCount))
	be.PutUint64(b[64:], uint64(h.MinTimestamp))
	be.PutUint64(b[72:], uint64(h.MaxTimestamp))
	be.PutUint64(b[80:], uint64(h.CreatedMs))
	be.PutUint32(b[offHeaderCRC:], crc32.Checksum(b[:offHeaderCRC], castagnoli))
}

// appendIndexAndTrailer appends the index (header copy, batch index, info.extra) and the
// trailer for info to obj, which holds the object up to the end of its data region.
func appendIndexAndTrailer(obj []byte, info *Info) []byte {
	be := binary.BigEndian
	indexOff := len(obj)
	obj = append(obj, make([]byte, HeaderSize)...)
	putHeader(obj[indexOff:], &info.Header)

	obj = be.AppendUint16(obj, SectionBatchIndex)
	obj = be.AppendUint16(obj, 0)
	obj = be.AppendUint32(obj, uint32(indexEntryCountField+len(info.Batches)*IndexEntrySize))
	obj = be.AppendUint32(obj, uint32(len(info.Batches)))
	for _, r := range info.Batches {
		obj = be.AppendUint64(obj, uint64(r.BaseOffset))
		obj = be.AppendUint32(obj, uint32(r.Count))
		obj = be.AppendUint64(obj, uint64(r.MaxTimestamp))
		obj = be.AppendUint64(obj, uint64(r.Offset-info.DataOffset))
		obj = be.AppendUint32(obj, uint32(r.Length))
		obj = be.AppendUint32(obj, r.CRC)
	}
	if info.Arrow != nil {
		obj = be.AppendUint16(obj, SectionColumnRanges)
		obj = be.AppendUint16(obj, SectionOptional)
		at := len(obj)
		obj = be.AppendUint32(obj, 0)
		obj = arrowSectionBody(obj, info.Arrow)
		be.PutUint32(obj[at:], uint32(len(obj)-at-4))
	}
	for _, s := range info.extra {
		obj = be.AppendUint16(obj, s.typ)
		obj = be.AppendUint16(obj, s.flags)
		obj = be.AppendUint32(obj, uint32(len(s.body)))
		obj = append(obj, s.body...)
	}

	trailer := len(obj)
	obj = be.AppendUint64(obj, uint64(info.DataOffset))
	obj = be.AppendUint64(obj, uint64(info.DataLength))
	obj = be.AppendUint64(obj, uint64(indexOff))
	obj = be.AppendUint32(obj, uint32(trailer-indexOff))
	crc := crc32.Checksum(obj[indexOff:], castagnoli)
	obj = be.AppendUint32(obj, crc)
	obj = be.AppendUint16(obj, Version)
	return append(obj, magic...)
}
