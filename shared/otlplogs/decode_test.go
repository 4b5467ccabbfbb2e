package otlplogs_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/otlplogs"
)

// TestDecodeJSONExample decodes the OTLP/JSON logs example of the OTLP specification's
// repository (testdata/logs.json): upper-case hex ids, 64-bit integers as strings.
func TestDecodeJSONExample(t *testing.T) {
	body, err := os.ReadFile("testdata/logs.json")
	if err != nil {
		t.Fatal(err)
	}
	req, err := otlplogs.DecodeJSON(body)
	if err != nil {
		t.Fatal(err)
	}
	lr := req.ResourceLogs[0].ScopeLogs[0].LogRecords[0]
	if lr.TimeUnixNano != 1544712660300000000 || lr.SeverityNumber != 10 || lr.SeverityText != "Information" {
		t.Errorf("log record fields: %v", lr)
	}
	if got := lr.TraceId; len(got) != 16 || got[0] != 0x5b || got[15] != 0x0c {
		t.Errorf("traceId %x", got)
	}
	if got := lr.SpanId; len(got) != 8 || got[0] != 0xee {
		t.Errorf("spanId %x", got)
	}
	if got := lr.Attributes[3].Value.GetDoubleValue(); got != 637.704 {
		t.Errorf("double attribute %v", got)
	}
	if got := req.ResourceLogs[0].Resource.Attributes[0].Value.GetStringValue(); got != "my.service" {
		t.Errorf("resource attribute %q", got)
	}
	res := otlplogs.Map(req, otlplogs.Options{KeyAttribute: "service.name"})
	golden(t, "logs.json.golden", render(res))
}

func TestDecodeJSONLenient(t *testing.T) {
	req, err := otlplogs.DecodeJSON([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[
		{"timeUnixNano":1544712660300000000,"severityNumber":"SEVERITY_NUMBER_WARN","flags":"1","unknownField":{"x":[1,2]},
		 "body":{"doubleValue":"NaN"},"attributes":[{"key":"i","value":{"intValue":7}},{"key":"e","value":{"intValue":1e3}}],"traceId":""},
		{"severityNumber":"9","body":{"bytesValue":"AAH+/w=="},"spanId":null}
	]}]}],"extra":true}`))
	if err != nil {
		t.Fatal(err)
	}
	lrs := req.ResourceLogs[0].ScopeLogs[0].LogRecords
	if lrs[0].TimeUnixNano != 1544712660300000000 || lrs[0].SeverityNumber != logspb.SeverityNumber_SEVERITY_NUMBER_WARN || lrs[0].Flags != 1 {
		t.Errorf("first record %v", lrs[0])
	}
	if !math.IsNaN(lrs[0].Body.GetDoubleValue()) || lrs[0].Attributes[0].Value.GetIntValue() != 7 || lrs[0].Attributes[1].Value.GetIntValue() != 1000 {
		t.Errorf("values %v", lrs[0])
	}
	if lrs[0].TraceId != nil || lrs[1].SeverityNumber != 9 || string(lrs[1].Body.GetBytesValue()) != "\x00\x01\xfe\xff" {
		t.Errorf("second record %v", lrs[1])
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{``, "the request body is empty"},
		{`{"resourceLogs":[`, "the body ends early"},
		{`{"resourceLogs":{}}`, "resourceLogs: got a JSON object, want an array"},
		{`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"W46L+50uQQygH5o7HOUA/w=="}]}]}]}`, "is not hex (OTLP/JSON writes traceId and spanId in hex, not base64)"},
		{`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"-1"}]}]}]}`, `"-1" is not an unsigned integer`},
		{`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":1.5}]}]}]}`, `1.5 is not an unsigned integer`},
		{`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"flags":4294967296}]}]}]}`, `over the 32-bit limit`},
		{`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":"LOUD"}]}]}]}`, `neither an integer nor a SeverityNumber name`},
		{`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"intValue":"x"}}]}]}]}`, `"x" is not an integer`},
		{`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"doubleValue":"x"}}]}]}]}`, `doubleValue "x" is not a number`},
		{`{"resourceLogs":[]} {}`, "unexpected data after the request object"},
		{`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityText":5}]}]}]}`, "severityText: got a JSON number, want a string"},
	} {
		_, err := otlplogs.DecodeJSON([]byte(c.body))
		if err == nil || !errors.Is(err, otlplogs.ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeJSON(%s): %v; want ErrMalformed with %q", c.body, err, c.want)
		}
	}
}

func TestDecodeProto(t *testing.T) {
	want := sample()
	body, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := otlplogs.DecodeProto(body)
	if err != nil || !proto.Equal(got, want) {
		t.Fatalf("DecodeProto: %v", err)
	}
	if _, err := otlplogs.DecodeProto([]byte{0x0a, 0x05, 1}); !errors.Is(err, otlplogs.ErrMalformed) {
		t.Errorf("truncated protobuf: %v", err)
	}
}

// fuzzSeeds are requests of every shape the fuzzers start from.
func fuzzSeeds(t testing.TB) [][]byte {
	example, err := os.ReadFile("testdata/logs.json")
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := proto.Marshal(sample())
	small, _ := proto.Marshal(&collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{{
		Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: math.NaN()}}, TraceId: []byte{1}}}}}}}})
	return [][]byte{example, pb, small, []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"arrayValue":{"values":[{"kvlistValue":{"values":[{"key":"a"}]}}]}}}]}]}]}`)}
}

// checkMapped states what holds of every decoded request: Map never panics, keeps or
// rejects each record, and every value is valid JSON that decodes back to its LogRecord.
func checkMapped(t *testing.T, req *collogspb.ExportLogsServiceRequest) {
	res := otlplogs.Map(req, otlplogs.Options{KeyAttribute: "a", MaxRecordBytes: 1 << 16})
	if int64(len(res.Records))+res.Rejected != int64(otlplogs.Count(req)) {
		t.Fatalf("%d records + %d rejected != %d log records", len(res.Records), res.Rejected, otlplogs.Count(req))
	}
	for _, r := range res.Records {
		if !json.Valid(r.Value) {
			t.Fatalf("value is not valid JSON: %s", r.Value)
		}
		if _, err := otlplogs.DecodeJSON([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[` + string(r.Value) + `]}]}]}`)); err != nil {
			t.Fatalf("value does not decode as OTLP/JSON: %v: %s", err, r.Value)
		}
	}
}

func FuzzDecodeProto(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := otlplogs.DecodeProto(body)
		if err != nil {
			if !errors.Is(err, otlplogs.ErrMalformed) {
				t.Fatalf("error without ErrMalformed: %v", err)
			}
			return
		}
		checkMapped(t, req)
	})
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := otlplogs.DecodeJSON(body)
		if err != nil {
			if !errors.Is(err, otlplogs.ErrMalformed) {
				t.Fatalf("error without ErrMalformed: %v", err)
			}
			return
		}
		checkMapped(t, req)
		// What decodes re-encodes as protobuf and decodes to the same request.
		pb, err := proto.Marshal(req)
		if err != nil {
			return // invalid UTF-8 in a string: protobuf refuses to encode it
		}
		back, err := otlplogs.DecodeProto(pb)
		if err != nil {
			t.Fatalf("protobuf of a decoded request does not decode: %v", err)
		}
		if len(back.GetResourceLogs()) != len(req.GetResourceLogs()) {
			t.Fatalf("resource logs %d != %d", len(back.GetResourceLogs()), len(req.GetResourceLogs()))
		}
	})
}
