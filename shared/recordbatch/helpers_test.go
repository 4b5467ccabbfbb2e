package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
)

var allCodecs = []Compression{None, Gzip, Snappy, LZ4, Zstd}

// rawBatch builds a batch around a records section by hand, independently of Append:
// the header fields are written at the offsets of the spec layout and the CRC is
// computed over bytes 21..end.
type rawBatch struct {
	base      int64
	attrs     int16
	lastDelta int32
	firstTS   int64
	maxTS     int64
	n         int32
	payload   []byte
}

func (r rawBatch) bytes() []byte {
	b := make([]byte, 61, 61+len(r.payload))
	binary.BigEndian.PutUint64(b[0:], uint64(r.base))
	binary.BigEndian.PutUint32(b[8:], uint32(49+len(r.payload)))
	binary.BigEndian.PutUint32(b[12:], 0xffffffff)
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], uint16(r.attrs))
	binary.BigEndian.PutUint32(b[23:], uint32(r.lastDelta))
	binary.BigEndian.PutUint64(b[27:], uint64(r.firstTS))
	binary.BigEndian.PutUint64(b[35:], uint64(r.maxTS))
	binary.BigEndian.PutUint64(b[43:], ^uint64(0))
	binary.BigEndian.PutUint16(b[51:], 0xffff)
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)
	binary.BigEndian.PutUint32(b[57:], uint32(r.n))
	b = append(b, r.payload...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// recBytes encodes one record body by hand with its length prefix; fields is the body
// as a list of pieces (ints are zigzag varints, []byte raw bytes, byte one byte).
func recBytes(fields ...any) []byte {
	var body []byte
	for _, f := range fields {
		switch v := f.(type) {
		case int:
			body = binary.AppendVarint(body, int64(v))
		case byte:
			body = append(body, v)
		case []byte:
			body = append(body, v...)
		case string:
			body = append(body, v...)
		default:
			panic(fmt.Sprintf("recBytes: %T", f))
		}
	}
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// simpleRec is a well-formed record body with the given offset delta.
func simpleRec(delta int) []byte {
	return recBytes(byte(0), 0, delta, 1, "k", 1, "v", 0)
}

func equalBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// diffRecords reports the first difference between want and got, "" if none.
func diffRecords(want, got []Record) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		switch {
		case w.OffsetDelta != g.OffsetDelta:
			return fmt.Sprintf("record %d: offsetDelta %d, want %d", i, g.OffsetDelta, w.OffsetDelta)
		case w.Timestamp != g.Timestamp:
			return fmt.Sprintf("record %d: timestamp %d, want %d", i, g.Timestamp, w.Timestamp)
		case !equalBytes(w.Key, g.Key):
			return fmt.Sprintf("record %d: key %q (nil %v), want %q (nil %v)", i, g.Key, g.Key == nil, w.Key, w.Key == nil)
		case !equalBytes(w.Value, g.Value):
			return fmt.Sprintf("record %d: value of %d bytes (nil %v), want %d (nil %v)", i, len(g.Value), g.Value == nil, len(w.Value), w.Value == nil)
		case len(w.Headers) != len(g.Headers):
			return fmt.Sprintf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range w.Headers {
			if w.Headers[j].Key != g.Headers[j].Key || !equalBytes(w.Headers[j].Value, g.Headers[j].Value) {
				return fmt.Sprintf("record %d header %d: %q=%q, want %q=%q", i, j, g.Headers[j].Key, g.Headers[j].Value, w.Headers[j].Key, w.Headers[j].Value)
			}
		}
	}
	return ""
}

// withDeltas returns recs with OffsetDelta = index where all deltas are zero, as Append
// assigns them.
func withDeltas(recs []Record) []Record {
	out := append([]Record(nil), recs...)
	for i := range out {
		if out[i].OffsetDelta != 0 {
			return out
		}
	}
	for i := range out {
		out[i].OffsetDelta = int32(i)
	}
	return out
}

// textRecords returns n records with compressible values of size bytes, from a fixed
// seed: words drawn from a small vocabulary, like JSON logs.
func textRecords(n, size int, seed uint64) []Record {
	words := []string{"level", "info", "warn", "user", "id", "request", "path", "/api/v1/items", "status", "200", "latency_ms", "region", "eu-west-1", "trace", "span", "ok"}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	recs := make([]Record, n)
	for i := range recs {
		v := make([]byte, 0, size+16)
		for len(v) < size {
			v = append(v, words[rng.IntN(len(words))]...)
			v = append(v, '=')
			v = strconv.AppendUint(v, rng.Uint64()%100000, 10)
			v = append(v, ' ')
		}
		recs[i] = Record{
			Timestamp: 1_700_000_000_000 + int64(i),
			Key:       fmt.Appendf(nil, "key-%d", i%17),
			Value:     v[:size],
			Headers:   []Header{{Key: "trace", Value: fmt.Appendf(nil, "%016x", rng.Uint64())}},
		}
	}
	return recs
}

func mustAppend(t testing.TB, dst []byte, recs []Record, opt BuildOptions) []byte {
	t.Helper()
	out, err := Append(dst, recs, opt)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return out
}

func withCodec(c Compression) BuildOptions {
	o := DefaultBuildOptions()
	o.Compression = c
	return o
}
