package kafka_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMetrics: /metrics counts Kafka requests by key and version, error codes answered,
// and bytes in and out.
func TestMetrics(t *testing.T) {
	e := start(t)
	e.createTopic(t, "m", 1)
	cl := e.client(t)
	produceOne(t, cl, "m", 0, batch(t, 2, 0, 0, 0))
	produceOne(t, cl, "missing", 0, batch(t, 2, 0, 0, 0))
	p := e.client(t, kgo.DefaultProduceTopic("m"))
	if err := p.ProduceSync(ctx(t), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(e.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	text := string(b)
	for _, want := range []string{
		`loam_kafka_requests_total{key="Produce",outcome="ok",version="12"}`,
		`loam_kafka_requests_total{key="ApiVersions",outcome="ok",version="4"}`,
		`loam_kafka_errors_total{code="UNKNOWN_TOPIC_OR_PARTITION",key="Produce"} 1`,
		`loam_kafka_bytes_in_total `,
		`loam_kafka_bytes_out_total `,
		`loam_kafka_produced_records_total 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "loam_kafka") {
				t.Log(l)
			}
		}
	}
}
