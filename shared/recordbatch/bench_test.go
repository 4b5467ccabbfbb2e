package recordbatch

import "testing"

// Benchmarks build and validate 100 records of 1 KiB values (text-like, so zstd has
// something to compress); SetBytes counts the value bytes, so MB/s is payload MB/s.
// The machine is shared, so each also reports cpu-MB/s: payload bytes per second of
// this process's CPU time, which other load does not dilute.

// cpuRate starts a CPU clock; the returned func reports cpu-MB/s for b.N ops of n bytes.
func cpuRate(b *testing.B, n int64) func() {
	start := processCPU()
	return func() {
		if cpu := processCPU() - start; start > 0 && cpu > 0 {
			b.ReportMetric(float64(n)*float64(b.N)/cpu/1e6, "cpu-MB/s")
		}
	}
}

const benchRecords, benchValue = 100, 1 << 10

func BenchmarkAppend(b *testing.B) {
	recs := textRecords(benchRecords, benchValue, 1)
	for _, c := range []Compression{None, Zstd} {
		b.Run(c.String(), func(b *testing.B) {
			opt := withCodec(c)
			var dst []byte
			b.SetBytes(benchRecords * benchValue)
			b.ReportAllocs()
			defer cpuRate(b, benchRecords*benchValue)()
			for b.Loop() {
				var err error
				dst, err = Append(dst[:0], recs, opt)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(dst)), "batch-bytes")
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	recs := textRecords(benchRecords, benchValue, 1)
	for _, c := range []Compression{None, Zstd} {
		b.Run(c.String(), func(b *testing.B) {
			raw := mustAppend(b, nil, recs, withCodec(c))
			b.SetBytes(benchRecords * benchValue)
			b.ReportAllocs()
			defer cpuRate(b, benchRecords*benchValue)()
			for b.Loop() {
				if _, err := Validate(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRecords(b *testing.B) {
	recs := textRecords(benchRecords, benchValue, 1)
	for _, c := range []Compression{None, Zstd} {
		b.Run(c.String(), func(b *testing.B) {
			raw := mustAppend(b, nil, recs, withCodec(c))
			bt, _, err := Parse(raw)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchRecords * benchValue)
			b.ReportAllocs()
			defer cpuRate(b, benchRecords*benchValue)()
			for b.Loop() {
				if _, err := bt.Records(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
