package otlp_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/otlp"
	"github.com/loamhq/loam/shared/meta"
)

func logsRequest(bodies ...string) *collogspb.ExportLogsServiceRequest {
	lrs := make([]*logspb.LogRecord, len(bodies))
	for i, b := range bodies {
		lrs[i] = &logspb.LogRecord{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: b}}, SeverityNumber: logspb.SeverityNumber_SEVERITY_NUMBER_INFO}
	}
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: lrs}}}}}
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// post sends one OTLP/HTTP request and answers its status, Content-Type, decoded body
// (Status or ExportLogsServiceResponse, by the status) and Retry-After.
func post(t testing.TB, e *env, method, path, ctype, encoding string, body []byte, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+e.otlp+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func decodeStatus(t testing.TB, ctype string, b []byte) *status.Status {
	t.Helper()
	st := &status.Status{}
	var err error
	if strings.HasPrefix(ctype, "application/x-protobuf") {
		err = proto.Unmarshal(b, st)
	} else {
		err = protojson.Unmarshal(b, st)
	}
	if err != nil {
		t.Fatalf("failure body is not a google.rpc.Status in %s: %v: %q", ctype, err, b)
	}
	return st
}

// TestHTTPStatusCodes: every failure answers the status the OTLP specification
// prescribes, with a google.rpc.Status naming the problem in the request's encoding.
func TestHTTPStatusCodes(t *testing.T) {
	e := start(t, withLimits(httpapi.Limits{MaxRequestBytes: 64 << 10, MaxRecordBytes: 32 << 10}))
	pb, _ := proto.Marshal(logsRequest("hello"))
	big, _ := proto.Marshal(logsRequest(strings.Repeat("x", 70<<10)))
	bomb := gzipped(bytes.Repeat([]byte{0}, 1<<20)) // small on the wire, 1 MiB decompressed
	for _, c := range []struct {
		name, method, path, ctype, enc string
		body                           []byte
		hdr                            map[string]string
		status                         int
		want                           string
	}{
		{"bad protobuf", "POST", "/v1/logs", "application/x-protobuf", "", []byte{0x0a, 0x05, 1}, nil, 400, "not an OTLP ExportLogsServiceRequest in protobuf"},
		{"bad JSON", "POST", "/v1/logs", "application/json", "", []byte(`{"resourceLogs":[`), nil, 400, "the body ends early"},
		{"base64 ids in JSON", "POST", "/v1/logs", "application/json", "", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"W46L+50uQQygH5o7HOUA/w=="}]}]}]}`), nil, 400, "not base64"},
		{"text body", "POST", "/v1/logs", "text/plain", "", []byte("hi"), nil, 415, `Content-Type "text/plain" is not supported`},
		{"no content type", "POST", "/v1/logs", "", "", pb, nil, 415, "send application/x-protobuf or application/json"},
		{"brotli", "POST", "/v1/logs", "application/x-protobuf", "br", pb, nil, 415, `Content-Encoding "br" is not supported`},
		{"not gzip", "POST", "/v1/logs", "application/x-protobuf", "gzip", pb, nil, 400, "the body is not gzip"},
		{"too large", "POST", "/v1/logs", "application/x-protobuf", "", big, nil, 413, "over the limit of 65536 bytes"},
		{"gzip bomb", "POST", "/v1/logs", "application/x-protobuf", "gzip", bomb, nil, 413, "decompresses to more than the limit of 65536 bytes"},
		{"wrong path", "POST", "/v1/traces", "application/x-protobuf", "", pb, nil, 404, "OTLP logs go to POST /v1/logs"},
		{"wrong method", "GET", "/v1/logs", "application/x-protobuf", "", nil, nil, 405, "GET is not allowed"},
		{"missing stream", "POST", "/v1/logs", "application/x-protobuf", "", pb, map[string]string{"loam-stream": "nope"}, 404, `stream "nope" of namespace "default" does not exist`},
		{"missing namespace", "POST", "/v1/logs", "application/x-protobuf", "", pb, map[string]string{"loam-namespace": "nope"}, 404, "namespace"},
		{"bad stream name", "POST", "/v1/logs", "application/x-protobuf", "", pb, map[string]string{"loam-stream": "otel_logs", "loam-namespace": "bad name!"}, 0, ""},
	} {
		status, h, b := post(t, e, c.method, c.path, c.ctype, c.enc, c.body, c.hdr)
		if c.status == 0 {
			if status < 400 || status >= 500 {
				t.Errorf("%s: status %d, want a 4xx", c.name, status)
			}
			continue
		}
		if status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, status, c.status, b)
			continue
		}
		want := c.ctype
		if want != "application/x-protobuf" {
			want = "application/json"
		}
		if got := h.Get("Content-Type"); got != want {
			t.Errorf("%s: Content-Type %q, want %q", c.name, got, want)
		}
		if st := decodeStatus(t, h.Get("Content-Type"), b); !strings.Contains(st.GetMessage(), c.want) {
			t.Errorf("%s: message %q, want it to say %q", c.name, st.GetMessage(), c.want)
		}
		if h.Get("Retry-After") != "" {
			t.Errorf("%s: Retry-After %q on a failure that is not retryable", c.name, h.Get("Retry-After"))
		}
	}
	if v := e.metric(t, "loam_otlp_requests_total", `transport="http"`, `outcome="415"`); v != 3 {
		t.Errorf("415 outcomes counted %v, want 3", v)
	}
}

// TestHTTPJSON posts OTLP/JSON (the OTLP specification's example, hex ids in capitals),
// gzip on and off, and reads the records back.
func TestHTTPJSON(t *testing.T) {
	e := start(t)
	body, err := os.ReadFile("../../shared/otlplogs/testdata/logs.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, gz := range []bool{false, true} {
		b, enc := body, ""
		if gz {
			b, enc = gzipped(body), "gzip"
		}
		status, h, resp := post(t, e, "POST", "/v1/logs", "application/json; charset=utf-8", enc, b, nil)
		if status != 200 || h.Get("Content-Type") != "application/json" {
			t.Fatalf("gzip=%v: %d %s %s", gz, status, h.Get("Content-Type"), resp)
		}
		var out collogspb.ExportLogsServiceResponse
		if err := protojson.Unmarshal(resp, &out); err != nil || out.PartialSuccess != nil {
			t.Fatalf("answer %s: %v", resp, err)
		}
	}
	recs := e.readAll(t, meta.DefaultNS, otlp.DefaultStream)
	if len(recs) != 2 {
		t.Fatalf("read %d records, want 2", len(recs))
	}
	for _, r := range recs {
		if r.Timestamp != 1544712660300 || r.header("otel.trace_id") != "5b8efff798038103d269b633813fc60c" || r.header("otel.span_id") != "eee19b7ec3c1b174" || r.header("otel.severity_number") != "10" {
			t.Errorf("record %+v", r)
		}
		if !strings.Contains(string(r.Value), `"traceId":"5b8efff798038103d269b633813fc60c"`) || !strings.Contains(string(r.Value), `"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"my.service"}}]}`) {
			t.Errorf("value %s", r.Value)
		}
	}
}

// TestPartialSuccess: a request with one record over the record size limit commits the
// others and reports the one, over both transports.
func TestPartialSuccess(t *testing.T) {
	e := start(t, withLimits(httpapi.Limits{MaxRecordBytes: 4096}))
	req := func(prefix string) *collogspb.ExportLogsServiceRequest {
		return logsRequest(prefix+" small 1", prefix+" "+strings.Repeat("x", 5000), prefix+" small 2")
	}
	check := func(name string, ps *collogspb.ExportLogsPartialSuccess) {
		t.Helper()
		if ps.GetRejectedLogRecords() != 1 || !strings.Contains(ps.GetErrorMessage(), "logRecords[1]") || !strings.Contains(ps.GetErrorMessage(), "over the record limit of 4096") {
			t.Errorf("%s: partial_success %v", name, ps)
		}
	}
	// OTLP/HTTP, protobuf and JSON.
	pb, _ := proto.Marshal(req("http-pb"))
	status, h, b := post(t, e, "POST", "/v1/logs", "application/x-protobuf", "", pb, nil)
	var resp collogspb.ExportLogsServiceResponse
	if status != 200 || h.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &resp) != nil {
		t.Fatalf("HTTP protobuf: %d %q", status, b)
	}
	check("HTTP protobuf", resp.PartialSuccess)
	js, _ := protojson.Marshal(req("http-json")) // no ids: protojson writes OTLP/JSON here
	status, _, b = post(t, e, "POST", "/v1/logs", "application/json", "", js, nil)
	resp.Reset()
	if status != 200 || protojson.Unmarshal(b, &resp) != nil {
		t.Fatalf("HTTP JSON: %d %s", status, b)
	}
	check("HTTP JSON", resp.PartialSuccess)
	// OTLP/gRPC.
	conn, err := grpc.NewClient(e.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gresp, err := collogspb.NewLogsServiceClient(conn).Export(ctxT(t), req("grpc"))
	if err != nil {
		t.Fatal(err)
	}
	check("gRPC", gresp.PartialSuccess)

	got := bodies(t, e.readAll(t, meta.DefaultNS, otlp.DefaultStream))
	for _, p := range []string{"http-pb", "http-json", "grpc"} {
		if got[p+" small 1"] != 1 || got[p+" small 2"] != 1 {
			t.Errorf("%s: the valid records were not all committed: %v", p, sortedKeys(got))
		}
	}
	if len(got) != 6 {
		t.Errorf("read %d distinct records, want 6: %v", len(got), sortedKeys(got))
	}
	if v := e.metric(t, "loam_otlp_log_records_partial_total"); v != 3 {
		t.Errorf("partial counted %v, want 3", v)
	}
}

// TestGRPCStatusCodes: gRPC failures carry the codes the OTLP specification prescribes.
func TestGRPCStatusCodes(t *testing.T) {
	e := start(t, withLimits(httpapi.Limits{MaxRequestBytes: 64 << 10, MaxRecordBytes: 32 << 10}))
	conn, err := grpc.NewClient(e.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := collogspb.NewLogsServiceClient(conn)
	for _, tc := range []struct {
		name string
		md   []string
		req  *collogspb.ExportLogsServiceRequest
		code codes.Code
		want string
	}{
		{"missing stream", []string{"loam-stream", "nope"}, logsRequest("a"), codes.NotFound, `stream "nope" of namespace "default" does not exist`},
		{"missing namespace", []string{"loam-namespace", "nope"}, logsRequest("a"), codes.NotFound, "namespace"},
		{"too large", nil, logsRequest(strings.Repeat("x", 70<<10)), codes.ResourceExhausted, "larger than max"},
	} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), tc.md...)
		_, err := c.Export(ctx, tc.req)
		st := grpcstatus.Convert(err)
		if st.Code() != tc.code || !strings.Contains(st.Message(), tc.want) {
			t.Errorf("%s: %v %q, want %v %q", tc.name, st.Code(), st.Message(), tc.code, tc.want)
		}
		if len(st.Details()) != 0 {
			t.Errorf("%s: details %v on a failure that is not retryable", tc.name, st.Details())
		}
	}
}

// TestEmptyRequest: a request that carries no log records succeeds at once, as the OTLP
// specification says a server should answer one, whatever its target: nothing is looked
// up or created.
func TestEmptyRequest(t *testing.T) {
	e := start(t)
	for _, body := range []string{`{}`, `{"resourceLogs":[]}`, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[]}]}]}`} {
		status, _, b := post(t, e, "POST", "/v1/logs", "application/json", "", []byte(body), map[string]string{"loam-namespace": "nope"})
		if status != 200 {
			t.Errorf("empty request %s over HTTP: %d %s, want 200", body, status, b)
		}
	}
	conn, err := grpc.NewClient(e.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(ctxT(t), "loam-namespace", "nope")
	if _, err := collogspb.NewLogsServiceClient(conn).Export(ctx, &collogspb.ExportLogsServiceRequest{}); err != nil {
		t.Errorf("empty request over gRPC: %v, want success", err)
	}
	if list, err := e.meta.ListStreams(ctxT(t), meta.DefaultNS); err != nil || len(list) != 0 {
		t.Errorf("an empty request created streams: %v %v", list, err)
	}
}
