package otlp

import "github.com/prometheus/client_golang/prometheus"

// Transports, the label of every metric.
const (
	transportHTTP = "http"
	transportGRPC = "grpc"
)

// metrics of OTLP ingest, each labelled by transport (http or grpc).
type metrics struct {
	received *prometheus.CounterVec // log records committed
	refused  *prometheus.CounterVec // log records of requests refused whole
	partial  *prometheus.CounterVec // log records rejected in partial_success
	bytes    *prometheus.CounterVec // request body bytes as received (compressed when sent so)
	requests *prometheus.CounterVec // Exports by transport and outcome
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_otlp_log_records_received_total",
			Help: "OTLP log records committed, by transport."}, []string{"transport"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_otlp_log_records_refused_total",
			Help: "OTLP log records of Export requests refused whole (bad request, quota, unavailable, ...), by transport; 0 counted for bodies that did not decode."}, []string{"transport"}),
		partial: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_otlp_log_records_partial_total",
			Help: "OTLP log records rejected in partial_success (invalid or over the record size limit), by transport."}, []string{"transport"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_otlp_received_bytes_total",
			Help: "OTLP request bytes received, by transport: HTTP bodies as sent (compressed when sent so), gRPC messages decompressed."}, []string{"transport"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_otlp_requests_total",
			Help: "OTLP Export requests, by transport and outcome: ok, partial, or the failure (its HTTP status over HTTP, its gRPC code over gRPC)."}, []string{"transport", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.received, m.refused, m.partial, m.bytes, m.requests)
	}
	return m
}
