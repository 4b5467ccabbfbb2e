package recordbatch

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// minRecordBody is the smallest record body: attributes, timestampDelta, offsetDelta,
// keyLength, valueLength and headerCount, one byte each.
const minRecordBody = 6

// minRecordSize adds the one-byte length prefix.
const minRecordSize = 1 + minRecordBody

// reader decodes one record body with a sticky error: after the first failure every
// read returns zero values and the failure (field and byte position) is kept.
type reader struct {
	src  []byte
	off  int
	base int // position of src[0] within the records section, for messages
	err  string
}

func (r *reader) fail(format string, args ...any) {
	if r.err == "" {
		r.err = fmt.Sprintf(format, args...)
	}
	r.off = len(r.src)
}

func (r *reader) byte(field string) byte {
	if r.err != "" {
		return 0
	}
	if r.off >= len(r.src) {
		r.fail("%s at byte %d: past end of record", field, r.base+r.off)
		return 0
	}
	c := r.src[r.off]
	r.off++
	return c
}

func (r *reader) varlong(field string) int64 {
	if r.err != "" {
		return 0
	}
	v, n := binary.Varint(r.src[r.off:])
	if n <= 0 {
		if n == 0 {
			r.fail("%s varint at byte %d: past end of record", field, r.base+r.off)
		} else {
			r.fail("%s varint at byte %d: overflows 64 bits", field, r.base+r.off)
		}
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint(field string) int32 {
	at := r.off
	v := r.varlong(field)
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail("%s varint at byte %d: %d overflows 32 bits", field, r.base+at, v)
		return 0
	}
	return int32(v)
}

// nullableBytes reads a varint length (-1 = null) and that many bytes, aliasing src.
// field names the bytes, lengthField their length (both constants: no allocation).
func (r *reader) nullableBytes(field, lengthField string) []byte {
	at := r.off
	n := r.varint(lengthField)
	if r.err != "" {
		return nil
	}
	if n == -1 {
		return nil
	}
	if n < -1 {
		r.fail("%s length %d at byte %d: negative", field, n, r.base+at)
		return nil
	}
	if int(n) > len(r.src)-r.off {
		r.fail("%s length %d at byte %d: only %d bytes left in record", field, n, r.base+at, len(r.src)-r.off)
		return nil
	}
	b := r.src[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return b
}

// walk decodes the batch's records from data (the uncompressed records section). It
// checks each record's framing, that exactly NumRecords records fill data, and the
// offset deltas: strict wants delta == index (what producers send), otherwise deltas
// must be strictly increasing within 0..LastOffsetDelta. fn, if non-nil, receives each
// record (only valid during the call; its fields alias data); with fn nil no header is
// materialized.
func (b Batch) walk(data []byte, strict bool, fn func(*Record)) error {
	return b.walkStat(data, strict, fn, nil)
}

// walkStat is walk that also calls stat, if non-nil, with each record's index, absolute
// timestamp and size (key, value, header keys and values), materializing nothing.
func (b Batch) walkStat(data []byte, strict bool, fn func(*Record), stat func(i int, timestamp int64, size int) error) error {
	var (
		rec  Record
		off  int
		prev int32 = -1
	)
	n := int(b.NumRecords)
	for i := range n {
		if off >= len(data) {
			return b.errf("records section of %d bytes holds %d records, numRecords says %d: %w", len(data), i, n, ErrCorrupt)
		}
		length, ln := binary.Varint(data[off:])
		if ln <= 0 {
			return b.errf("record %d: length varint at byte %d is malformed: %w", i, off, ErrCorrupt)
		}
		if length < minRecordBody || length > int64(len(data)-off-ln) {
			return b.errf("record %d: length %d at byte %d: want %d..%d: %w", i, length, off, minRecordBody, len(data)-off-ln, ErrCorrupt)
		}
		bodyAt := off + ln
		r := reader{src: data[bodyAt : bodyAt+int(length)], base: bodyAt}
		r.byte("attributes")
		tsDelta := r.varlong("timestampDelta")
		deltaAt := r.off
		delta := r.varint("offsetDelta")
		key := r.nullableBytes("key", "key length")
		value := r.nullableBytes("value", "value length")
		hdrAt := r.off
		nh := r.varint("header count")
		if r.err == "" && (nh < 0 || int(nh) > (len(r.src)-r.off)/2) {
			r.fail("header count %d at byte %d: want 0..%d", nh, r.base+hdrAt, (len(r.src)-r.off)/2)
		}
		var hdrs []Header
		if fn != nil && nh > 0 && r.err == "" {
			hdrs = make([]Header, 0, nh)
		}
		size := len(key) + len(value)
		for h := 0; h < int(nh) && r.err == ""; h++ {
			kAt := r.off
			k := r.nullableBytes("header key", "header key length")
			if r.err == "" && k == nil {
				r.fail("header %d key at byte %d: null", h, r.base+kAt)
			}
			v := r.nullableBytes("header value", "header value length")
			size += len(k) + len(v)
			if fn != nil && r.err == "" {
				hdrs = append(hdrs, Header{Key: string(k), Value: v})
			}
		}
		if r.err == "" && r.off != len(r.src) {
			r.fail("%d bytes left after headers at byte %d", len(r.src)-r.off, r.base+r.off)
		}
		if r.err != "" {
			return b.errf("record %d: %s: %w", i, r.err, ErrCorrupt)
		}
		if strict {
			if delta != int32(i) {
				return b.errf("record %d: offsetDelta %d at byte %d, want %d: %w", i, delta, bodyAt+deltaAt, i, ErrCorrupt)
			}
		} else if delta <= prev || delta > b.LastOffsetDelta {
			return b.errf("record %d: offsetDelta %d at byte %d, want %d..%d: %w", i, delta, bodyAt+deltaAt, prev+1, b.LastOffsetDelta, ErrCorrupt)
		}
		prev = delta
		if stat != nil {
			if err := stat(i, b.FirstTimestamp+tsDelta, size); err != nil {
				return err
			}
		}
		if fn != nil {
			rec = Record{
				OffsetDelta: delta,
				Timestamp:   b.FirstTimestamp + tsDelta,
				Key:         key,
				Value:       value,
				Headers:     hdrs,
			}
			fn(&rec)
		}
		off = bodyAt + int(length)
	}
	if off != len(data) {
		return b.errf("%d trailing bytes at byte %d after record %d of %d: %w", len(data)-off, off, n, n, ErrCorrupt)
	}
	return nil
}

// varintLen is the size of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	return (bits.Len64(u|1) + 6) / 7
}

// nullableLen is the encoded size of a nullable byte string.
func nullableLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// recordBodyLen is the size of a record after its length prefix.
func recordBodyLen(r *Record, delta int32, tsDelta int64) int64 {
	n := int64(1 + varintLen(tsDelta) + varintLen(int64(delta)) + nullableLen(r.Key) + nullableLen(r.Value))
	n += int64(varintLen(int64(len(r.Headers))))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += int64(varintLen(int64(len(h.Key))) + len(h.Key) + nullableLen(h.Value))
	}
	return n
}

// appendRecord appends one record; body is recordBodyLen's result.
func appendRecord(dst []byte, r *Record, delta int32, tsDelta int64, body int64) []byte {
	dst = binary.AppendVarint(dst, body)
	dst = append(dst, 0) // attributes: unused
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, int64(delta))
	dst = appendNullable(dst, r.Key)
	dst = appendNullable(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendNullable(dst, h.Value)
	}
	return dst
}
