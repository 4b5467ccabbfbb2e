package writer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the write path's Prometheus metrics.
type Metrics struct {
	flushes     prometheus.Counter
	flushErrors prometheus.Counter
	// refusedChunks counts chunks the sequencer refused (deleted stream, missing partition).
	refusedChunks prometheus.Counter
	// duplicateChunks counts producer chunks the sequencer answered as duplicates.
	duplicateChunks prometheus.Counter
	flushBytes      prometheus.Counter
	flushChunks     prometheus.Histogram
	putSeconds      prometheus.Histogram
	commitSecond    prometheus.Histogram
}

// NewMetrics registers the write path's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		flushes:     prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_wal_flushes_total", Help: "WAL objects written and committed."}),
		flushErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_wal_flush_errors_total", Help: "WAL flushes that failed (PUT or commit)."}),
		duplicateChunks: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_wal_duplicate_chunks_total",
			Help: "Idempotent producer chunks the sequencer answered as duplicates of batches committed before (nothing new written)."}),
		refusedChunks: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_wal_refused_chunks_total",
			Help: "WAL chunks the sequencer refused (deleted stream, missing partition); the flush's other chunks committed."}),
		flushBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_wal_bytes_total", Help: "Bytes of committed WAL objects."}),
		flushChunks: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "loam_wal_chunks_per_object", Help: "Partition chunks per WAL object.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8)}),
		putSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "loam_wal_put_seconds", Help: "WAL object PUT latency.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		commitSecond: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "loam_wal_commit_seconds", Help: "CommitWal latency.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
	}
	reg.MustRegister(m.flushes, m.flushErrors, m.refusedChunks, m.duplicateChunks, m.flushBytes, m.flushChunks, m.putSeconds, m.commitSecond)
	return m
}

func (m *Metrics) observeFlush(bytes, chunks int, put, commit time.Duration) {
	m.flushes.Inc()
	m.flushBytes.Add(float64(bytes))
	m.flushChunks.Observe(float64(chunks))
	m.putSeconds.Observe(put.Seconds())
	m.commitSecond.Observe(commit.Seconds())
}
