package otlp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/lognode-svc/otlp"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is a real log node serving OTLP on a real single-voter sequencer.
type env struct {
	meta meta.Client
	node *node.Node
	http string // native API base URL
	otlp string // OTLP/HTTP host:port
	grpc string // OTLP/gRPC host:port
	// client and token read through the native API (TLS, auth).
	client *http.Client
	token  string
}

type option func(*node.Config)

func withLimits(l httpapi.Limits) option    { return func(c *node.Config) { c.Limits = l } }
func withOTLP(s otlp.Settings) option       { return func(c *node.Config) { c.OTLP = s } }
func withAuth(a *auth.Authenticator) option { return func(c *node.Config) { c.Auth = a } }
func withBucket(b objstore.Bucket) option   { return func(c *node.Config) { c.Bucket = b } }

func start(t testing.TB, opts ...option) *env {
	t.Helper()
	mc := servertest.Client(t)
	return startOn(t, mc, "n-1", opts...)
}

func startOn(t testing.TB, mc meta.Client, id string, opts ...option) *env {
	t.Helper()
	cfg := node.Config{NodeID: id, HTTPAddr: "127.0.0.1:0", OTLPHTTPAddr: "127.0.0.1:0", OTLPGRPCAddr: "127.0.0.1:0",
		Bucket: objstore.NewMem(), Meta: mc, FlushInterval: 5 * time.Millisecond, Logger: quiet()}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return &env{meta: mc, node: n, http: n.URL(), otlp: n.OTLPHTTPAddr(), grpc: n.OTLPGRPCAddr(), client: http.DefaultClient}
}

// fetched is one record as the native fetch API answers it.
type fetched struct {
	Partition int32
	Offset    int64           `json:"offset"`
	Timestamp int64           `json:"timestamp"`
	Key       *string         `json:"key"`
	Value     json.RawMessage `json:"value"`
	Headers   []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"headers"`
}

func (f fetched) header(k string) string {
	for _, h := range f.Headers {
		if h.Key == k {
			return h.Value
		}
	}
	return ""
}

// readAll reads every record of ns/stream through the native fetch API.
func (e *env) readAll(t testing.TB, ns, stream string) []fetched {
	t.Helper()
	st, _, err := e.meta.GetStream(ctxT(t), ns, stream)
	if err != nil {
		t.Fatalf("stream %s/%s: %v", ns, stream, err)
	}
	var out []fetched
	for p := range st.Partitions {
		for off := int64(0); ; {
			req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/namespaces/%s/streams/%s/partitions/%d/records?offset=%d", e.http, ns, stream, p, off), nil)
			if e.token != "" {
				req.Header.Set("Authorization", "Bearer "+e.token)
			}
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Records    []fetched `json:"records"`
				NextOffset int64     `json:"next_offset"`
				HighWater  int64     `json:"high_watermark"`
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("fetch %s/%s/%d@%d: %d %s", ns, stream, p, off, resp.StatusCode, b)
			}
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("fetch answer: %v: %s", err, b)
			}
			for _, r := range body.Records {
				r.Partition = p
				out = append(out, r)
			}
			off = body.NextOffset
			if off >= body.HighWater || len(body.Records) == 0 {
				break
			}
		}
	}
	return out
}

// waitRecords reads ns/stream until it holds at least n records.
func (e *env) waitRecords(t testing.TB, ns, stream string, n int) []fetched {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		recs := e.readAll(t, ns, stream)
		if len(recs) >= n || time.Now().After(deadline) {
			return recs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metric sums the samples of a metric of the node's /metrics whose labels contain all of
// labels ("transport=\"grpc\"" and the like).
func (e *env) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	resp, err := e.client.Get(e.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
lines:
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		for _, lb := range labels {
			if !strings.Contains(l, lb) {
				continue lines
			}
		}
		var v float64
		fmt.Sscanf(l[strings.LastIndexByte(l, ' ')+1:], "%g", &v)
		sum += v
	}
	return sum
}

// capture is an SDK log processor that keeps what the SDK emits, so tests call an
// exporter's Export directly with records that carry a resource and a scope.
type capture struct {
	mu   sync.Mutex
	recs []sdklog.Record
}

func (c *capture) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r.Clone())
	return nil
}
func (c *capture) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *capture) Shutdown(context.Context) error                         { return nil }
func (c *capture) ForceFlush(context.Context) error                       { return nil }

func (c *capture) take() []sdklog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.recs
	c.recs = nil
	return out
}

var (
	testTrace = trace.TraceID{0x5b, 0x8e, 0xfb, 0xf4, 0x9d, 0x2e, 0x41, 0x0c, 0xa0, 0x1f, 0x9a, 0x3b, 0x1c, 0xe5, 0x00, 0xff}
	testSpan  = trace.SpanID{0xeb, 0x1c, 0x3a, 0x00, 0x42, 0x7f, 0x10, 0x01}
)

// makeRecords emits n SDK log records of service svc with body "<prefix> i": even ones in
// a span with a timestamp, odd ones without trace context or timestamp.
func makeRecords(t testing.TB, svc, prefix string, n int) []sdklog.Record {
	t.Helper()
	c := &capture{}
	res, err := resource.New(context.Background(), resource.WithAttributes(attribute.String("service.name", svc), attribute.Int("pid", 42)))
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(c))
	lg := lp.Logger("loam/otlp-test", otellog.WithInstrumentationVersion("1.0.0"))
	spanCtx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: testTrace, SpanID: testSpan, TraceFlags: trace.FlagsSampled}))
	for i := range n {
		var r otellog.Record
		r.SetBody(attribute.StringValue(fmt.Sprintf("%s %d", prefix, i)))
		r.AddAttributes(attribute.Int("i", i))
		ctx := context.Background()
		if i%2 == 0 {
			r.SetTimestamp(time.UnixMilli(1732870000000 + int64(i)))
			r.SetSeverity(otellog.SeverityWarn)
			r.SetSeverityText("WARN")
			ctx = spanCtx
		}
		lg.Emit(ctx, r)
	}
	return c.take()
}

// bodies maps each fetched record's body string to how often it was read.
func bodies(t testing.TB, recs []fetched) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range recs {
		var v struct {
			Body struct {
				StringValue string `json:"stringValue"`
			} `json:"body"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("value is not JSON: %v: %s", err, r.Value)
		}
		out[v.Body.StringValue]++
	}
	return out
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
