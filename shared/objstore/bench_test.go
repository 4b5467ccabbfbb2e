package objstore_test

import (
	"fmt"
	"testing"

	"github.com/loamhq/loam/shared/objstore"
)

func benchBuckets(b *testing.B) map[string]objstore.Bucket {
	fsb, err := objstore.NewFS(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return map[string]objstore.Bucket{"Mem": objstore.NewMem(), "FS": fsb}
}

// BenchmarkPut1MiB: FS figures are fsync-bound (two fsyncs per Put) and swing with the disk.
func BenchmarkPut1MiB(b *testing.B) {
	body := make([]byte, 1<<20)
	for name, bkt := range benchBuckets(b) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			i := 0
			for b.Loop() {
				if err := bkt.Put(b.Context(), fmt.Sprintf("bench/%d", i%64), body); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func BenchmarkGetRange1MiB(b *testing.B) {
	body := make([]byte, 8<<20)
	for name, bkt := range benchBuckets(b) {
		if err := bkt.Put(b.Context(), "bench/obj", body); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(1 << 20)
			i := int64(0)
			for b.Loop() {
				got, err := bkt.GetRange(b.Context(), "bench/obj", (i%7)<<20, 1<<20)
				if err != nil || len(got) != 1<<20 {
					b.Fatal(len(got), err)
				}
				i++
			}
		})
	}
}
