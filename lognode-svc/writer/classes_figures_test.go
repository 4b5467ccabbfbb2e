package writer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/walfmt"
)

// timedMeta records the latency of every CommitWal.
type timedMeta struct {
	meta.Client
	mu  sync.Mutex
	lat []time.Duration
}

func (m *timedMeta) CommitWal(ctx context.Context, c meta.CommitWal) (meta.CommitResult, error) {
	t0 := time.Now()
	r, err := m.Client.CommitWal(ctx, c)
	m.mu.Lock()
	m.lat = append(m.lat, time.Since(t0))
	m.mu.Unlock()
	return r, err
}

func (m *timedMeta) take() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.lat
	m.lat = nil
	return l
}

func pct(l []time.Duration, p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func expressOver(t *testing.T, zone func(i int) objstore.Bucket) *objstore.Express {
	var zones []objstore.Zone
	for i := range 3 {
		zones = append(zones, objstore.Zone{Name: fmt.Sprintf("zone-%c", 'a'+i), Bucket: zone(i)})
	}
	e, err := objstore.NewExpress(objstore.ExpressConfig{Zones: zones, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func bigBatch(t testing.TB, size int) []byte {
	b, err := recordbatch.Append(nil, []recordbatch.Record{{Value: make([]byte, size), Timestamp: 1}}, recordbatch.DefaultBuildOptions())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFigureExpressLatency measures, in one run on a real in-process sequencer, produce
// (Write) latency of the standard and express classes with zero-latency buckets and with
// the modelled S3 latencies (objstore.S3Standard: PUT median 100 ms, p99 400 ms;
// objstore.S3Express: 5 ms, p99 20 ms), the CommitWal time, an idle express writer's PUTs
// per second and the zonal PUTs per GiB at saturation.
//
//	LOAM_FIGURES=1 go test -count=1 -run TestFigureExpressLatency -v ./lognode-svc/writer/
func TestFigureExpressLatency(t *testing.T) {
	if os.Getenv("LOAM_FIGURES") != "1" {
		t.Skip("set LOAM_FIGURES=1 to measure")
	}
	ctx := context.Background()
	node := startSequencer(t)
	mc := &timedMeta{Client: server.NewLocalClient(node)}
	st, err := mc.CreateStream(ctx, meta.StreamConfig{Name: "fig", Partitions: 8, Class: meta.ClassExpress})
	if err != nil {
		t.Fatal(err)
	}
	const clients, dur = 8, 4 * time.Second
	small := bigBatch(t, 200)
	run := func(name string, w *Buffered, flush time.Duration) {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		stop := time.Now().Add(dur)
		mc.take()
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					t0 := time.Now()
					if _, err := w.Write(ctx, []Request{{StreamID: st.ID, Partition: int32(c), Batches: small, Records: 1, MaxTimestamp: 1}}); err != nil {
						t.Error(err)
						return
					}
					d := time.Since(t0)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		commits := mc.take()
		p50, p99 := pct(lat, 0.50), pct(lat, 0.99)
		t.Logf("FIGURE %s: %d produces from %d clients in %v: p50 %s (%.2f x flush %v), p99 %s (%.2f x flush); CommitWal p50 %s p99 %s (%d commits)",
			name, len(lat), clients, dur, ms(p50), float64(p50)/float64(flush), flush, ms(p99), float64(p99)/float64(flush),
			ms(pct(commits, 0.5)), ms(pct(commits, 0.99)), len(commits))
	}
	newW := func(b objstore.Bucket, flush time.Duration) *Buffered {
		w, err := NewBuffered(Config{NodeID: "fig", Class: walfmt.ClassExpress, FlushInterval: flush, Bucket: b, Meta: mc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close(ctx) })
		return w
	}
	// The machine's own noise: how late a 5 ms timer fires for 8 goroutines in this run.
	{
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 200 {
					t0 := time.Now()
					time.Sleep(ExpressFlushInterval)
					mu.Lock()
					lat = append(lat, time.Since(t0))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		t.Logf("FIGURE baseline: a 5 ms sleep takes p50 %s, p99 %s on this machine now", ms(pct(lat, 0.5)), ms(pct(lat, 0.99)))
	}
	run("standard, zero-latency bucket", newW(objstore.NewMem(), StandardFlushInterval), StandardFlushInterval)
	run("express, zero-latency zones", newW(expressOver(t, func(int) objstore.Bucket { return objstore.NewMem() }), ExpressFlushInterval), ExpressFlushInterval)
	run("standard, modelled S3 Standard", newW(objstore.WithLatencyModel(objstore.NewMem(), objstore.S3Standard, 1), StandardFlushInterval), StandardFlushInterval)
	run("express, modelled S3 Express x3", newW(expressOver(t, func(i int) objstore.Bucket {
		return objstore.WithLatencyModel(objstore.NewMem(), objstore.S3Express, uint64(2+i))
	}), ExpressFlushInterval), ExpressFlushInterval)

	// Idle: an express writer with nothing to write.
	var idleZones [3]*objstore.CountingBucket
	newW(expressOver(t, func(i int) objstore.Bucket { idleZones[i] = objstore.Counting(objstore.NewMem()); return idleZones[i] }), ExpressFlushInterval)
	time.Sleep(3 * time.Second)
	var idlePuts int64
	for _, z := range idleZones {
		idlePuts += z.Stats().Puts
	}
	t.Logf("FIGURE express idle: %d zonal PUTs in 3 s (%.1f PUTs/s)", idlePuts, float64(idlePuts)/3)

	// Saturation: 16 clients writing 256 KiB batches to express, zero-latency zones.
	var satZones [3]*objstore.CountingBucket
	sat := newW(expressOver(t, func(i int) objstore.Bucket { satZones[i] = objstore.Counting(objstore.NewMem()); return satZones[i] }), ExpressFlushInterval)
	big := bigBatch(t, 256<<10)
	var bytes atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if _, err := sat.Write(ctx, []Request{{StreamID: st.ID, Partition: int32(c % 8), Batches: big, Records: 1, MaxTimestamp: 1}}); err != nil {
					t.Error(err)
					return
				}
				bytes.Add(int64(len(big)))
			}
		}()
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // the third zone's background PUTs
	var zp int64
	for _, z := range satZones {
		zp += z.Stats().Puts
	}
	gib := float64(bytes.Load()) / (1 << 30)
	t.Logf("FIGURE express saturation: %.1f MiB/s acknowledged (16 clients x 256 KiB), %d WAL objects, %d zonal PUTs: %.0f zonal PUTs per GiB (%.0f objects per GiB)",
		float64(bytes.Load())/(1<<20)/3, zp/3, zp, float64(zp)/gib, float64(zp)/3/gib)
}
