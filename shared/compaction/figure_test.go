package compaction

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/segfmt"
)

func envInt(t *testing.T, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// TestFigureCompaction measures compacting a large partition (default 2 GiB of 1 KiB
// records, 1% of them live keys) on a filesystem bucket in a temp dir: time, peak heap
// in use (sampled every 20 ms) and bytes after. Run with LOAM_FIGURES=1; sizes from
// LOAM_FIGURE_BYTES, LOAM_FIGURE_KEYMAP_BYTES, LOAM_FIGURE_TARGET_BYTES.
func TestFigureCompaction(t *testing.T) {
	if os.Getenv("LOAM_FIGURES") == "" {
		t.Skip("LOAM_FIGURES is not set")
	}
	ctx := context.Background()
	total := envInt(t, "LOAM_FIGURE_BYTES", 2<<30)
	keyMapBytes := envInt(t, "LOAM_FIGURE_KEYMAP_BYTES", 4<<20)
	target := envInt(t, "LOAM_FIGURE_TARGET_BYTES", DefaultTargetBytes)
	const valueLen, perBatch = 1000, 100
	b, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := metafake.New()
	f.AddStream(1, 1)
	now := time.Now()

	// Write the partition: segments of the target size, records of ~1 KiB over keys a
	// hundredth as many as the records, in random order.
	records := total / (valueLen + 40)
	keys := max(records/100, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, valueLen)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	start := time.Now()
	var written int64
	recs := make([]recordbatch.Record, perBatch)
	for off := int64(0); off < records; {
		w, err := segfmt.NewWriter(segfmt.Header{Encoding: segfmt.EncodingKafka, StreamID: 1, Partition: 0})
		if err != nil {
			t.Fatal(err)
		}
		base := off
		for w.Len() < target && off < records {
			n := int(min(perBatch, records-off))
			for i := range n {
				recs[i] = recordbatch.Record{OffsetDelta: int32(i), Timestamp: now.UnixMilli(),
					Key: fmt.Appendf(nil, "key-%09d", rng.Int64N(keys)), Value: value}
			}
			opts := recordbatch.DefaultBuildOptions()
			opts.BaseOffset = off
			raw, err := recordbatch.Append(nil, recs[:n], opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Add(raw); err != nil {
				t.Fatal(err)
			}
			off += int64(n)
		}
		obj, info, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		key := segfmt.ObjectKey(1, 0, base, fmt.Sprint("f", base))
		if err := b.Put(ctx, key, obj); err != nil {
			t.Fatal(err)
		}
		f.Commit(1, 0, meta.IndexEntry{Count: off - base, Kind: meta.KindSegment, Object: key, Offset: info.DataOffset,
			Length: info.DataLength, MaxTimestamp: info.Header.MaxTimestamp})
		written += info.DataLength
	}
	t.Logf("wrote %d records over %d keys, %d bytes in %d segments, in %v", records, keys, written, len(f.Entries(1, 0)), time.Since(start))

	c, err := New(Config{Bucket: b, Meta: f, KeyMapBytes: keyMapBytes, TargetBytes: target,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap := ms.HeapInuse
	var peak, peakLive uint64
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			metrics.Read(live)
			peakLive = max(peakLive, live[0].Value.Uint64())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start = time.Now()
	res, err := c.Partition(ctx, 1, 0)
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	var after int64
	for _, e := range f.Entries(1, 0) {
		after += e.Length
	}
	t.Logf("compacted in %v: %d passes, %d entries -> %d segments, %d records dropped, %d kept", elapsed.Round(time.Millisecond),
		res.Passes, res.Entries, len(f.Entries(1, 0)), res.Dropped, res.Kept)
	t.Logf("bytes before %d, after %d (%.2f%%); peak heap in use %.1f MiB, peak live heap after a GC %.1f MiB (%.1f MiB before the run); key map bound %d, target %d",
		written, after, 100*float64(after)/float64(written), float64(peak)/(1<<20), float64(peakLive)/(1<<20), float64(baseHeap)/(1<<20), keyMapBytes, target)
	// Every key is left once.
	seen := map[string]bool{}
	var rd batchReader
	rd.bucket, rd.chunk = b, 4<<20
	n := 0
	for _, e := range f.Entries(1, 0) {
		rd.reset(e)
		for {
			bt, ok, err := rd.next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			rs, err := bt.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				seen[string(r.Key)] = true
				n++
			}
		}
	}
	if n != len(seen) || res.Refused {
		t.Fatalf("%+v: %d records left over %d keys", res, n, len(seen))
	}
}
