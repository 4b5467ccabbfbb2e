package segfmt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/loamhq/loam/shared/recordbatch"
)

// memReader is a RangeReader over in-memory objects with objstore.Bucket's GetRange
// semantics: n < 0 reads to the end, a range past the end is cut, off beyond the size fails.
type memReader map[string][]byte

var errNoObject = errors.New("memReader: no such object")

func (m memReader) GetRange(_ context.Context, key string, off, n int64) ([]byte, error) {
	b, ok := m[key]
	if !ok {
		return nil, errNoObject
	}
	if off < 0 || off > int64(len(b)) {
		return nil, fmt.Errorf("memReader: offset %d of %d-byte object", off, len(b))
	}
	end := int64(len(b))
	if n >= 0 && off+n < end {
		end = off + n
	}
	return slices.Clone(b[off:end]), nil
}

// countingReader counts range reads and the bytes they return.
type countingReader struct {
	RangeReader
	reads, bytes atomic.Int64
}

func (c *countingReader) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b, err := c.RangeReader.GetRange(ctx, key, off, n)
	c.reads.Add(1)
	c.bytes.Add(int64(len(b)))
	return b, err
}

// pattern returns n deterministic bytes derived from seed.
func pattern(seed uint32, n int) []byte {
	b := make([]byte, n)
	x := seed*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// batchSpec describes a test batch: records at the given offset deltas (none: an empty
// batch spanning count offsets, as compaction leaves), timestamps from ts, ts+1, ...
type batchSpec struct {
	base   int64
	deltas []int32 // nil: 0..count-1
	count  int     // records when deltas is nil; offsets of an empty batch when empty
	empty  bool
	ts     int64
	value  int // value size per record
	codec  recordbatch.Compression
}

// build returns the batch's bytes with base offset b.base.
func (b batchSpec) build(t testing.TB) []byte {
	t.Helper()
	if b.empty {
		return emptyBatch(b.base, int32(b.count-1), b.ts, b.ts+5)
	}
	n := b.count
	if b.deltas != nil {
		n = len(b.deltas)
	}
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{
			Timestamp: b.ts + int64(i),
			Key:       fmt.Appendf(nil, "key-%d", i),
			Value:     pattern(uint32(b.base)+uint32(i), b.value),
		}
		if b.deltas != nil {
			recs[i].OffsetDelta = b.deltas[i]
		}
	}
	opt := recordbatch.DefaultBuildOptions()
	opt.BaseOffset = b.base
	opt.Compression = b.codec
	out, err := recordbatch.Append(nil, recs, opt)
	if err != nil {
		t.Fatalf("recordbatch.Append: %v", err)
	}
	return out
}

// emptyBatch hand-builds a batch with no records whose offsets span lastOffsetDelta+1, as
// Kafka's cleaner leaves to keep a producer's last sequence.
func emptyBatch(base int64, lastOffsetDelta int32, firstTS, maxTS int64) []byte {
	be := binary.BigEndian
	b := make([]byte, recordbatch.HeaderSize)
	be.PutUint64(b[0:], uint64(base))
	be.PutUint32(b[8:], recordbatch.HeaderSize-12)
	be.PutUint32(b[12:], 0xffffffff) // partitionLeaderEpoch -1
	b[16] = 2
	be.PutUint16(b[21:], 0) // attributes
	be.PutUint32(b[23:], uint32(lastOffsetDelta))
	be.PutUint64(b[27:], uint64(firstTS))
	be.PutUint64(b[35:], uint64(maxTS))
	be.PutUint64(b[43:], 7) // producer id
	be.PutUint16(b[51:], 1) // epoch
	be.PutUint32(b[53:], 99)
	be.PutUint32(b[57:], 0) // numRecords
	resealBatch(b)
	return b
}

// resealBatch recomputes a batch's Kafka CRC after its header was changed.
func resealBatch(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
}

// buildSegment writes a segment of the given batches with header h.
func buildSegment(t testing.TB, h Header, batches [][]byte) ([]byte, Info) {
	t.Helper()
	w, err := NewWriter(h)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	for i, b := range batches {
		if err := w.Add(b); err != nil {
			t.Fatalf("Add batch %d: %v", i, err)
		}
	}
	obj, info, err := w.Finish()
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return obj, info
}

// reseal recomputes every CRC of a segment after a test changed it on purpose: header,
// header copy, each batch (Kafka CRC and index entry) and the trailer. It trusts the
// trailer's ranges and the index entries' byte ranges as far as they lie inside obj, and
// skips what does not (fuzzing feeds it anything).
func reseal(obj []byte) {
	be := binary.BigEndian
	size := uint64(len(obj))
	if size < HeaderSize+TrailerSize {
		return
	}
	be.PutUint32(obj[offHeaderCRC:], crc32.Checksum(obj[:offHeaderCRC], castagnoli))
	trl := obj[size-TrailerSize:]
	dataOff, indexOff, indexLen := be.Uint64(trl[0:]), be.Uint64(trl[16:]), uint64(be.Uint32(trl[24:]))
	if indexOff > size-TrailerSize || indexLen > size-TrailerSize-indexOff || dataOff > size {
		return
	}
	index := obj[indexOff : indexOff+indexLen]
	if len(index) >= HeaderSize {
		be.PutUint32(index[offHeaderCRC:], crc32.Checksum(index[:offHeaderCRC], castagnoli))
	}
	if len(index) >= HeaderSize+SectionHeaderSize+indexEntryCountField {
		entries := index[HeaderSize+SectionHeaderSize:]
		n := uint64(be.Uint32(entries))
		for k := uint64(0); k < n && indexEntryCountField+(k+1)*IndexEntrySize <= uint64(len(entries)); k++ {
			e := entries[indexEntryCountField+k*IndexEntrySize:]
			off, length := dataOff+be.Uint64(e[20:]), uint64(be.Uint32(e[28:]))
			if off < dataOff || off > size || length > size-off {
				continue
			}
			raw := obj[off : off+length]
			if len(raw) > 21 {
				resealBatch(raw)
			}
			be.PutUint32(e[32:], crc32.Checksum(raw, castagnoli))
		}
	}
	be.PutUint32(trl[offTrailerCRC:], crc32.Checksum(obj[indexOff:size-TrailerSize+offTrailerCRC], castagnoli))
}

// isDecodeFailure reports whether err is one of the errors a reader may return for bad
// bytes: corruption or a version/encoding this reader does not support.
func isDecodeFailure(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrUnsupportedEncoding)
}

func mustDecodeFail(t *testing.T, what string, err error) {
	t.Helper()
	if !isDecodeFailure(err) {
		t.Fatalf("%s failed with %v, which is neither corruption nor unsupported", what, err)
	}
}

// equalInfo compares two Infos field by field (extra sections included).
func equalInfo(a, b *Info) bool {
	return a.Header == b.Header && a.DataOffset == b.DataOffset && a.DataLength == b.DataLength &&
		a.Size == b.Size && slices.Equal(a.Batches, b.Batches) && reflect.DeepEqual(a.Arrow, b.Arrow) &&
		slices.EqualFunc(a.extra, b.extra, func(x, y section) bool {
			return x.typ == y.typ && x.flags == y.flags && string(x.body) == string(y.body)
		})
}
