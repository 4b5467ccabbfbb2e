package kafka

import (
	"reflect"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metrics are the gateway's Prometheus metrics: requests by API key and version, error
// codes answered, bytes in and out, open connections. Label values are bounded: keys and
// versions by kmsg's tables (unknown keys count as "unknown"), codes by kerr's.
type metrics struct {
	requests  *prometheus.CounterVec // key, version, outcome (ok | refused)
	errors    *prometheus.CounterVec // key, code
	bytesIn   prometheus.Counter
	bytesOut  prometheus.Counter
	conns     prometheus.Gauge
	refused   prometheus.Counter
	badFrames prometheus.Counter
	records   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_kafka_requests_total",
			Help: "Kafka requests by API key name, version and outcome (ok: decoded and served; refused: unknown key or version, or undecodable)."},
			[]string{"key", "version", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_kafka_errors_total",
			Help: "Kafka error codes answered, by API key name and error name (one per topic, partition or resource in error)."},
			[]string{"key", "code"}),
		bytesIn:   prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_kafka_bytes_in_total", Help: "Kafka request bytes read, frames included."}),
		bytesOut:  prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_kafka_bytes_out_total", Help: "Kafka response bytes written, frames included."}),
		conns:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "loam_kafka_connections", Help: "Open Kafka connections."}),
		refused:   prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_kafka_connections_refused_total", Help: "Kafka connections closed at accept: the connection limit was reached."}),
		badFrames: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_kafka_bad_frames_total", Help: "Kafka connections closed for a frame length out of range."}),
		records:   prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_kafka_produced_records_total", Help: "Records committed through Kafka Produce (duplicates not counted)."}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.errors, m.bytesIn, m.bytesOut, m.conns, m.refused, m.badFrames, m.records)
	}
	return m
}

func keyName(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return "unknown"
}

func (m *metrics) request(key, version int16, refused bool) {
	outcome := "ok"
	if refused {
		outcome = "refused"
	}
	v := strconv.Itoa(int(version))
	if kmsg.NameForKey(key) == "" || version < 0 || version > 50 {
		v = "unknown"
	}
	m.requests.WithLabelValues(keyName(key), v, outcome).Inc()
}

// responseErrors counts every non-zero ErrorCode field in resp, however deep.
func (m *metrics) responseErrors(resp kmsg.Response) {
	name := keyName(resp.Key())
	walkCodes(reflect.ValueOf(resp), func(code int16) {
		e := kerr.ErrorForCode(code)
		label := "unknown"
		if ke, ok := e.(*kerr.Error); ok {
			label = ke.Message
		}
		m.errors.WithLabelValues(name, label).Inc()
	})
}

func walkCodes(v reflect.Value, fn func(int16)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkCodes(v.Elem(), fn)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if t.Field(i).Name == "ErrorCode" && f.Kind() == reflect.Int16 {
				if c := int16(f.Int()); c != 0 {
					fn(c)
				}
				continue
			}
			if f.Kind() == reflect.Slice || f.Kind() == reflect.Struct || f.Kind() == reflect.Pointer {
				walkCodes(f, fn)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			walkCodes(v.Index(i), fn)
		}
	}
}
