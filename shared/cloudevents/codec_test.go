package cloudevents

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/recordbatch"
)

var createGolden = flag.Bool("golden.create", false, "write golden files that are absent (never overwrites)")

// golden returns the bytes of testdata file name, writing build() there first when it is
// absent and -golden.create is set. Golden files are never regenerated.
func golden(t *testing.T, name string, build func() []byte) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) && *createGolden {
		b = build()
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err != nil {
		t.Fatalf("golden %s: %v (run with -golden.create once)", name, err)
	}
	return b
}

const sample = `{"specversion":"1.0","id":"A234-1234-1234","source":"https://example.com/repo","type":"com.example.push","subject":"main","time":"2026-11-30T12:00:00.5+01:00","datacontenttype":"application/json","count":42,"flag":true,"note":"a \"quoted\" é","partitionkey":"user-7","data":{"n": [1, 2.50, "x"]}}`

func TestJSONRoundTripByteForByte(t *testing.T) {
	for _, in := range []string{
		sample,
		`{"specversion":"1.0","id":"1","source":"/s","type":"t"}`,
		`{"type":"t","source":"/s","id":"1","specversion":"1.0","datacontenttype":"text/plain","data":"hello\nworld"}`,
		`{"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"application/octet-stream","data_base64":"AAEC/w=="}`,
		`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":"just a JSON string"}`,
		`{"specversion":"1.0","id":"1","source":"/s","type":"t","neg":-7,"off":false,"data":123}`,
	} {
		e, err := DecodeJSON([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := string(AppendJSON(nil, e)); got != in {
			t.Fatalf("JSON round trip:\n got %s\nwant %s", got, in)
		}
		// Through the record layout and back.
		rec := Record(e)
		s := FromRecord(roundTripRecord(t, rec), Origin{})
		if s.Form != FormHeaders {
			t.Fatalf("form %d", s.Form)
		}
		if got := string(AppendStoredJSON(nil, s)); got != in {
			t.Fatalf("record round trip:\n got %s\nwant %s", got, in)
		}
		// Through protobuf and back: order, names and values kept; time in UTC.
		pe, err := DecodeProto(AppendProto(nil, e))
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Replace(in, `"2026-11-30T12:00:00.5+01:00"`, `"2026-11-30T11:00:00.5Z"`, 1)
		if got := string(AppendJSON(nil, pe)); got != want {
			t.Fatalf("proto round trip:\n got %s\nwant %s", got, want)
		}
	}
}

// roundTripRecord writes rec into a RecordBatch and parses it back, as the log does.
func roundTripRecord(t *testing.T, rec recordbatch.Record) recordbatch.Record {
	t.Helper()
	b, err := recordbatch.Append(nil, []recordbatch.Record{rec}, recordbatch.DefaultBuildOptions())
	if err != nil {
		t.Fatal(err)
	}
	batch, _, err := recordbatch.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := batch.Records()
	if err != nil || len(recs) != 1 {
		t.Fatal(err, len(recs))
	}
	return recs[0]
}

func TestRecordLayout(t *testing.T) {
	e, err := DecodeJSON([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	r := Record(e)
	var b strings.Builder
	b.WriteString("key " + string(r.Key) + "\n")
	for _, h := range r.Headers {
		b.WriteString(h.Key + ": " + string(h.Value) + "\n")
	}
	b.WriteString("value " + string(r.Value) + "\n")
	want := golden(t, "testdata/record_layout.txt", func() []byte { return []byte(b.String()) })
	if b.String() != string(want) {
		t.Fatalf("record layout:\n%s\nwant\n%s", b.String(), want)
	}
	for _, must := range []string{"ce_specversion: 1.0\n", "content-type: application/json\n", "loam_ce_types: count=integer,flag=boolean\n", "key user-7\n"} {
		if !strings.Contains(b.String(), must) {
			t.Errorf("layout lacks %q", must)
		}
	}
}

func TestGoldenProto(t *testing.T) {
	e, err := DecodeJSON([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	enc := AppendProto(nil, e)
	want := golden(t, "testdata/sample.pb", func() []byte { return enc })
	if !bytes.Equal(enc, want) {
		t.Fatalf("protobuf encoding changed:\n got %x\nwant %x", enc, want)
	}
	back, err := DecodeProto(want)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AppendProto(nil, back)); got != string(want) {
		t.Fatalf("protobuf round trip changed the bytes")
	}
	batch := AppendBatchProto(nil, []*Event{e, back})
	es, err := DecodeBatchProto(batch)
	if err != nil || len(es) != 2 {
		t.Fatal(err, len(es))
	}
}

func TestBinaryMode(t *testing.T) {
	h := http.Header{}
	h.Set("Ce-Specversion", "1.0")
	h.Set("ce-id", "x-1")
	h.Set("ce-source", "/src/a%20b")
	h.Set("ce-type", "t.t")
	h.Set("ce-zext", "z")
	h.Set("ce-aext", "caf%C3%A9")
	h.Set("Content-Type", "text/plain")
	e, err := DecodeBinary(h, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(AppendJSON(nil, e))
	want := `{"specversion":"1.0","id":"x-1","source":"/src/a b","type":"t.t","datacontenttype":"text/plain","aext":"café","zext":"z","data":"body"}`
	if got != want {
		t.Fatalf("binary decode:\n got %s\nwant %s", got, want)
	}
	out := http.Header{}
	body := SetBinary(out, e)
	if string(body) != "body" || out.Get("Ce-Source") != "/src/a%20b" || out.Get("Ce-Aext") != "caf%C3%A9" || out.Get("Content-Type") != "text/plain" {
		t.Fatalf("binary encode: %v %q", out, body)
	}
	back, err := DecodeBinary(out, body)
	if err != nil || string(AppendJSON(nil, back)) != want {
		t.Fatalf("binary round trip: %v", err)
	}
}

func TestEnvelope(t *testing.T) {
	r := recordbatch.Record{Timestamp: 1764590400123, Key: []byte("k1"), Value: []byte(`{"a":1}`),
		Headers: []recordbatch.Header{{Key: "other", Value: []byte("x")}}}
	s := FromRecord(r, Origin{StreamID: 9, Namespace: "default", Stream: "orders", Partition: 2, Offset: 77})
	want := `{"specversion":"1.0","id":"9-77","source":"/namespaces/default/streams/orders/partitions/2","type":"dev.loam.stream.record","time":"2025-12-01T12:00:00.123Z","partitionkey":"k1","datacontenttype":"application/json","data":{"a":1}}`
	if s.Form != FormEnvelope || string(AppendStoredJSON(nil, s)) != want {
		t.Fatalf("envelope %d:\n got %s\nwant %s", s.Form, AppendStoredJSON(nil, s), want)
	}
	bin := FromRecord(recordbatch.Record{Key: []byte{0xff}, Value: []byte{0, 1}}, Origin{StreamID: 1})
	if v, _ := bin.Event.Get(AttrDataContentType); v != "application/octet-stream" {
		t.Fatal(v)
	}
	if _, ok := bin.Event.Get(AttrPartitionKey); ok {
		t.Fatal("a binary key was carried")
	}
	if got := string(AppendJSON(nil, bin.Event)); !strings.Contains(got, `"data_base64":"AAE="`) {
		t.Fatal(got)
	}
	// Partial ce_ headers: the envelope.
	part := FromRecord(recordbatch.Record{Headers: []recordbatch.Header{{Key: "ce_id", Value: []byte("1")}}, Value: []byte("x")}, Origin{StreamID: 3, Offset: 4})
	if part.Form != FormEnvelope || part.Event.ID() != "3-4" {
		t.Fatalf("partial headers: %+v", part)
	}
	// Kafka structured mode: passed through unchanged.
	val := []byte(`{ "specversion" : "1.0", "id":"s1","source":"/x","type":"y" }`)
	st := FromRecord(recordbatch.Record{Value: val, Headers: []recordbatch.Header{{Key: "content-type", Value: []byte("application/cloudevents+json; charset=utf-8")}}}, Origin{})
	if st.Form != FormStructured || string(AppendStoredJSON(nil, st)) != string(val) {
		t.Fatalf("structured: %+v", st)
	}
}

func TestBatchJSON(t *testing.T) {
	in := `[{"specversion":"1.0","id":"1","source":"/s","type":"t"},{"specversion":"1.0","id":"2","source":"/s","type":"t","x":1}]`
	es, err := DecodeBatchJSON([]byte(in))
	if err != nil || len(es) != 2 {
		t.Fatal(err)
	}
	if got := string(AppendBatchJSON(nil, es)); got != in {
		t.Fatalf("got %s", got)
	}
	bad := `[{"specversion":"1.0","id":"1","source":"/s","type":"t"},{"specversion":"1.0","id":"2","source":"/s"}]`
	_, err = DecodeBatchJSON([]byte(bad))
	var ce *Error
	if !errors.As(err, &ce) || ce.Index != 1 || ce.Attr != "type" || !strings.Contains(err.Error(), "event 1") {
		t.Fatalf("bad batch: %v", err)
	}
}

// TestValidation: every rule refuses the event and names the attribute.
func TestValidation(t *testing.T) {
	base := `"id":"1","source":"/s","type":"t"`
	for _, c := range []struct{ in, attr, msg string }{
		{`{"specversion":"0.3",` + base + `}`, "specversion", "only 1.0"},
		{`{"specversion":"2.0",` + base + `}`, "specversion", "only 1.0"},
		{`{` + base + `}`, "specversion", "missing"},
		{`{"specversion":"1.0","source":"/s","type":"t"}`, "id", "missing"},
		{`{"specversion":"1.0","id":"","source":"/s","type":"t"}`, "id", "empty"},
		{`{"specversion":"1.0","id":"1","type":"t"}`, "source", "missing"},
		{`{"specversion":"1.0","id":"1","source":"","type":"t"}`, "source", "empty"},
		{`{"specversion":"1.0","id":"1","source":"/s"}`, "type", "missing"},
		{`{"specversion":"1.0","id":"1","source":"/s","type":""}`, "type", "empty"},
		{`{"specversion":"1.0",` + base + `,"time":"yesterday"}`, "time", "RFC 3339"},
		{`{"specversion":"1.0",` + base + `,"time":"2026-02-30T00:00:00Z"}`, "time", "RFC 3339"},
		{`{"specversion":"1.0",` + base + `,"time":"2026-01-01 00:00:00Z"}`, "time", "RFC 3339"},
		{`{"specversion":"1.0",` + base + `,"Upper":"x"}`, "Upper", "lowercase"},
		{`{"specversion":"1.0",` + base + `,"my_ext":"x"}`, "my_ext", "lowercase"},
		{`{"specversion":"1.0",` + base + `,"":"x"}`, "", "lowercase"},
		{`{"specversion":1,` + base + `}`, "specversion", "want a string"},
		{`{"specversion":"1.0","id":7,"source":"/s","type":"t"}`, "id", "want a string"},
		{`{"specversion":"1.0",` + base + `,"subject":true}`, "subject", "want a string"},
		{`{"specversion":"1.0",` + base + `,"time":{}}`, "time", "want a string"},
		{`{"specversion":"1.0",` + base + `,"datacontenttype":["a"]}`, "datacontenttype", "want a string"},
		{`{"specversion":"1.0",` + base + `,"dataschema":5}`, "dataschema", "want a string"},
		{`{"specversion":"1.0",` + base + `,"data":1,"data_base64":"AA=="}`, "data_base64", "both"},
		{`{"specversion":"1.0",` + base + `,"data_base64":"!!"}`, "data_base64", "base64"},
		{`{"specversion":"1.0",` + base + `,"ext":{"a":1}}`, "ext", "object"},
		{`{"specversion":"1.0",` + base + `,"ext":1.5}`, "ext", "Integer"},
		{`{"specversion":"1.0",` + base + `,"id":"2"}`, "id", "twice"},
	} {
		_, err := DecodeJSON([]byte(c.in))
		var ce *Error
		if !errors.As(err, &ce) || ce.Attr != c.attr || !strings.Contains(err.Error(), c.msg) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want attribute %q and %q", c.in, err, c.attr, c.msg)
			continue
		}
		if c.attr != "" && !strings.Contains(err.Error(), `"`+c.attr+`"`) {
			t.Errorf("%s: %v does not name %q", c.in, err, c.attr)
		}
	}
	// Binary mode: the same rules on headers.
	h := http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"1"}, "Ce-Source": {"/s"}, "Ce-Type": {"t"}, "Ce-Time": {"noon"}}
	if _, err := DecodeBinary(h, nil); err == nil || !strings.Contains(err.Error(), `"time"`) {
		t.Errorf("binary time: %v", err)
	}
	h = http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"1"}, "Ce-Source": {"/s"}, "Ce-Type": {"t"}, "Ce-Bad_name": {"x"}}
	if _, err := DecodeBinary(h, nil); err == nil || !strings.Contains(err.Error(), `"bad_name"`) {
		t.Errorf("binary name: %v", err)
	}
}

func TestValidTime(t *testing.T) {
	for s, want := range map[string]bool{
		"2026-11-30T12:00:00Z": true, "2026-11-30t12:00:00z": true, "2026-11-30T12:00:00.123456789+05:30": true,
		"2024-02-29T00:00:00Z": true, "2023-02-29T00:00:00Z": false, "2026-11-30T24:00:00Z": false,
		"2026-11-30T12:00:00": false, "2026-11-30T12:00:00.Z": false, "2026-11-30T12:00:00+0530": false, "": false,
		"2016-12-31T23:59:60Z": true,
	} {
		if ValidTime(s) != want {
			t.Errorf("ValidTime(%q) = %v", s, !want)
		}
	}
}

func TestKey(t *testing.T) {
	// SHA-256 of "/s" 0x00 "1".
	k := KeyOf("/s", "1")
	if KeyOf("/s1", "") == k || KeyOf("/s", "1") != k {
		t.Fatal("key does not separate source from id")
	}
	if got := hex.EncodeToString(k[:]); got != "f8367ecadcd04ac0e0df60440a61004d74895ff14321b16c9f284b5ea814a11e" {
		t.Fatalf("KeyOf = %s", got)
	}
}
