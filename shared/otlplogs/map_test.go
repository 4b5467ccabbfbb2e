package otlplogs_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/otlplogs"
)

var update = flag.Bool("update", false, "write golden files that do not exist yet")

func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}

// sample is a request that uses every field the mapping writes.
func sample() *collogspb.ExportLogsServiceRequest {
	trace := []byte{0x5b, 0x8e, 0xfb, 0xf4, 0x9d, 0x2e, 0x41, 0x0c, 0xa0, 0x1f, 0x9a, 0x3b, 0x1c, 0xe5, 0x00, 0xff}
	span := []byte{0xeb, 0x1c, 0x3a, 0x00, 0x42, 0x7f, 0x10, 0x01}
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource: &resourcepb.Resource{
			Attributes:             []*commonpb.KeyValue{kv("service.name", str("checkout")), kv("host.id", &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 42}})},
			DroppedAttributesCount: 1,
			EntityRefs:             []*commonpb.EntityRef{{Type: "service", IdKeys: []string{"service.name"}}},
		},
		SchemaUrl: "https://opentelemetry.io/schemas/1.26.0",
		ScopeLogs: []*logspb.ScopeLogs{{
			Scope: &commonpb.InstrumentationScope{Name: "app/log", Version: "1.2.3", Attributes: []*commonpb.KeyValue{kv("scope.k", str("v"))}},
			LogRecords: []*logspb.LogRecord{
				{
					TimeUnixNano: 1732870000123456789, ObservedTimeUnixNano: 1732870000999000000,
					SeverityNumber: logspb.SeverityNumber_SEVERITY_NUMBER_ERROR, SeverityText: "ERROR",
					Body: str("payment \"failed\"\n\tcode=\u2028 \x01"),
					Attributes: []*commonpb.KeyValue{
						kv("bool", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}),
						kv("int", &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -9007199254740993}}),
						kv("double", &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5e300}}),
						kv("nan", &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: math.Inf(-1)}}),
						kv("bytes", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1, 0xfe, 0xff}}}),
						kv("array", &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{str("a"), {}}}}}),
						kv("map", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{kv("inner", str("x"))}}}}),
						{Key: "novalue"},
					},
					DroppedAttributesCount: 2, Flags: 1, TraceId: trace, SpanId: span, EventName: "payment.failed",
				},
				{ObservedTimeUnixNano: 1732870001000000000, Body: str("observed only"), Attributes: []*commonpb.KeyValue{kv("service.name", str("override"))}},
				{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{}}}},
			},
		}},
	}, {
		ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{SeverityNumber: logspb.SeverityNumber_SEVERITY_NUMBER_INFO, Body: str("bare")}}}},
	}}}
}

// render is the golden text of mapped records: one JSON line each.
func render(res otlplogs.Result) []byte {
	var b bytes.Buffer
	for _, r := range res.Records {
		fmt.Fprintf(&b, "key=%q ts=%d headers=[", r.Key, r.Timestamp)
		for i, h := range r.Headers {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s=%s", h.Key, h.Value)
		}
		fmt.Fprintf(&b, "]\n%s\n", r.Value)
	}
	fmt.Fprintf(&b, "rejected=%d message=%q\n", res.Rejected, res.Message)
	return b.Bytes()
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	want, err := os.ReadFile(path)
	if os.IsNotExist(err) && *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the mapping:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestMapGolden(t *testing.T) {
	res := otlplogs.Map(sample(), otlplogs.Options{KeyAttribute: "service.name", ArrivalMs: 1732870002000})
	golden(t, "mapping.golden", render(res))
	for i, r := range res.Records {
		if !json.Valid(r.Value) {
			t.Errorf("record %d: value is not valid JSON: %s", i, r.Value)
		}
	}
}

func TestMapRules(t *testing.T) {
	res := otlplogs.Map(sample(), otlplogs.Options{KeyAttribute: "service.name", ArrivalMs: 1732870002000})
	if len(res.Records) != 4 || res.Rejected != 0 {
		t.Fatalf("got %d records, %d rejected; want 4, 0", len(res.Records), res.Rejected)
	}
	for i, want := range []struct {
		key string
		ts  int64
		nh  int
	}{{"checkout", 1732870000123, 3}, {"override", 1732870001000, 0}, {"checkout", 1732870002000, 0}, {"", 1732870002000, 1}} {
		r := res.Records[i]
		if string(r.Key) != want.key || r.Timestamp != want.ts || len(r.Headers) != want.nh {
			t.Errorf("record %d: key %q ts %d headers %d; want %q %d %d", i, r.Key, r.Timestamp, len(r.Headers), want.key, want.ts, want.nh)
		}
	}
	if res.Records[3].Key != nil {
		t.Errorf("a record without the key attribute has key %q, want none", res.Records[3].Key)
	}
	h := res.Records[0].Headers
	if string(h[0].Value) != "5b8efbf49d2e410ca01f9a3b1ce500ff" || string(h[1].Value) != "eb1c3a00427f1001" || string(h[2].Value) != "17" {
		t.Errorf("headers %s=%s %s=%s %s=%s", h[0].Key, h[0].Value, h[1].Key, h[1].Value, h[2].Key, h[2].Value)
	}
	// Without a key attribute, no record has a key.
	for i, r := range otlplogs.Map(sample(), otlplogs.Options{}).Records {
		if r.Key != nil {
			t.Errorf("record %d has key %q without a key attribute", i, r.Key)
		}
	}
	// A non-string key attribute keys by its OTLP/JSON.
	r := otlplogs.Map(sample(), otlplogs.Options{KeyAttribute: "host.id"}).Records[0]
	if string(r.Key) != `{"intValue":"42"}` {
		t.Errorf("int key attribute: key %q", r.Key)
	}
}

func TestMapRejects(t *testing.T) {
	req := sample()
	lrs := req.ResourceLogs[0].ScopeLogs[0].LogRecords
	lrs[1].TraceId = []byte{1, 2, 3}
	lrs[2].SpanId = make([]byte, 9)
	res := otlplogs.Map(req, otlplogs.Options{})
	if res.Rejected != 2 || len(res.Records) != 2 {
		t.Fatalf("rejected %d, kept %d; want 2, 2", res.Rejected, len(res.Records))
	}
	want := "resourceLogs[0].scopeLogs[0].logRecords[1]: traceId is 3 bytes, want 16 (or none) (and 1 more rejected)"
	if res.Message != want {
		t.Errorf("message %q\nwant    %q", res.Message, want)
	}
	if !strings.Contains(string(res.Records[1].Value), `"bare"`) {
		t.Errorf("kept the wrong records: %s", res.Records[1].Value)
	}

	// The size limit counts key, value and headers; the record at the limit stays.
	one := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{
		{Body: str(strings.Repeat("x", 100)), SeverityNumber: 9}, {Body: str(strings.Repeat("x", 101)), SeverityNumber: 9}, {Body: str("small")},
	}}}}}}
	size := len(otlplogs.Map(one, otlplogs.Options{}).Records[0].Value) + len("otel.severity_number") + 1
	res = otlplogs.Map(one, otlplogs.Options{MaxRecordBytes: size})
	if res.Rejected != 1 || len(res.Records) != 2 || !strings.Contains(res.Message, "logRecords[1]") || !strings.Contains(res.Message, fmt.Sprintf("over the record limit of %d", size)) {
		t.Errorf("size limit: rejected %d kept %d message %q", res.Rejected, len(res.Records), res.Message)
	}
}

// TestValueRoundTrip: a mapped value, decoded as an OTLP/JSON LogRecord, is the LogRecord
// it came from, and its resource and scope members are the request's.
func TestValueRoundTrip(t *testing.T) {
	req := sample()
	res := otlplogs.Map(req, otlplogs.Options{})
	var i int
	for _, rl := range req.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				checkValue(t, res.Records[i].Value, lr, rl, sl)
				i++
			}
		}
	}
}

func checkValue(t testing.TB, value []byte, lr *logspb.LogRecord, rl *logspb.ResourceLogs, sl *logspb.ScopeLogs) {
	t.Helper()
	var members struct {
		Resource json.RawMessage `json:"resource"`
		Scope    json.RawMessage `json:"scope"`
	}
	if err := json.Unmarshal(value, &members); err != nil {
		t.Fatalf("value is not JSON: %v: %s", err, value)
	}
	resource, scope := "{}", "{}"
	if members.Resource != nil {
		resource = string(members.Resource)
	}
	if members.Scope != nil {
		scope = string(members.Scope)
	}
	// The resource and scope members carry their list's schemaUrl.
	doc := fmt.Sprintf(`{"resourceLogs":[{"resource":%s,"schemaUrl":%s,"scopeLogs":[{"scope":%s,"schemaUrl":%s,"logRecords":[%s]}]}]}`,
		resource, schemaOf(members.Resource), scope, schemaOf(members.Scope), value)
	got, err := otlplogs.DecodeJSON([]byte(doc))
	if err != nil {
		t.Fatalf("decode the value back: %v\n%s", err, doc)
	}
	want := &logspb.ResourceLogs{Resource: rl.GetResource(), SchemaUrl: rl.GetSchemaUrl(), ScopeLogs: []*logspb.ScopeLogs{{Scope: sl.GetScope(), SchemaUrl: sl.GetSchemaUrl(), LogRecords: []*logspb.LogRecord{lr}}}}
	normalize(want)
	g := got.ResourceLogs[0]
	normalize(g)
	if !proto.Equal(g, want) {
		t.Fatalf("round trip differs:\n got %v\nwant %v\nvalue %s", g, want, value)
	}
}

func schemaOf(obj json.RawMessage) string {
	var s struct {
		SchemaURL string `json:"schemaUrl"`
	}
	_ = json.Unmarshal(obj, &s)
	b, _ := json.Marshal(s.SchemaURL)
	return string(b)
}

// normalize clears what an empty OTLP/JSON object cannot tell apart from an absent one.
func normalize(rl *logspb.ResourceLogs) {
	if r := rl.Resource; r != nil && len(r.Attributes) == 0 && r.DroppedAttributesCount == 0 && len(r.EntityRefs) == 0 {
		rl.Resource = nil
	}
	for _, sl := range rl.ScopeLogs {
		if s := sl.Scope; s != nil && s.Name == "" && s.Version == "" && len(s.Attributes) == 0 && s.DroppedAttributesCount == 0 {
			sl.Scope = nil
		}
	}
}
