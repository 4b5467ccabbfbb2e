package segfmt

import (
	"fmt"
	"testing"

	"github.com/loamhq/loam/shared/recordbatch"
)

// benchBatches returns uncompressed batches of about batchSize bytes (1 KiB records)
// totalling about 64 MiB, with base offsets from 0.
func benchBatches(b *testing.B, batchSize int) [][]byte {
	const total = 64 << 20
	perBatch := max(1, batchSize/(1<<10))
	one := batchSpec{count: perBatch, ts: 1732870000000, value: 1<<10 - 40}.build(b)
	var out [][]byte
	var next int64
	for size := 0; size < total; size += len(one) {
		raw := append([]byte(nil), one...)
		if err := recordbatch.SetBaseOffset(raw, next); err != nil {
			b.Fatal(err)
		}
		next += int64(perBatch)
		out = append(out, raw)
	}
	return out
}

var benchSizes = []struct {
	name string
	size int
}{{"batch=1MiB", 1 << 20}, {"batch=16KiB", 16 << 10}}

// BenchmarkWriter builds a 64 MiB segment: patch each batch's base offset (as the
// segmenter does), Add it, Finish; in a fresh buffer of the exact size each time
// (buffer=new) or in one reused buffer (buffer=reused).
func BenchmarkWriter(b *testing.B) {
	for _, s := range benchSizes {
		for _, reuse := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/buffer=%s", s.name, map[bool]string{false: "new", true: "reused"}[reuse]), func(b *testing.B) {
				benchWriter(b, s.size, reuse)
			})
		}
	}
}

func benchWriter(b *testing.B, batchSize int, reuse bool) {
	batches := benchBatches(b, batchSize)
	var total int64
	for _, raw := range batches {
		total += int64(len(raw))
	}
	size := Size(total, len(batches))
	var buf []byte
	if reuse {
		buf = make([]byte, size)
	}
	perBatch := int64(max(1, batchSize>>10))
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		w, err := NewWriterBuffer(Header{Encoding: EncodingKafka, StreamID: 1, CreatedMs: 1}, buf)
		if err != nil {
			b.Fatal(err)
		}
		w.Reserve(size)
		var next int64
		for _, raw := range batches {
			if err := recordbatch.SetBaseOffset(raw, next); err != nil {
				b.Fatal(err)
			}
			if err := w.Add(raw); err != nil {
				b.Fatal(err)
			}
			next += perBatch
		}
		obj, _, err := w.Finish()
		if err != nil || int64(len(obj)) != size {
			b.Fatalf("Finish: %d bytes, want %d: %v", len(obj), size, err)
		}
	}
}

// BenchmarkDecode validates a whole 64 MiB segment.
func BenchmarkDecode(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			obj, _ := buildSegment(b, Header{Encoding: EncodingKafka, StreamID: 1}, benchBatches(b, s.size))
			b.SetBytes(int64(len(obj)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadInfo reads a 64 MiB segment's index and trailer from memory (the parse
// cost; the store's latency comes on top) and reports the index size.
func BenchmarkReadInfo(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			obj, info := buildSegment(b, Header{Encoding: EncodingKafka, StreamID: 1}, benchBatches(b, s.size))
			rr := memReader{"k": obj}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ReadInfoAt(b.Context(), rr, "k", info.IndexOffset()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(info.Size-info.IndexOffset()), "index-bytes")
		})
	}
}
