package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
)

// Figures of the quorum class's journal. Each benchmark runs three members on 127.0.0.1
// with their logs fsynced (raftlog), under the directory named by JOURNAL_BENCH_DIR
// (default: the test's temp dir, on the real disk); /dev/shm puts them on tmpfs:
//
//	go test -run XXX -bench Journal -benchtime 2000x ./lognode-svc/journal
//	JOURNAL_BENCH_DIR=/dev/shm go test -run XXX -bench Journal -benchtime 2000x ./lognode-svc/journal

func benchCluster(b *testing.B) *cluster {
	base := os.Getenv("JOURNAL_BENCH_DIR")
	if base == "" {
		return newCluster(b, false)
	}
	dir, err := os.MkdirTemp(base, "journal-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	c := &cluster{t: b}
	for i := 0; i < 3; i++ {
		mux, err := ListenMux("127.0.0.1:0", "")
		if err != nil {
			b.Fatal(err)
		}
		c.muxes = append(c.muxes, mux)
		c.dirs = append(c.dirs, filepath.Join(dir, fmt.Sprintf("m%d", i)))
		c.voters = append(c.voters, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprintf("n%d", i)), Address: mux.MemberAddr("j1")})
	}
	c.members = make([]*Member, 3)
	for i := range c.members {
		c.start(i)
	}
	b.Cleanup(func() {
		for i, m := range c.members {
			if m != nil {
				m.Close()
			}
			c.muxes[i].Close()
		}
	})
	return c
}

func kib(b *testing.B, n int) []byte {
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{Timestamp: 1, Value: make([]byte, 1024)}
	}
	out, err := recordbatch.Append(nil, recs, recordbatch.DefaultBuildOptions())
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func quantile(d []time.Duration, q float64) float64 {
	slices.Sort(d)
	return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
}

// fsyncP99 measures the directory's 4 KiB write + fsync latency.
func fsyncP99(b *testing.B, dir string, n int) (p50, p99 float64) {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i%256)*4096); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	return quantile(lat, 0.5), quantile(lat, 0.99)
}

// BenchmarkJournalAppendLatency: one producer, one 1 KiB record per append, acknowledged
// on a majority's fsync; p50/p99 in ms, next to the same directory's fsync p50/p99.
func BenchmarkJournalAppendLatency(b *testing.B) {
	c := benchCluster(b)
	l := c.members[c.leader()]
	data := kib(b, 1)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	retried := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		a := Append{Partition: p0, Producer: meta.ChunkProducer{ID: -1}, RequestID: uint64(i + 1), Batches: data}
		if _, err := l.Append(ctx, a); err != nil {
			// The loaded machine starved a heartbeat: the leader stepped down. Retry on the
			// new leader (the request id keeps it from writing twice); the latency counts it.
			retried++
			if _, err := c.append(a); err != nil {
				b.Fatal(err)
			}
			l = c.members[c.leader()]
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(retried), "leader-changes")
	b.ReportMetric(quantile(lat, 0.5), "p50-ms")
	b.ReportMetric(quantile(lat, 0.99), "p99-ms")
	fp50, fp99 := fsyncP99(b, filepath.Dir(c.dirs[0]), 500)
	b.ReportMetric(fp50, "fsync-p50-ms")
	b.ReportMetric(fp99, "fsync-p99-ms")
}

// BenchmarkJournalThroughput: 64 concurrent appenders over 8 partitions, each append one
// batch of 16 records of 1 KiB; MB/s of record values acknowledged.
func BenchmarkJournalThroughput(b *testing.B) {
	c := benchCluster(b)
	l := c.members[c.leader()]
	data := kib(b, 16)
	ctx := context.Background()
	var wg sync.WaitGroup
	work := make(chan int, 64)
	b.ResetTimer()
	t0 := time.Now()
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				p := Partition{Stream: 1, Partition: uint32(i % 8)}
				if _, err := l.Append(ctx, Append{Partition: p, Producer: meta.ChunkProducer{ID: -1}, Batches: data}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	for i := 0; i < b.N; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	el := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(b.N)*16*1024/el.Seconds()/1e6, "MB/s")
	b.ReportMetric(float64(b.N)*16/el.Seconds(), "records/s")
}

// BenchmarkJournalFailover: the leader is shut down (its process gone, as after a
// SIGKILL: no leadership transfer), and the time until an append succeeds on the new
// leader is measured; then the old member restarts. b.N kills; p50/max in ms.
func BenchmarkJournalFailover(b *testing.B) {
	c := benchCluster(b)
	data := kib(b, 1)
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		if _, err := c.append(Append{Partition: p0, Producer: meta.ChunkProducer{ID: -1}, Batches: data}); err != nil {
			b.Fatal(err)
		}
		old := c.leader()
		t0 := time.Now()
		c.stop(old)
		if _, err := c.append(Append{Partition: p0, Producer: meta.ChunkProducer{ID: -1}, Batches: data}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		c.start(old)
		waitNext(b, c.members[old], p0, c.members[c.leader()].Next(p0))
	}
	b.ReportMetric(quantile(lat, 0.5), "p50-ms")
	b.ReportMetric(float64(slices.Max(lat).Microseconds())/1000, "max-ms")
}
