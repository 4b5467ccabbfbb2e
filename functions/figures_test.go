package functions_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/segmenter"
	"github.com/loamhq/loam/shared/streamapi"
)

// S3 Standard list prices (us-east-1): PUT/COPY/POST/LIST $0.005 per 1000, GET $0.0004
// per 1000; DELETE is free.
const (
	putPrice = 0.005 / 1000
	getPrice = 0.0004 / 1000
)

// TestFigures measures the figures: segmenter throughput, object requests per GiB
// ingested and segmented, and fetch throughput from segments cold and warm. It moves
// LOAM_FIGURES_MB (default 256) MiB and runs only with LOAM_FIGURES=1.
//
//	LOAM_FIGURES=1 go test -run TestFigures -v ./functions/
func TestFigures(t *testing.T) {
	if os.Getenv("LOAM_FIGURES") != "1" {
		t.Skip("set LOAM_FIGURES=1 to measure")
	}
	ctx := context.Background()
	mb := 256
	if v, err := strconv.Atoi(os.Getenv("LOAM_FIGURES_MB")); err == nil && v > 0 {
		mb = v
	}
	total := int64(mb) << 20
	mem := objstore.NewMem()
	cb := objstore.Counting(mem)
	c := startCluster(t, cb, 250*time.Millisecond)
	const parts = 4
	st := c.createStream(streamapi.CreateStreamRequest{Name: "fig", Partitions: ptr(int32(parts))})

	// Ingest: 8 producers, 256 records of 1 KiB per produce call.
	const recSize, perCall, workers = 1024, 256, 8
	calls := int(total / (recSize * perCall))
	val := []byte(fmt.Sprintf("%q", pad(recSize-2)))
	var wg sync.WaitGroup
	next := make(chan int)
	t0 := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range next {
				recs := make([]streamapi.Record, perCall)
				for j := range recs {
					recs[j] = streamapi.Record{Value: val, Partition: ptr(int32(i % parts))}
				}
				if _, err := c.api.Produce(ctx, meta.DefaultNS, "fig", recs); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	ingestDur := time.Since(t0)
	ingest := cb.Stats()
	var walBytes int64
	for p := range int32(parts) {
		es, _ := c.entries(st, p)
		for _, e := range es {
			walBytes += e.Length
		}
	}
	gib := float64(walBytes) / (1 << 30)
	t.Logf("ingest: %d MiB of WAL chunks in %v (%.1f MB/s through HTTP/JSON), %d WAL PUTs (%.0f per GiB, %.1f KiB each)",
		walBytes>>20, ingestDur.Round(time.Millisecond), float64(walBytes)/1e6/ingestDur.Seconds(), ingest.Puts, float64(ingest.Puts)/gib,
		float64(ingest.PutBytes)/float64(max(ingest.Puts, 1))/1024)

	// Segmenting: what one notification per WAL object costs (the index read) plus the
	// sweep that writes 128 MiB segments.
	seg, err := segmenter.New(segmenter.Config{Bucket: cb, Meta: c.meta, Coord: c.coord, MaxAge: time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	before := cb.Stats()
	walKeys := listKeys(t, mem, "wal/")
	t1 := time.Now()
	for i := 0; i < len(walKeys); i += 10 {
		if _, err := seg.Handler().Invoke(ctx, walEvent(t, mem, walKeys[i:min(i+10, len(walKeys))]...)); err != nil {
			t.Fatal(err)
		}
	}
	notifyDur := time.Since(t1)
	afterNotify := cb.Stats()
	var cpu0 runtime.MemStats
	runtime.ReadMemStats(&cpu0)
	t2 := time.Now()
	if err := seg.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	segDur := time.Since(t2) + notifyDur
	segStats := cb.Stats().Sub(before)
	var segs int
	for p := range int32(parts) {
		es, _ := c.entries(st, p)
		if w, s := kinds(es); w != 0 {
			t.Fatalf("partition %d: %d WAL entries left", p, w)
		} else {
			segs += s
		}
	}
	t.Logf("segmenter: %d MiB of WAL in %v = %.0f MB/s (notifications %v: %d index GETs; sweep: %d segments); requests: %d PUTs (%.1f per GiB), %d GETs (%.0f per GiB), LIST %d",
		walBytes>>20, segDur.Round(time.Millisecond), float64(walBytes)/1e6/segDur.Seconds(), notifyDur.Round(time.Millisecond),
		afterNotify.GetRanges-before.GetRanges, segs, segStats.Puts, float64(segStats.Puts)/gib, segStats.Gets+segStats.GetRanges,
		float64(segStats.Gets+segStats.GetRanges)/gib, segStats.Lists)
	puts := float64(ingest.Puts+segStats.Puts) / gib
	gets := float64(ingest.Gets+ingest.GetRanges+segStats.Gets+segStats.GetRanges) / gib
	t.Logf("cost per GiB ingested and segmented: %.0f PUTs + %.0f GETs = $%.5f (PUT $%.5f, GET $%.5f) at S3 Standard list prices",
		puts, gets, puts*putPrice+gets*getPrice, puts*putPrice, gets*getPrice)

	// Fetch from segments through a log node's read path: cold (range GETs), then warm.
	for _, lat := range []time.Duration{0, 20 * time.Millisecond} {
		var b objstore.Bucket = mem
		if lat > 0 {
			b = objstore.WithLatency(mem, 0, lat)
		}
		rcb := objstore.Counting(b)
		rd, err := reader.New(reader.Config{Bucket: rcb, Meta: c.meta, DiskCacheDir: t.TempDir(), DiskCacheBytes: 2 * total, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		for _, pass := range []string{"cold", "warm"} {
			s0 := rcb.Stats()
			t3 := time.Now()
			var n int64
			var pwg sync.WaitGroup
			var mu sync.Mutex
			for p := range int32(parts) {
				pwg.Go(func() {
					var got int64
					for off := int64(0); ; {
						res, err := rd.Fetch(ctx, st.ID, p, off, 1<<20, 0)
						if err != nil {
							t.Error(err)
							return
						}
						for _, b := range res.Batches {
							got += int64(len(b))
						}
						if res.NextOffset >= res.HighWatermark {
							break
						}
						off = res.NextOffset
					}
					mu.Lock()
					n += got
					mu.Unlock()
				})
			}
			pwg.Wait()
			d := time.Since(t3)
			s := rcb.Stats().Sub(s0)
			t.Logf("fetch %s (GET latency %v, 4 partitions in parallel, 1 MiB fetches): %d MiB in %v = %.0f MB/s; %d range GETs",
				pass, lat, n>>20, d.Round(time.Millisecond), float64(n)/1e6/d.Seconds(), s.GetRanges+s.Gets)
		}
	}
}
