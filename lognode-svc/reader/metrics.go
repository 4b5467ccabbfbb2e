package reader

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the read path's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	reads      *prometheus.CounterVec
	tailBytes  prometheus.Gauge
	chunkBytes prometheus.Gauge
}

// NewMetrics registers the read path's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_fetch_spans_total",
			Help: "Spans of batches served, by source: tail (write-time cache), chunk (memory read cache), disk (segment block cache), object (a read from the bucket: a whole WAL object or a segment block)."}, []string{"source"}),
		tailBytes:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "loam_tail_cache_bytes", Help: "Bytes held by the tail cache."}),
		chunkBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loam_chunk_cache_bytes", Help: "Bytes held by the chunk cache (WAL chunks and segment blocks read from the bucket)."}),
	}
	reg.MustRegister(m.reads, m.tailBytes, m.chunkBytes)
	return m
}

func (m *Metrics) hit(source string) {
	if m != nil {
		m.reads.WithLabelValues(source).Inc()
	}
}
