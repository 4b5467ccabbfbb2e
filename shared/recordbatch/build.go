package recordbatch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
)

// BuildOptions are the header fields Append cannot derive from the records.
//
// The zero value means producer ID 0, epoch 0, base sequence 0: the first batch of an
// idempotent producer. Start from DefaultBuildOptions (all three -1, "no producer")
// unless that is what you mean.
type BuildOptions struct {
	BaseOffset    int64
	Compression   Compression
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
}

// DefaultBuildOptions returns options for a non-idempotent, uncompressed batch at base
// offset 0: ProducerID, ProducerEpoch and BaseSequence are -1.
func DefaultBuildOptions() BuildOptions {
	return BuildOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
}

// Append appends one batch holding recs to dst and returns the extended slice. On error
// dst is returned unchanged in length.
//
// Offset deltas: if every record has OffsetDelta 0, record i gets delta i; otherwise the
// given deltas are used and must be strictly increasing from 0 or more (ErrBadRecords).
// LastOffsetDelta is the last record's delta. FirstTimestamp is the first record's
// timestamp and MaxTimestamp the largest; PartitionLeaderEpoch is -1 and only the
// compression bits of the attributes are set (create time, not transactional). Snappy
// is written in xerial framing (what Java producers write; every client reads it). A
// compressed batch whose records exceed DefaultMaxDecompressed is refused with
// ErrTooLarge, since readers with the default limit would refuse it.
func Append(dst []byte, recs []Record, opt BuildOptions) ([]byte, error) {
	if len(recs) == 0 {
		return dst, fmt.Errorf("recordbatch: append: no records: %w", ErrBadRecords)
	}
	if len(recs) > maxInt32 {
		return dst, fmt.Errorf("recordbatch: append: %d records: %w", len(recs), ErrTooLarge)
	}
	if !opt.Compression.valid() {
		return dst, fmt.Errorf("recordbatch: append: codec %d: %w", int8(opt.Compression), ErrUnsupportedCompression)
	}
	explicit := false
	for i := range recs {
		if recs[i].OffsetDelta != 0 {
			explicit = true
			break
		}
	}
	if explicit {
		prev := int32(-1)
		for i := range recs {
			if d := recs[i].OffsetDelta; d <= prev {
				return dst, fmt.Errorf("recordbatch: append: record %d: offsetDelta %d after %d, want strictly increasing from 0: %w", i, d, prev, ErrBadRecords)
			}
			prev = recs[i].OffsetDelta
		}
	}
	deltaOf := func(i int) int32 {
		if explicit {
			return recs[i].OffsetDelta
		}
		return int32(i)
	}

	first := recs[0].Timestamp
	maxTS := first
	for i := range recs {
		maxTS = max(maxTS, recs[i].Timestamp)
	}

	start := len(dst)
	dst = slices.Grow(dst, HeaderSize)[:start+HeaderSize]

	// Size the records section first: it bounds the buffer to grow once, and refuses
	// oversized input before anything is copied.
	size, err := recordsSize(recs, first, deltaOf)
	if err != nil {
		return dst[:start], err
	}
	if opt.Compression == None {
		dst = slices.Grow(dst, int(size))
		dst = appendRecords(dst, recs, first, deltaOf)
	} else {
		if size > DefaultMaxDecompressed {
			return dst[:start], fmt.Errorf("recordbatch: append: %d bytes of records exceed the %d-byte decompression limit: %w", size, DefaultMaxDecompressed, ErrTooLarge)
		}
		buf := getBuf()
		raw := appendRecords(slices.Grow((*buf)[:0], int(size)), recs, first, deltaOf)
		if cap(raw) <= maxPooledBuf {
			*buf = raw[:0]
		}
		dst, err = compress(dst, raw, opt.Compression)
		putBuf(buf)
		if err != nil {
			return dst[:start], fmt.Errorf("recordbatch: append: compress %s: %w", opt.Compression, err)
		}
	}

	length := len(dst) - start - lengthPrefix
	if length > maxInt32 {
		return dst[:start], fmt.Errorf("recordbatch: append: batch of %d bytes: %w", length+lengthPrefix, ErrTooLarge)
	}
	h := dst[start : start+HeaderSize]
	binary.BigEndian.PutUint64(h[offBaseOffset:], uint64(opt.BaseOffset))
	binary.BigEndian.PutUint32(h[offBatchLength:], uint32(length))
	binary.BigEndian.PutUint32(h[offPartitionLeaderEpoch:], 0xffffffff) // -1
	h[offMagic] = byte(Magic)
	binary.BigEndian.PutUint16(h[offAttributes:], uint16(opt.Compression))
	binary.BigEndian.PutUint32(h[offLastOffsetDelta:], uint32(deltaOf(len(recs)-1)))
	binary.BigEndian.PutUint64(h[offFirstTimestamp:], uint64(first))
	binary.BigEndian.PutUint64(h[offMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint64(h[offProducerID:], uint64(opt.ProducerID))
	binary.BigEndian.PutUint16(h[offProducerEpoch:], uint16(opt.ProducerEpoch))
	binary.BigEndian.PutUint32(h[offBaseSequence:], uint32(opt.BaseSequence))
	binary.BigEndian.PutUint32(h[offNumRecords:], uint32(len(recs)))
	binary.BigEndian.PutUint32(h[offCRC:], crc32.Checksum(dst[start+offAttributes:], castagnoli))
	return dst, nil
}

// recordsSize is the size of the uncompressed records section, refusing records the
// format cannot hold.
func recordsSize(recs []Record, first int64, deltaOf func(int) int32) (int64, error) {
	var size int64
	for i := range recs {
		r := &recs[i]
		for j := range r.Headers {
			if len(r.Headers[j].Key) > maxInt32 || len(r.Headers[j].Value) > maxInt32 {
				return 0, fmt.Errorf("recordbatch: append: record %d header %d: longer than 2^31-1 bytes: %w", i, j, ErrTooLarge)
			}
		}
		if len(r.Key) > maxInt32 || len(r.Value) > maxInt32 || len(r.Headers) > maxInt32 {
			return 0, fmt.Errorf("recordbatch: append: record %d: key, value or header count over 2^31-1: %w", i, ErrTooLarge)
		}
		body := recordBodyLen(r, deltaOf(i), r.Timestamp-first)
		if body > maxInt32 {
			return 0, fmt.Errorf("recordbatch: append: record %d: %d bytes: %w", i, body, ErrTooLarge)
		}
		size += int64(varintLen(body)) + body
		if size > maxInt32 {
			return 0, fmt.Errorf("recordbatch: append: records section over %d bytes at record %d: %w", maxInt32, i, ErrTooLarge)
		}
	}
	return size, nil
}

// appendRecords appends the records section, uncompressed; recordsSize has checked
// the records.
func appendRecords(dst []byte, recs []Record, first int64, deltaOf func(int) int32) []byte {
	for i := range recs {
		r := &recs[i]
		delta, tsDelta := deltaOf(i), r.Timestamp-first
		dst = appendRecord(dst, r, delta, tsDelta, recordBodyLen(r, delta, tsDelta))
	}
	return dst
}
