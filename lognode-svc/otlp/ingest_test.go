package otlp_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/lognode-svc/otlp"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/tlsconf"
)

// TestQuotaRetries drives the SDK exporters into a namespace's ingest quota: they get 429
// with Retry-After (HTTP) and RESOURCE_EXHAUSTED with RetryInfo (gRPC), retry, and every
// log arrives.
func TestQuotaRetries(t *testing.T) {
	e := start(t)
	if _, err := e.meta.SetQuota(ctxT(t), meta.Quota{Namespace: meta.DefaultNS, IngestBytesPerSec: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	const exports, per = 8, 20
	body := strings.Repeat("q", 1000)
	for _, transport := range []string{"http", "grpc"} {
		ex := newExporter(t, e, transport, false, nil, true)
		for i := range exports {
			recs := makeRecords(t, "svc", fmt.Sprintf("%s-%d %s", transport, i, body), per)
			if err := ex.Export(ctxT(t), recs); err != nil {
				t.Fatalf("%s export %d: %v", transport, i, err)
			}
		}
	}
	got := bodies(t, e.readAll(t, meta.DefaultNS, otlp.DefaultStream))
	for _, transport := range []string{"http", "grpc"} {
		for i := range exports {
			for j := range per {
				if k := fmt.Sprintf("%s-%d %s %d", transport, i, body, j); got[k] < 1 {
					t.Fatalf("lost %s export %d record %d", transport, i, j)
				}
			}
		}
	}
	if v := e.metric(t, "loam_otlp_requests_total", `transport="http"`, `outcome="429"`); v == 0 {
		t.Errorf("the HTTP exporter was never refused with 429: the test did not reach the quota")
	}
	if v := e.metric(t, "loam_otlp_requests_total", `transport="grpc"`, `outcome="ResourceExhausted"`); v == 0 {
		t.Errorf("the gRPC exporter was never refused with RESOURCE_EXHAUSTED")
	}
}

// TestQuotaAnswer: the refusal itself carries the delay, over both transports.
func TestQuotaAnswer(t *testing.T) {
	e := start(t)
	if _, err := e.meta.SetQuota(ctxT(t), meta.Quota{Namespace: meta.DefaultNS, IngestBytesPerSec: 1024}); err != nil {
		t.Fatal(err)
	}
	pb, _ := proto.Marshal(logsRequest(strings.Repeat("z", 3000)))
	// The first request takes the whole bucket (a request larger than it is admitted from
	// a full bucket); the next is refused.
	var status int
	var h map[string][]string
	for range 3 {
		var code int
		code, hh, _ := post(t, e, "POST", "/v1/logs", "application/x-protobuf", "", pb, nil)
		status, h = code, hh
		if status == 429 {
			break
		}
	}
	if status != 429 || len(h["Retry-After"]) == 0 || h["Retry-After"][0] == "0" {
		t.Fatalf("over quota: status %d Retry-After %v, want 429 with a delay", status, h["Retry-After"])
	}
	conn, err := grpc.NewClient(e.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = collogspb.NewLogsServiceClient(conn).Export(ctxT(t), logsRequest(strings.Repeat("z", 3000)))
	st := grpcstatus.Convert(err)
	if st.Code() != codes.ResourceExhausted || retryDelay(st) <= 0 {
		t.Fatalf("over quota over gRPC: %v %q details %v, want RESOURCE_EXHAUSTED with RetryInfo", st.Code(), st.Message(), st.Details())
	}
}

func retryDelay(st *grpcstatus.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// flaky is a real sequencer client whose commits fail while down is set.
type flaky struct {
	meta.Client
	down atomic.Bool
}

func (f *flaky) CommitWal(ctx context.Context, c meta.CommitWal) (meta.CommitResult, error) {
	if f.down.Load() {
		return meta.CommitResult{}, fmt.Errorf("%w: test", meta.ErrUnavailable)
	}
	return f.Client.CommitWal(ctx, c)
}

func (f *flaky) ListNamespaces(ctx context.Context) ([]string, error) {
	if f.down.Load() {
		return nil, fmt.Errorf("%w: test", meta.ErrUnavailable)
	}
	return f.Client.ListNamespaces(ctx)
}

// TestUnavailableIsRetryable: a sequencer out of reach answers 503 with Retry-After and
// UNAVAILABLE with RetryInfo, which exporters retry; once it is back the retry lands.
func TestUnavailableIsRetryable(t *testing.T) {
	mc := &flaky{Client: servertest.Client(t)}
	e := startOn(t, mc, "n-1", withLimits(httpapi.Limits{ProduceWait: time.Second}))
	pb, _ := proto.Marshal(logsRequest("warm"))
	if code, _, b := post(t, e, "POST", "/v1/logs", "application/x-protobuf", "", pb, nil); code != 200 {
		t.Fatalf("warm-up: %d %s", code, b)
	}
	mc.down.Store(true)
	code, h, b := post(t, e, "POST", "/v1/logs", "application/x-protobuf", "", pb, nil)
	if code != 503 || h.Get("Retry-After") == "" {
		t.Fatalf("sequencer down: %d Retry-After %q %s, want 503 with Retry-After", code, h.Get("Retry-After"), b)
	}
	conn, err := grpc.NewClient(e.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = collogspb.NewLogsServiceClient(conn).Export(ctxT(t), logsRequest("down"))
	if st := grpcstatus.Convert(err); st.Code() != codes.Unavailable || retryDelay(st) <= 0 {
		t.Fatalf("sequencer down over gRPC: %v %q, want UNAVAILABLE with RetryInfo", st.Code(), st.Message())
	}
	// A retrying exporter gets through once the sequencer is back.
	for _, transport := range []string{"http", "grpc"} {
		mc.down.Store(true)
		ex := newExporter(t, e, transport, false, nil, true)
		done := make(chan error, 1)
		go func() { done <- ex.Export(ctxT(t), makeRecords(t, "svc", "retried-"+transport, 3)) }()
		time.Sleep(1500 * time.Millisecond)
		mc.down.Store(false)
		if err := <-done; err != nil {
			t.Fatalf("%s: Export after the sequencer came back: %v", transport, err)
		}
	}
	got := bodies(t, e.readAll(t, meta.DefaultNS, otlp.DefaultStream))
	for _, k := range []string{"retried-http 0", "retried-http 2", "retried-grpc 1"} {
		if got[k] < 1 {
			t.Errorf("%s was not written: %v", k, sortedKeys(got))
		}
	}
}

// TestAuth: with auth on, OTLP takes the API key from Authorization: Bearer and defaults
// the namespace to the key's.
func TestAuth(t *testing.T) {
	mc := servertest.Client(t)
	ctx := ctxT(t)
	if err := mc.CreateNamespace(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	token, key, err := auth.NewKey(false, "team", "otlp test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mc.CreateKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	e := startOn(t, mc, "n-1", withAuth(auth.New(mc, auth.Options{})))
	e.token = token
	pb, _ := proto.Marshal(logsRequest("authed"))
	for _, c := range []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"no key", nil, 401},
		{"not bearer", map[string]string{"Authorization": "Basic eDp5"}, 401},
		{"unknown key", map[string]string{"Authorization": "Bearer loam_abc_" + strings.Repeat("A", 43)}, 401},
		{"other namespace", map[string]string{"Authorization": "Bearer " + token, "loam-namespace": meta.DefaultNS}, 403},
		{"the key's namespace", map[string]string{"Authorization": "Bearer " + token}, 200},
	} {
		if code, _, b := post(t, e, "POST", "/v1/logs", "application/x-protobuf", "", pb, c.hdr); code != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, code, b, c.status)
		}
	}
	conn, err := grpc.NewClient(e.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := collogspb.NewLogsServiceClient(conn)
	if _, err := c.Export(ctx, logsRequest("x")); grpcstatus.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC without a key: %v", err)
	}
	if _, err := c.Export(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token, "loam-namespace", meta.DefaultNS), logsRequest("x")); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Errorf("gRPC with another namespace's key: %v", err)
	}
	ex := newExporter(t, e, "grpc", true, map[string]string{"authorization": "Bearer " + token}, false)
	if err := ex.Export(ctx, makeRecords(t, "svc", "authed-grpc", 2)); err != nil {
		t.Fatal(err)
	}
	got := bodies(t, e.readAll(t, "team", otlp.DefaultStream))
	if got["authed"] != 1 || got["authed-grpc 0"] != 1 || len(got) != 3 {
		t.Errorf("team/otel_logs holds %v", sortedKeys(got))
	}
}

// TestAutoCreateRace: two nodes that export to a new namespace's otel_logs at once both
// succeed, and there is one stream with every record.
func TestAutoCreateRace(t *testing.T) {
	mc := servertest.Client(t)
	if err := mc.CreateNamespace(ctxT(t), "race"); err != nil {
		t.Fatal(err)
	}
	bucket := objstore.NewMem()
	a := startOn(t, mc, "n-a", withOTLP(otlp.Settings{Partitions: 3}), withBucket(bucket))
	b := startOn(t, mc, "n-b", withOTLP(otlp.Settings{Partitions: 3}), withBucket(bucket))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i, e := range []*env{a, b, a, b, a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pb, _ := proto.Marshal(logsRequest(fmt.Sprintf("racer %d", i)))
			code, _, body := post(t, e, "POST", "/v1/logs", "application/x-protobuf", "", pb, map[string]string{"loam-namespace": "race"})
			if code != 200 {
				errs <- fmt.Errorf("racer %d: %d %s", i, code, body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := mc.ListStreams(ctxT(t), "race")
	if err != nil || len(list) != 1 || list[0].Name != otlp.DefaultStream || list[0].Partitions != 3 {
		t.Fatalf("streams of race: %v %v", list, err)
	}
	if got := bodies(t, a.readAll(t, "race", otlp.DefaultStream)); len(got) != 8 {
		t.Errorf("read %d distinct records, want 8", len(got))
	}
}

// TestTLS: both transports serve TLS with the node's certificate, and the SDK exporters
// reach them with it.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	files, err := tlsconf.GenerateDev(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.Load(tlsconf.Config{CertFile: files.Cert, KeyFile: files.Key, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, func(c *node.Config) { c.TLS = src })
	caPEM, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tcfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	e.client = &http.Client{Transport: &http.Transport{TLSClientConfig: tcfg}}
	hx, err := otlploghttp.New(context.Background(), otlploghttp.WithEndpoint(e.otlp), otlploghttp.WithTLSClientConfig(tcfg))
	if err != nil {
		t.Fatal(err)
	}
	defer hx.Shutdown(context.Background())
	if err := hx.Export(ctxT(t), makeRecords(t, "svc", "tls-http", 2)); err != nil {
		t.Fatalf("OTLP/HTTP over TLS: %v", err)
	}
	gx, err := otlploggrpc.New(context.Background(), otlploggrpc.WithEndpoint(e.grpc), otlploggrpc.WithTLSCredentials(credentials.NewTLS(tcfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer gx.Shutdown(context.Background())
	if err := gx.Export(ctxT(t), makeRecords(t, "svc", "tls-grpc", 2)); err != nil {
		t.Fatalf("OTLP/gRPC over TLS: %v", err)
	}
	// Plaintext is refused.
	plain := newExporter(t, e, "http", false, nil, false)
	if err := plain.Export(ctxT(t), makeRecords(t, "svc", "plain", 1)); err == nil {
		t.Errorf("a plaintext export to a TLS listener succeeded")
	}
	if got := bodies(t, e.readAll(t, meta.DefaultNS, otlp.DefaultStream)); len(got) != 4 {
		t.Errorf("read %v", sortedKeys(got))
	}
}

// TestTelemetrygen sends logs with the OpenTelemetry Collector's telemetrygen over both
// transports and reads them back.
func TestTelemetrygen(t *testing.T) {
	bin, err := exec.LookPath("telemetrygen")
	if err != nil {
		repo, _ := filepath.Abs("../..")
		bin = filepath.Join(repo, ".tools", "bin", "telemetrygen")
		if _, serr := os.Stat(bin); serr != nil {
			if os.Getenv("LOAM_REQUIRE_SERVERS") != "" {
				t.Fatalf("telemetrygen is not installed (.ci/tools.sh telemetrygen)")
			}
			t.Skip("telemetrygen is not installed (.ci/tools.sh telemetrygen)")
		}
	}
	e := start(t)
	const n = 300
	for _, c := range []struct{ name, stream string }{{"http", "tg_http"}, {"grpc", "tg_grpc"}} {
		args := []string{"logs", "--otlp-insecure", "--logs", fmt.Sprint(n), "--workers", "2", "--rate", "0", "--body", "telemetrygen " + c.name,
			"--otlp-header", fmt.Sprintf(`loam-stream="%s"`, c.stream), "--otlp-attributes", `service.name="tg"`}
		if c.name == "http" {
			args = append(args, "--otlp-http", "--otlp-endpoint", e.otlp)
		} else {
			args = append(args, "--otlp-endpoint", e.grpc)
		}
		if err := mc(e).CreateStreamDefault(t, c.stream); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("telemetrygen %s: %v\n%s", c.name, err, out)
		}
		recs := e.waitRecords(t, meta.DefaultNS, c.stream, 2*n)
		if len(recs) != 2*n { // two workers, --logs each
			t.Fatalf("%s: read %d records, want %d\n%s", c.name, len(recs), 2*n, out)
		}
		for _, r := range recs {
			if !strings.Contains(string(r.Value), `"body":{"stringValue":"telemetrygen `+c.name+`"}`) || !strings.Contains(string(r.Value), `{"key":"service.name","value":{"stringValue":"tg"}}`) {
				t.Fatalf("%s: value %s", c.name, r.Value)
			}
		}
	}
}

// streams creates streams for a test.
type streams struct{ e *env }

func mc(e *env) streams { return streams{e} }

func (s streams) CreateStreamDefault(t testing.TB, name string) error {
	_, err := s.e.meta.CreateStream(ctxT(t), meta.StreamConfig{Namespace: meta.DefaultNS, Name: name, Partitions: 2, Class: meta.ClassStandard,
		Encoding: meta.EncodingKafka, RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete})
	return err
}

// blocking is a real sequencer client whose commits wait while hold is open.
type blocking struct {
	meta.Client
	hold chan struct{}
}

func (b *blocking) CommitWal(ctx context.Context, c meta.CommitWal) (meta.CommitResult, error) {
	select {
	case <-b.hold:
	case <-ctx.Done():
	}
	return b.Client.CommitWal(ctx, c)
}

// TestAdmission: past the node's concurrency limit an Export is refused with a retry
// delay (429 + Retry-After, RESOURCE_EXHAUSTED + RetryInfo) instead of being held.
func TestAdmission(t *testing.T) {
	bc := &blocking{Client: servertest.Client(t), hold: make(chan struct{})}
	e := startOn(t, bc, "n-1", withLimits(httpapi.Limits{MaxConcurrent: 1}))
	if err := mc(e).CreateStreamDefault(t, otlp.DefaultStream); err != nil {
		t.Fatal(err)
	}
	pb, _ := proto.Marshal(logsRequest("held"))
	conn, err := grpc.NewClient(e.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := collogspb.NewLogsServiceClient(conn)
	held := make(chan error, 2)
	go func() {
		code, _, b := post(t, e, "POST", "/v1/logs", "application/x-protobuf", "", pb, nil)
		if code != 200 {
			held <- fmt.Errorf("held HTTP export: %d %s", code, b)
			return
		}
		held <- nil
	}()
	go func() { _, err := c.Export(context.Background(), logsRequest("held grpc")); held <- err }()
	// Wait until both are in flight (their records buffered, the commit held).
	deadline := time.Now().Add(10 * time.Second)
	for e.metric(t, "loam_otlp_received_bytes_total", `transport="http"`) == 0 || e.metric(t, "loam_otlp_received_bytes_total", `transport="grpc"`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the held exports did not arrive")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	code, h, b := post(t, e, "POST", "/v1/logs", "application/x-protobuf", "", pb, nil)
	if code != 429 || h.Get("Retry-After") == "" || !strings.Contains(string(b), "OTLP exports at once") {
		t.Errorf("HTTP past the limit: %d Retry-After %q %q", code, h.Get("Retry-After"), b)
	}
	_, err = c.Export(ctxT(t), logsRequest("refused"))
	if st := grpcstatus.Convert(err); st.Code() != codes.ResourceExhausted || retryDelay(st) <= 0 {
		t.Errorf("gRPC past the limit: %v %q, want RESOURCE_EXHAUSTED with RetryInfo", st.Code(), st.Message())
	}
	close(bc.hold)
	for range 2 {
		if err := <-held; err != nil {
			t.Error(err)
		}
	}
}
