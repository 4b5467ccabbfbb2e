package journal

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// logSize is the leader's Raft log: its entries and the bytes of their data.
func logSize(b *testing.B, m *Member) (entries uint64, bytes int64) {
	first, err := m.store.FirstIndex()
	if err != nil {
		b.Fatal(err)
	}
	last, err := m.store.LastIndex()
	if err != nil {
		b.Fatal(err)
	}
	var l raft.Log
	for i := first; i <= last && first > 0; i++ {
		if err := m.store.GetLog(i, &l); err != nil {
			b.Fatal(err)
		}
		bytes += int64(len(l.Data))
	}
	if first == 0 {
		return 0, 0
	}
	return last - first + 1, bytes
}

// BenchmarkJournalOffload: b.N appends of 16 records of 1 KiB to one partition of a
// three-member journal (logs not fsynced), then the leader offloads them to segments of
// 16 MiB in an objstore.FS bucket (the real disk, or JOURNAL_BENCH_DIR) with a real
// in-process sequencer, and trims: offload MB/s, and the leader's Raft log and retained
// batches before and after.
//
//	go test -run XXX -bench JournalOffload -benchtime 4000x ./lognode-svc/journal
func BenchmarkJournalOffload(b *testing.B) {
	c := newCluster(b, true)
	mc := servertest.Client(b)
	dir := b.TempDir()
	if base := os.Getenv("JOURNAL_BENCH_DIR"); base != "" {
		d, err := os.MkdirTemp(base, "offload-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	bucket, err := objstore.NewFS(filepath.Join(dir, "bucket"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	st, err := mc.CreateStream(ctx, meta.StreamConfig{Namespace: meta.DefaultNS, Name: "bench", Partitions: 1, Class: meta.ClassQuorum,
		RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete})
	if err != nil {
		b.Fatal(err)
	}
	p := Partition{Stream: st.ID}
	l := c.leader()
	m := c.members[l]
	batch := kib(b, 16)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := 0; i < b.N; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := m.Append(ctx, Append{Partition: p, Batches: batch}); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	entriesBefore, logBefore := logSize(b, m)
	retainedBefore := m.Stats().Retained
	if err := m.setOffload(OffloadConfig{Bucket: bucket, Index: mc.(OffloadIndex), SegmentBytes: 16 << 20, MaxAge: time.Nanosecond}); err != nil {
		b.Fatal(err)
	}
	m.off.seen[p] = seenStart{start: 0, at: time.Now().Add(-time.Hour)} // due by age: the tail too
	b.ResetTimer()
	start := time.Now()
	var total OffloadStats
	for m.Stats().Retained > 0 {
		s, err := m.Offload(ctx)
		if err != nil {
			b.Fatal(err)
		}
		total.Segments += s.Segments
		total.Bytes += s.Bytes
		rr, _ := m.Read(p, m.Next(p), 1)
		m.off.mu.Lock()
		m.off.seen[p] = seenStart{start: rr.Start, at: time.Now().Add(-time.Hour)}
		m.off.mu.Unlock()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if err := m.Snapshot(); err != nil {
		b.Logf("snapshot: %v", err)
	}
	entriesAfter, logAfter := logSize(b, m)
	b.ReportMetric(float64(total.Bytes)/(1<<20)/elapsed.Seconds(), "offload-MB/s")
	b.ReportMetric(float64(total.Segments), "segments")
	b.ReportMetric(float64(entriesBefore), "log-entries-before")
	b.ReportMetric(float64(entriesAfter), "log-entries-after")
	b.ReportMetric(float64(logBefore)/(1<<20), "log-MiB-before")
	b.ReportMetric(float64(logAfter)/(1<<20), "log-MiB-after")
	b.ReportMetric(float64(retainedBefore)/(1<<20), "retained-MiB-before")
	b.ReportMetric(float64(m.Stats().Retained)/(1<<20), "retained-MiB-after")
}
