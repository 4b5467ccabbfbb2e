package reader

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the read path's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	reads     *prometheus.CounterVec
	tailBytes prometheus.Gauge
}

// NewMetrics registers the read path's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_fetch_spans_total",
			Help: "Spans of batches served, by source: tail (write-time cache), chunk (memory read cache), disk (segment block cache), object (range GET)."}, []string{"source"}),
		tailBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loam_tail_cache_bytes", Help: "Bytes held by the tail cache."}),
	}
	reg.MustRegister(m.reads, m.tailBytes)
	return m
}

func (m *Metrics) hit(source string) {
	if m != nil {
		m.reads.WithLabelValues(source).Inc()
	}
}
