package otlp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"

	"github.com/loamhq/loam/lognode-svc/otlp"
	"github.com/loamhq/loam/shared/meta"
)

// exporter is one of the SDK's OTLP log exporters.
type exporter interface {
	Export(ctx context.Context, records []sdklog.Record) error
	Shutdown(ctx context.Context) error
}

// newExporter makes an SDK exporter of transport ("http" or "grpc") to e, gzip or not.
func newExporter(t testing.TB, e *env, transport string, gzip bool, headers map[string]string, retry bool) exporter {
	t.Helper()
	ctx := context.Background()
	var (
		ex  exporter
		err error
	)
	switch transport {
	case "http":
		opts := []otlploghttp.Option{otlploghttp.WithEndpoint(e.otlp), otlploghttp.WithInsecure(), otlploghttp.WithHeaders(headers),
			otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: retry, InitialInterval: 50 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: 60 * time.Second})}
		if gzip {
			opts = append(opts, otlploghttp.WithCompression(otlploghttp.GzipCompression))
		}
		ex, err = otlploghttp.New(ctx, opts...)
	case "grpc":
		opts := []otlploggrpc.Option{otlploggrpc.WithEndpoint(e.grpc), otlploggrpc.WithInsecure(), otlploggrpc.WithHeaders(headers),
			otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: retry, InitialInterval: 50 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: 60 * time.Second})}
		if gzip {
			opts = append(opts, otlploggrpc.WithCompressor("gzip"))
		}
		ex, err = otlploggrpc.New(ctx, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Shutdown(context.Background()) })
	return ex
}

// TestSDKExporters sends logs with the OpenTelemetry Go SDK's exporters, over both
// transports, gzip on and off, and reads every record back through the native fetch API,
// mapped as the OTLP mapping says.
func TestSDKExporters(t *testing.T) {
	e := start(t, withOTLP(otlp.Settings{KeyAttributes: map[string]string{"keyed": "service.name"}, AutoCreate: []string{"keyed"}}))
	const n = 50
	for _, transport := range []string{"http", "grpc"} {
		for _, gz := range []bool{false, true} {
			prefix := fmt.Sprintf("%s-gzip=%v", transport, gz)
			ex := newExporter(t, e, transport, gz, nil, false)
			if err := ex.Export(ctxT(t), makeRecords(t, "checkout", prefix, n)); err != nil {
				t.Fatalf("%s: Export: %v", prefix, err)
			}
			// The same to a keyed stream named by the loam-stream header.
			kx := newExporter(t, e, transport, gz, map[string]string{"loam-stream": "keyed"}, false)
			if err := kx.Export(ctxT(t), makeRecords(t, "checkout", prefix, n)); err != nil {
				t.Fatalf("%s: Export to keyed: %v", prefix, err)
			}
		}
	}
	// Export returned: every record is committed, so a read sees all of them.
	recs := e.readAll(t, meta.DefaultNS, otlp.DefaultStream)
	got := bodies(t, recs)
	if len(recs) != 4*n || len(got) != 4*n {
		t.Fatalf("read %d records (%d distinct), want %d", len(recs), len(got), 4*n)
	}
	st, _, err := e.meta.GetStream(ctxT(t), meta.DefaultNS, otlp.DefaultStream)
	if err != nil || st.Partitions != otlp.DefaultPartitions {
		t.Fatalf("otel_logs was created with %d partitions (%v), want %d", st.Partitions, err, otlp.DefaultPartitions)
	}
	used := map[int32]bool{}
	for _, r := range recs {
		used[r.Partition] = true
		checkMapped(t, r, false)
	}
	if len(used) < 2 {
		t.Errorf("keyless records used partitions %v: want them spread round-robin", used)
	}
	keyed := e.readAll(t, meta.DefaultNS, "keyed")
	if len(keyed) != 4*n {
		t.Fatalf("keyed stream holds %d records, want %d", len(keyed), 4*n)
	}
	for _, r := range keyed {
		checkMapped(t, r, true)
		if r.Partition != keyed[0].Partition {
			t.Fatalf("one service's records landed in partitions %d and %d", keyed[0].Partition, r.Partition)
		}
	}
	if v := e.metric(t, "loam_otlp_log_records_received_total", `transport="grpc"`); v != 2*2*n {
		t.Errorf("received over gRPC: %v, want %d", v, 4*n)
	}
	if v := e.metric(t, "loam_otlp_log_records_received_total", `transport="http"`); v != 2*2*n {
		t.Errorf("received over HTTP: %v, want %d", v, 4*n)
	}
	if v := e.metric(t, "loam_otlp_received_bytes_total", `transport="http"`); v <= 0 {
		t.Errorf("bytes over HTTP: %v", v)
	}
}

// checkMapped checks one fetched record against the records makeRecords emits.
func checkMapped(t testing.TB, r fetched, keyed bool) {
	t.Helper()
	var v struct {
		TimeUnixNano         string `json:"timeUnixNano"`
		ObservedTimeUnixNano string `json:"observedTimeUnixNano"`
		SeverityNumber       *int   `json:"severityNumber"`
		SeverityText         string `json:"severityText"`
		Body                 struct {
			StringValue string `json:"stringValue"`
		} `json:"body"`
		Attributes []struct {
			Key   string `json:"key"`
			Value struct {
				IntValue string `json:"intValue"`
			} `json:"value"`
		} `json:"attributes"`
		Flags    int    `json:"flags"`
		TraceID  string `json:"traceId"`
		SpanID   string `json:"spanId"`
		Resource struct {
			Attributes []struct {
				Key   string          `json:"key"`
				Value json.RawMessage `json:"value"`
			} `json:"attributes"`
		} `json:"resource"`
		Scope struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"scope"`
	}
	if err := json.Unmarshal(r.Value, &v); err != nil {
		t.Fatalf("value: %v: %s", err, r.Value)
	}
	var i int
	if _, err := fmt.Sscanf(v.Body.StringValue[strings.LastIndexByte(v.Body.StringValue, ' ')+1:], "%d", &i); err != nil {
		t.Fatalf("body %q", v.Body.StringValue)
	}
	if len(v.Attributes) != 1 || v.Attributes[0].Key != "i" || v.Attributes[0].Value.IntValue != fmt.Sprint(i) {
		t.Errorf("attributes of %s (int64 as a string)", r.Value)
	}
	if v.Scope.Name != "loam/otlp-test" || v.Scope.Version != "1.0.0" {
		t.Errorf("scope of %s", r.Value)
	}
	res := map[string]string{}
	for _, a := range v.Resource.Attributes {
		res[a.Key] = string(a.Value)
	}
	if res["service.name"] != `{"stringValue":"checkout"}` || res["pid"] != `{"intValue":"42"}` {
		t.Errorf("resource of %s", r.Value)
	}
	if v.ObservedTimeUnixNano == "" {
		t.Errorf("no observedTimeUnixNano (the SDK sets it): %s", r.Value)
	}
	if i%2 == 0 {
		if v.TimeUnixNano != fmt.Sprint((1732870000000+int64(i))*1e6) || r.Timestamp != 1732870000000+int64(i) {
			t.Errorf("record %d: timeUnixNano %s, timestamp %d", i, v.TimeUnixNano, r.Timestamp)
		}
		if v.TraceID != "5b8efbf49d2e410ca01f9a3b1ce500ff" || v.SpanID != "eb1c3a00427f1001" || v.Flags != 1 {
			t.Errorf("record %d: trace %q span %q flags %d (hex ids)", i, v.TraceID, v.SpanID, v.Flags)
		}
		if r.header("otel.trace_id") != v.TraceID || r.header("otel.span_id") != v.SpanID || r.header("otel.severity_number") != "13" {
			t.Errorf("record %d: headers %v", i, r.Headers)
		}
		if v.SeverityNumber == nil || *v.SeverityNumber != 13 || v.SeverityText != "WARN" {
			t.Errorf("record %d: severity %v %q (enum as integer)", i, v.SeverityNumber, v.SeverityText)
		}
	} else {
		var obs int64
		fmt.Sscan(v.ObservedTimeUnixNano, &obs)
		if v.TimeUnixNano != "" || r.Timestamp != obs/1e6 {
			t.Errorf("record %d: no time_unix_nano: timestamp %d, want observed %d", i, r.Timestamp, obs/1e6)
		}
		if len(r.Headers) != 0 || v.TraceID != "" || v.SeverityNumber != nil {
			t.Errorf("record %d: headers %v trace %q severity %v, want none", i, r.Headers, v.TraceID, v.SeverityNumber)
		}
	}
	switch {
	case keyed && (r.Key == nil || *r.Key != "checkout"):
		t.Errorf("record %d of the keyed stream: key %v, want checkout", i, r.Key)
	case !keyed && r.Key != nil:
		t.Errorf("record %d: key %q, want none", i, *r.Key)
	}
}
