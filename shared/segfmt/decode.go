package segfmt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/loamhq/loam/shared/recordbatch"
)

// reader reads big-endian fields from b with a sticky error: after the first short read
// every later read returns zero values and err keeps the first failure.
type reader struct {
	b    []byte
	off  int
	base int64 // offset of b in its object, for messages
	err  error
}

func (r *reader) take(n int, field string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.off < n {
		r.err = bad(ErrTruncated, "%s at offset %d: need %d bytes, have %d",
			field, r.base+int64(r.off), n, len(r.b)-r.off)
		return nil
	}
	p := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return p
}

func (r *reader) u8(field string) uint8 {
	if p := r.take(1, field); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16(field string) uint16 {
	if p := r.take(2, field); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (r *reader) u32(field string) uint32 {
	if p := r.take(4, field); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64(field string) uint64 {
	if p := r.take(8, field); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

func (r *reader) i64(field string) int64 { return int64(r.u64(field)) }

// pos is the object offset of the next byte.
func (r *reader) pos() int64 { return r.base + int64(r.off) }

// Decode validates a whole segment object and returns its Info: header, trailer and index
// (every CRC, every range, header and index agreeing), then every batch: its CRC32C from
// the index, recordbatch.Parse (length, magic, Kafka CRC), and its base offset, offset
// count, max timestamp and header fields against the index and the header's figures.
// Records are not decompressed. Info.Batches refers into obj by offset; nothing aliases it.
func Decode(obj []byte) (*Info, error) {
	info, err := decode(obj)
	if err != nil {
		return nil, fmt.Errorf("segfmt: decode: %w", err)
	}
	return info, nil
}

func decode(obj []byte) (*Info, error) {
	h, err := decodeHeader(obj, 0, "header")
	if err != nil {
		return nil, err
	}
	if len(obj) < HeaderSize+TrailerSize {
		return nil, bad(ErrTruncated, "object of %d bytes has no room for a trailer after the header", len(obj))
	}
	size := int64(len(obj))
	t, err := decodeTrailer(obj[size-TrailerSize:], size)
	if err != nil {
		return nil, err
	}
	info, err := decodeIndex(obj[t.indexOff:size-TrailerSize], obj[size-TrailerSize:], t)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(obj[:HeaderSize], obj[t.indexOff:t.indexOff+HeaderSize]) {
		return nil, bad(ErrCorrupt, "header copy at offset %d differs from the header (%+v, index says %+v)",
			t.indexOff, h, info.Header)
	}
	data := obj[info.DataOffset:info.IndexOffset()]
	if h.Encoding == EncodingArrow {
		err = info.checkGroups(0, len(info.Batches), data)
	} else {
		err = info.checkBatches(0, len(info.Batches), data, true)
	}
	if err != nil {
		return nil, err
	}
	return info, nil
}

// decodeHeader decodes and checks the header at the start of b, which sits at object
// offset at (0 for the header, the index offset for its copy).
func decodeHeader(b []byte, at int64, what string) (Header, error) {
	r := reader{b: b, base: at}
	if m := r.take(len(magic), what+" magic"); r.err == nil && string(m) != magic {
		return Header{}, bad(ErrBadMagic, "%s magic %q at offset %d, want %q", what, m, at, magic)
	}
	if v := r.u16(what + " version"); r.err == nil && v != Version {
		return Header{}, fmt.Errorf("%s at offset %d: version %d, this reader supports %d: %w", what, at, v, Version, ErrUnsupportedVersion)
	}
	if n := r.u16(what + " length"); r.err == nil && n != HeaderSize {
		return Header{}, bad(ErrCorrupt, "%s at offset %d: length %d, version 1 has %d", what, at, n, HeaderSize)
	}
	r.take(HeaderSize-r.off, what)
	if r.err != nil {
		return Header{}, r.err
	}
	sum := crc32.Checksum(b[:offHeaderCRC], castagnoli)
	if want := binary.BigEndian.Uint32(b[offHeaderCRC:]); sum != want {
		return Header{}, bad(ErrBadCRC, "%s crc32c at offset %d is %#08x, computed %#08x", what, at+offHeaderCRC, want, sum)
	}
	r.off = 12
	h := Header{Encoding: Encoding(r.u8("encoding"))}
	flags := r.u8("flags")
	reserved := r.u16("reserved")
	h.StreamID = r.u64("stream id")
	h.Partition = int32(r.u32("partition"))
	h.BatchCount = int64(r.u32("batch count"))
	h.BaseOffset = r.i64("base offset")
	h.EndOffset = r.i64("end offset")
	h.OffsetCount = r.i64("offset count")
	h.RecordCount = r.i64("record count")
	h.MinTimestamp = r.i64("min timestamp")
	h.MaxTimestamp = r.i64("max timestamp")
	h.CreatedMs = r.i64("created")
	if r.err != nil {
		return Header{}, r.err
	}
	if msg := headerProblem(&h, flags, reserved); msg != "" {
		return Header{}, bad(ErrCorrupt, "%s at offset %d: %s", what, at, msg)
	}
	return h, nil
}

func headerProblem(h *Header, flags uint8, reserved uint16) string {
	switch {
	case h.Encoding != EncodingKafka && h.Encoding != EncodingArrow:
		return fmt.Sprintf("unknown %v", h.Encoding)
	case h.Encoding == EncodingArrow && h.RecordCount != h.OffsetCount:
		return fmt.Sprintf("record count %d, offset count %d: an arrow segment's rows take one offset each", h.RecordCount, h.OffsetCount)
	case flags != 0 || reserved != 0:
		return fmt.Sprintf("flags %#02x, reserved %#04x: version 1 sets neither", flags, reserved)
	case h.Partition < 0:
		return fmt.Sprintf("negative partition %d", h.Partition)
	case h.BaseOffset < 0 || h.EndOffset <= h.BaseOffset:
		return fmt.Sprintf("offset range [%d, %d) is empty or negative", h.BaseOffset, h.EndOffset)
	case h.BatchCount < 1:
		return "no batches"
	case h.OffsetCount < h.BatchCount || h.OffsetCount > h.EndOffset-h.BaseOffset:
		return fmt.Sprintf("offset count %d outside %d..%d (batches..range)", h.OffsetCount, h.BatchCount, h.EndOffset-h.BaseOffset)
	case h.RecordCount < 0 || h.RecordCount > h.OffsetCount:
		return fmt.Sprintf("record count %d outside 0..%d (offset count)", h.RecordCount, h.OffsetCount)
	}
	return ""
}

// trailer is a decoded trailer's ranges.
type trailer struct {
	dataOff, dataLen, indexOff, indexLen int64
}

// minIndexLen is the smallest index: header copy and a batch index of one entry.
const minIndexLen = HeaderSize + SectionHeaderSize + indexEntryCountField + IndexEntrySize

// decodeTrailer checks the trailer t (the last TrailerSize bytes of an object of size
// bytes) and returns its ranges. The index CRC is checked by decodeIndex.
func decodeTrailer(t []byte, size int64) (trailer, error) {
	at := size - TrailerSize
	if got := string(t[34:42]); got != magic {
		return trailer{}, bad(ErrBadMagic, "trailer magic %q at offset %d, want %q (truncated object?)", got, at+34, magic)
	}
	if v := binary.BigEndian.Uint16(t[32:34]); v != Version {
		return trailer{}, fmt.Errorf("trailer at offset %d: version %d, this reader supports %d: %w", at+32, v, Version, ErrUnsupportedVersion)
	}
	be := binary.BigEndian
	// Compared as unsigned and against the size first, so huge values cannot wrap.
	dataOff, dataLen, indexOff := be.Uint64(t[0:]), be.Uint64(t[8:]), be.Uint64(t[16:])
	indexLen := uint64(be.Uint32(t[24:]))
	u := uint64(at)
	switch {
	case dataOff != HeaderSize:
		return trailer{}, bad(ErrCorrupt, "trailer at offset %d: data offset %d, version 1 has %d", at, dataOff, HeaderSize)
	case dataLen > u || indexOff > u || indexOff != dataOff+dataLen || indexOff+indexLen != u:
		return trailer{}, bad(ErrCorrupt, "trailer at offset %d: data [%d, +%d) and index [%d, +%d) do not tile the object up to the trailer",
			at, dataOff, dataLen, indexOff, indexLen)
	case dataLen < minDataLen:
		return trailer{}, bad(ErrCorrupt, "trailer at offset %d: data length %d holds no batch", at, dataLen)
	case indexLen < minIndexLen:
		return trailer{}, bad(ErrCorrupt, "trailer at offset %d: index length %d below the minimum %d", at, indexLen, minIndexLen)
	}
	return trailer{int64(dataOff), int64(dataLen), int64(indexOff), int64(indexLen)}, nil
}

// decodeIndex checks the CRC over index and trailer[0:28], then decodes the index: the
// header copy, the batch index (first) and any other sections. It checks every entry
// against the data region and the header's figures that the index can confirm.
func decodeIndex(index, trl []byte, t trailer) (*Info, error) {
	sum := crc32.Update(crc32.Checksum(index, castagnoli), castagnoli, trl[:offTrailerCRC])
	if want := binary.BigEndian.Uint32(trl[offTrailerCRC:]); sum != want {
		return nil, bad(ErrBadCRC, "index crc32c in the trailer at offset %d is %#08x, computed %#08x",
			t.indexOff+t.indexLen+offTrailerCRC, want, sum)
	}
	h, err := decodeHeader(index, t.indexOff, "header copy")
	if err != nil {
		return nil, err
	}
	info := &Info{Header: h, DataOffset: t.dataOff, DataLength: t.dataLen, Size: t.indexOff + t.indexLen + TrailerSize}
	r := reader{b: index, off: HeaderSize, base: t.indexOff}
	for first := true; r.off < len(r.b); first = false {
		at := r.pos()
		typ := r.u16("section type")
		flags := r.u16("section flags")
		n := r.u32("section length")
		body := r.take(int(n), "section body")
		if r.err != nil {
			return nil, r.err
		}
		switch {
		case first != (typ == SectionBatchIndex):
			return nil, bad(ErrCorrupt, "section at offset %d: type %d; the batch index comes first, once", at, typ)
		case typ == SectionBatchIndex:
			if flags != 0 {
				return nil, bad(ErrCorrupt, "batch index at offset %d: flags %#04x, version 1 sets none", at, flags)
			}
			if err := info.decodeBatchIndex(body, at+SectionHeaderSize); err != nil {
				return nil, err
			}
		case typ == 0:
			return nil, bad(ErrCorrupt, "section at offset %d: type 0", at)
		case typ == SectionColumnRanges && h.Encoding == EncodingArrow:
			if info.Arrow != nil || flags != SectionOptional {
				return nil, bad(ErrCorrupt, "column ranges at offset %d (flags %#04x): an arrow segment has one, flags 1", at, flags)
			}
			if err := info.decodeColumnRanges(body, at+SectionHeaderSize); err != nil {
				return nil, err
			}
		case flags&SectionOptional == 0:
			return nil, fmt.Errorf("section at offset %d: type %d (flags %#04x) must be understood and this reader does not know it: %w",
				at, typ, flags, ErrUnsupportedVersion)
		default:
			info.extra = append(info.extra, section{typ: typ, flags: flags, body: bytes.Clone(body)})
		}
	}
	if h.Encoding == EncodingArrow && info.Arrow == nil {
		return nil, bad(ErrCorrupt, "arrow segment at offset %d: no column-ranges section", t.indexOff)
	}
	return info, nil
}

// decodeBatchIndex decodes the batch index section's body, which starts at object offset
// at, into i.Batches.
func (i *Info) decodeBatchIndex(body []byte, at int64) error {
	h := &i.Header
	r := reader{b: body, base: at}
	count := int64(r.u32("batch index count"))
	if r.err != nil {
		return r.err
	}
	if count != h.BatchCount || int64(len(body)) != indexEntryCountField+count*IndexEntrySize {
		return bad(ErrCorrupt, "batch index at offset %d: %d entries in %d bytes, header says %d batches",
			at, count, len(body), h.BatchCount)
	}
	i.Batches = make([]BatchRef, count)
	next := i.DataOffset // where the next batch must start
	var offsets int64
	maxTS := int64(math.MinInt64)
	for k := range i.Batches {
		eat := r.pos()
		ref := BatchRef{BaseOffset: r.i64("base offset")}
		ref.Count = int64(r.u32("offset count"))
		ref.MaxTimestamp = r.i64("max timestamp")
		rel := r.u64("byte offset")
		length := r.u32("length")
		ref.CRC = r.u32("crc32c")
		if r.err != nil {
			return r.err
		}
		switch {
		case rel != uint64(next-i.DataOffset):
			return bad(ErrCorrupt, "batch index entry %d at offset %d: byte offset %d, want %d (batches are back to back)",
				k, eat, rel, next-i.DataOffset)
		case length < minBatchLen(h.Encoding) || length > math.MaxInt32 || int64(length) > i.IndexOffset()-next:
			return bad(ErrCorrupt, "batch index entry %d at offset %d: length %d out of range", k, eat, length)
		case ref.Count < 1 || ref.Count > math.MaxInt32+1:
			return bad(ErrCorrupt, "batch index entry %d at offset %d: offset count %d out of range", k, eat, ref.Count)
		case ref.BaseOffset < h.BaseOffset || ref.Count > h.EndOffset-ref.BaseOffset:
			return bad(ErrCorrupt, "batch index entry %d at offset %d: offsets [%d, +%d) outside the segment's [%d, %d)",
				k, eat, ref.BaseOffset, ref.Count, h.BaseOffset, h.EndOffset)
		case k > 0 && ref.BaseOffset < i.Batches[k-1].End():
			return bad(ErrCorrupt, "batch index entry %d at offset %d: base offset %d before the previous batch's end %d",
				k, eat, ref.BaseOffset, i.Batches[k-1].End())
		}
		ref.Offset, ref.Length = next, int32(length)
		i.Batches[k] = ref
		next += int64(length)
		offsets += ref.Count
		maxTS = max(maxTS, ref.MaxTimestamp)
	}
	switch {
	case next != i.IndexOffset():
		return bad(ErrCorrupt, "batch index at offset %d: batches end at offset %d, the index starts at %d", at, next, i.IndexOffset())
	case offsets != h.OffsetCount:
		return bad(ErrCorrupt, "batch index at offset %d: batches span %d offsets, header says %d", at, offsets, h.OffsetCount)
	case maxTS != h.MaxTimestamp:
		return bad(ErrCorrupt, "batch index at offset %d: largest max timestamp %d, header says %d", at, maxTS, h.MaxTimestamp)
	}
	return nil
}

// CheckBatches validates b as the bytes of batches [from, to) of the segment, as read
// with one range read of Span(from, to): its length, each batch's CRC32C from the index,
// recordbatch.Parse, and each batch's base offset, offset count and max timestamp against
// the index. It fails with ErrInvalid when from and to are out of range and with a
// corruption error otherwise.
func (i *Info) CheckBatches(from, to int, b []byte) error {
	if from < 0 || from > to || to > len(i.Batches) {
		return fmt.Errorf("segfmt: check batches [%d, %d) of %d: %w", from, to, len(i.Batches), ErrInvalid)
	}
	check := func() error { return i.checkBatches(from, to, b, false) }
	if i.Arrow != nil {
		check = func() error { return i.checkGroups(from, to, b) }
	}
	if err := check(); err != nil {
		return fmt.Errorf("segfmt: check batches [%d, %d): %w", from, to, err)
	}
	return nil
}

// checkBatches is CheckBatches; whole (all batches) adds the header's figures that only
// the batches themselves confirm: record count and min timestamp.
func (i *Info) checkBatches(from, to int, b []byte, whole bool) error {
	off, n := i.Span(from, to)
	if int64(len(b)) != n {
		kind := ErrTruncated
		if int64(len(b)) > n {
			kind = ErrCorrupt
		}
		return bad(kind, "batches at offset %d: %d bytes, the index says %d", off, len(b), n)
	}
	var records int64
	minTS := int64(math.MaxInt64)
	for k := from; k < to; k++ {
		ref := i.Batches[k]
		raw := b[ref.Offset-off : ref.Offset-off+int64(ref.Length)]
		bt, rest, err := recordbatch.Parse(raw)
		if err != nil {
			return badBatch(err, "batch %d at offset %d", k, ref.Offset)
		}
		// Parse checked bytes [21, end) against the Kafka CRC; the index CRC adds the rest.
		if sum := batchCRC(bt); len(rest) == 0 && sum != ref.CRC {
			return bad(ErrBadCRC, "batch %d at offset %d: crc32c %#08x in the index, computed %#08x", k, ref.Offset, ref.CRC, sum)
		}
		msg := batchProblem(bt)
		switch {
		case msg != "":
		case len(rest) != 0:
			msg = fmt.Sprintf("batchLength leaves %d bytes of the indexed length", len(rest))
		case bt.BaseOffset != ref.BaseOffset || bt.OffsetCount() != ref.Count || bt.MaxTimestamp != ref.MaxTimestamp:
			msg = fmt.Sprintf("base offset %d, %d offsets, max timestamp %d; the index says %d, %d, %d",
				bt.BaseOffset, bt.OffsetCount(), bt.MaxTimestamp, ref.BaseOffset, ref.Count, ref.MaxTimestamp)
		}
		if msg != "" {
			return bad(ErrCorrupt, "batch %d at offset %d: %s", k, ref.Offset, msg)
		}
		records += int64(bt.NumRecords)
		minTS = min(minTS, bt.FirstTimestamp)
	}
	if whole {
		h := &i.Header
		if records != h.RecordCount || minTS != h.MinTimestamp {
			return bad(ErrCorrupt, "batches hold %d records with min timestamp %d, header says %d and %d",
				records, minTS, h.RecordCount, h.MinTimestamp)
		}
	}
	return nil
}

// minBatchLen is the smallest batch of a segment of encoding e: a Kafka batch header, or
// an arrow group of one 8-byte column chunk.
func minBatchLen(e Encoding) uint32 {
	if e == EncodingArrow {
		return minDataLen
	}
	return recordbatch.HeaderSize
}
