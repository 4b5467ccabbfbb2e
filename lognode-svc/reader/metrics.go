package reader

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the read path's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	reads      *prometheus.CounterVec
	tailBytes  prometheus.Gauge
	chunkBytes prometheus.Gauge
	diskBytes  prometheus.Gauge
	diskErrors *prometheus.CounterVec
}

// NewMetrics registers the read path's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_fetch_spans_total",
			Help: "Spans of batches served, by source: tail (write-time cache), chunk (memory read cache), disk (segment block cache), object (a read from the bucket: a whole WAL object or a segment block)."}, []string{"source"}),
		tailBytes:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "loam_tail_cache_bytes", Help: "Bytes held by the tail cache."}),
		chunkBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loam_chunk_cache_bytes", Help: "Bytes held by the chunk cache (WAL chunks and segment blocks read from the bucket)."}),
		diskBytes:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "loam_disk_cache_bytes", Help: "Bytes held by the on-disk cache of segment blocks."}),
		diskErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_disk_cache_write_errors_total",
			Help: "Writes of a segment block to the on-disk cache that failed, by error: no_space (the cache's filesystem is full: the oldest blocks are evicted to make room and the write is tried once more) or other. A block that could not be written is served from the bucket."}, []string{"error"}),
	}
	reg.MustRegister(m.reads, m.tailBytes, m.chunkBytes, m.diskBytes, m.diskErrors)
	return m
}

func (m *Metrics) hit(source string) {
	if m != nil {
		m.reads.WithLabelValues(source).Inc()
	}
}

func (m *Metrics) diskWriteError(kind string) {
	if m != nil {
		m.diskErrors.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) diskSize(n int64) {
	if m != nil {
		m.diskBytes.Set(float64(n))
	}
}
