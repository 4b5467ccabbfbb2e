package walfmt

import (
	"fmt"
	"testing"
)

// reportCPURate adds a cpu-MB/s metric: bytes per second of process CPU time, which stays
// meaningful when other work shares the machine and wall-clock MB/s does not.
func reportCPURate(b *testing.B, start float64, bytes int64) {
	if cpu := processCPU() - start; start > 0 && cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/cpu/1e6, "cpu-MB/s")
	}
}

// benchObject returns the header and n chunks of an object of about 8 MiB.
func benchObject(n int) (Header, []Chunk) {
	const total = 8 << 20
	chunks := make([]Chunk, n)
	for i := range chunks {
		chunks[i] = Chunk{StreamID: uint64(i / 16), Partition: int32(i % 16), Encoding: EncodingKafka,
			Records: 100, MaxTimestamp: 1732870000000, Payload: pattern(uint32(i), total/n)}
	}
	return Header{NodeID: "bench-node", ULID: testULID, Class: ClassStandard}, chunks
}

func BenchmarkAppendObject(b *testing.B) {
	for _, n := range []int{8, 1000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			h, chunks := benchObject(n)
			buf, _, err := AppendObject(nil, h, chunks)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				buf, _, err = AppendObject(buf[:0], h, chunks)
				if err != nil {
					b.Fatal(err)
				}
			}
			reportCPURate(b, start, int64(len(buf)))
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, n := range []int{8, 1000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			h, chunks := benchObject(n)
			obj, _, err := AppendObject(nil, h, chunks)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(obj)))
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				if _, err := Decode(obj); err != nil {
					b.Fatal(err)
				}
			}
			reportCPURate(b, start, int64(len(obj)))
		})
	}
}
