package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

func TestMurmur2KafkaVectors(t *testing.T) {
	// Kafka's UtilsTest.testMurmur2 cases.
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	// Through the partitioner the node places keyed records with: murmur2, made positive,
	// modulo the partition count.
	for in, want := range cases {
		for _, n := range []int32{1, 7, 1000} {
			if got, w := KeyPartition([]byte(in), n), int32((uint32(want)&0x7fffffff)%uint32(n)); got != w {
				t.Errorf("KeyPartition(%q, %d) = %d, want %d (murmur2 %d)", in, n, got, w, want)
			}
		}
	}
}

func TestKeyPartitionRange(t *testing.T) {
	for _, n := range []int32{1, 3, 8, 1000} {
		for i := range 500 {
			p := KeyPartition([]byte(strings.Repeat("k", i)), n)
			if p < 0 || p >= n {
				t.Fatalf("KeyPartition(len %d, %d) = %d", i, n, p)
			}
		}
	}
}

func TestDecodeProduce(t *testing.T) {
	lim := Limits{}
	lim.defaults()
	lim.MaxRecordBytes = 100
	tests := []struct {
		name, body string
		status     int
		code       string
		msg        string // substring of the message
	}{
		{"empty body", ``, 400, streamapi.CodeInvalidJSON, "empty"},
		{"not json", `{"records": [`, 400, streamapi.CodeInvalidJSON, "ends early"},
		{"syntax", `{"records": [}`, 400, streamapi.CodeInvalidJSON, "byte"},
		{"no records", `{}`, 400, streamapi.CodeInvalidRecord, `no "records"`},
		{"records empty", `{"records": []}`, 400, streamapi.CodeInvalidRecord, "empty"},
		{"records wrong type", `{"records": {}}`, 400, streamapi.CodeInvalidJSON, "records"},
		{"unknown field", `{"records": [{"vaule": 1}]}`, 400, streamapi.CodeInvalidJSON, "vaule"},
		{"partition string", `{"records": [{"value": 1, "partition": "0"}]}`, 400, streamapi.CodeInvalidJSON, "partition"},
		{"timestamp float", `{"records": [{"value": 1, "timestamp": 1.5}]}`, 400, streamapi.CodeInvalidJSON, "timestamp"},
		{"headers not strings", `{"records": [{"value": 1, "headers": {"a": 1}}]}`, 400, streamapi.CodeInvalidJSON, "headers"},
		{"bad base64", `{"records": [{"value_base64": "!!"}]}`, 400, streamapi.CodeInvalidJSON, ""},
		{"both values", `{"records": [{"value": 1}, {"value": 1, "value_base64": "AA=="}]}`, 400, streamapi.CodeInvalidRecord, "records[1]"},
		{"both keys", `{"records": [{"key": "a", "key_base64": "AA=="}]}`, 400, streamapi.CodeInvalidRecord, "records[0]"},
		{"partition out of range", `{"records": [{"value": 1, "partition": 8}]}`, 400, streamapi.CodePartitionNotFound, "partition 8"},
		{"negative partition", `{"records": [{"value": 1, "partition": -1}]}`, 400, streamapi.CodePartitionNotFound, "partition -1"},
		{"offset given", `{"records": [{"value": 1, "offset": 3}]}`, 400, streamapi.CodeInvalidRecord, "offset"},
		{"negative timestamp", `{"records": [{"value": 1, "timestamp": -5}]}`, 400, streamapi.CodeInvalidRecord, "negative"},
		{"record too large", `{"records": [{"value": "` + strings.Repeat("x", 120) + `"}]}`, 413, streamapi.CodeRecordTooLarge, "records[0]"},
		{"trailing data", `{"records": [{"value": 1}]} x`, 400, streamapi.CodeInvalidJSON, "after"},
		{"header without key", `{"records": [{"value": 1, "headers": [{"value": "v"}]}]}`, 400, streamapi.CodeInvalidJSON, "key"},
		{"header both values", `{"records": [{"value": 1, "headers": [{"key": "k", "value": "v", "value_base64": "AA=="}]}]}`, 400, streamapi.CodeInvalidJSON, "value_base64"},
		{"header value a number", `{"records": [{"value": 1, "headers": [{"key": "k", "value": 1}]}]}`, 400, streamapi.CodeInvalidJSON, "string or null"},
		{"header unknown field", `{"records": [{"value": 1, "headers": [{"key": "k", "vaule": "v"}]}]}`, 400, streamapi.CodeInvalidJSON, "vaule"},
		{"headers a string", `{"records": [{"value": 1, "headers": "k=v"}]}`, 400, streamapi.CodeInvalidJSON, "headers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decodeProduce([]byte(tc.body), 8, lim, 0, 1000)
			var in *inputError
			if !errors.As(err, &in) {
				t.Fatalf("err = %v, want an input error", err)
			}
			if in.status != tc.status || in.code != tc.code || !strings.Contains(in.msg, tc.msg) {
				t.Fatalf("got %d %s %q, want %d %s containing %q", in.status, in.code, in.msg, tc.status, tc.code, tc.msg)
			}
		})
	}
}

func TestDecodeProduceValues(t *testing.T) {
	lim := Limits{}
	lim.defaults()
	body := `{"records": [
		{"key": "a", "value": {"x": [1, 2]}, "timestamp": 42, "headers": {"z": "1", "a": "2"}},
		{"value_base64": "/wA=", "partition": 3},
		{"value": null},
		{"key_base64": "/w==", "value": "text"}
	]}`
	recs, _, err := decodeProduce([]byte(body), 8, lim, 5, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	r0 := recs[0]
	if string(r0.rec.Value) != `{"x": [1, 2]}` || string(r0.rec.Key) != "a" || r0.rec.Timestamp != 42 || r0.partition != KeyPartition([]byte("a"), 8) {
		t.Fatalf("record 0: %+v", r0)
	}
	if len(r0.rec.Headers) != 2 || r0.rec.Headers[0].Key != "z" || r0.rec.Headers[1].Key != "a" {
		t.Fatalf("headers of the object form not in the order written: %+v", r0.rec.Headers)
	}
	if !bytes.Equal(recs[1].rec.Value, []byte{0xff, 0}) || recs[1].partition != 3 || recs[1].rec.Timestamp != 1000 {
		t.Fatalf("record 1: %+v", recs[1])
	}
	if recs[2].rec.Value != nil || recs[2].partition != 5 {
		t.Fatalf("record 2 (tombstone, sticky partition 5): %+v", recs[2])
	}
	if !bytes.Equal(recs[3].rec.Key, []byte{0xff}) || string(recs[3].rec.Value) != `"text"` {
		t.Fatalf("record 3: %+v", recs[3])
	}
}

func TestAppendRecordJSON(t *testing.T) {
	recs := []recordbatch.Record{
		{Timestamp: 7, Key: []byte("k\"\n\u2028<>&"), Value: []byte(`{"a":  1}`), Headers: []recordbatch.Header{{Key: "h", Value: []byte("v\x01")}}},
		{Timestamp: 8, Key: []byte{0xff, 0xfe}, Value: []byte{0xff, 1, 2}},
		{Timestamp: 9},
		{Timestamp: 10, Value: []byte("not json")},
	}
	for i, r := range recs {
		b := appendRecordJSON(nil, int64(i), r)
		if !json.Valid(b) {
			t.Fatalf("record %d: invalid JSON %s", i, b)
		}
		var got streamapi.Record
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		v, err := got.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if r.Value != nil && !bytes.Equal(v, r.Value) {
			t.Fatalf("record %d: value %q, want %q (%s)", i, v, r.Value, b)
		}
		k, err := got.KeyBytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(k, r.Key) {
			t.Fatalf("record %d: key %q, want %q", i, k, r.Key)
		}
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\"back\\slash", "ctl\x00\x1f\t\r\n", "uni é ☃ \u2028\u2029", "bad \xff utf8", "<html>&"} {
		got := appendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q: %s does not decode: %v", s, got, err)
		}
		want := s
		if !utf8.ValidString(s) {
			want = strings.ToValidUTF8(s, "\ufffd")
		}
		if back != want {
			t.Fatalf("%q round-trips to %q", s, back)
		}
	}
}

// FuzzDecodeProduce: the produce decoder never panics; whatever it accepts has valid
// partitions and records that build into a batch that validates.
func FuzzDecodeProduce(f *testing.F) {
	for _, s := range []string{
		`{"records":[{"value":1}]}`,
		`{"records":[{"key":"a","value":{"x":1},"headers":{"h":"v"},"partition":1,"timestamp":5}]}`,
		`{"records":[{"value_base64":"AAEC"},{"key_base64":"/w==","value":null}]}`,
		`{"records":[{"value":1,"value_base64":"AA=="}]}`,
		`{"records":{}}`, `[]`, `{"records":[{"partition":99,"value":1}]}`,
		`{"records":[{"value":1,"headers":[{"key":"k","value":"v"},{"key":"k","value_base64":"AP8="},{"key":"n","value":null},{"key_base64":"/w=="}]}]}`,
		`{"records":[{"value":1,"headers":{"b":"1","a":null,"b":"2"}}]}`,
		`{"records":[{"value":1,"headers":[{"key":"k","value":1}]}]}`,
	} {
		f.Add([]byte(s), int32(4))
	}
	lim := Limits{}
	lim.defaults()
	f.Fuzz(func(t *testing.T, body []byte, parts int32) {
		if parts < 1 || parts > 10000 {
			parts = 1
		}
		recs, _, err := decodeProduce(body, parts, lim, 3, 1000)
		if err != nil {
			var in *inputError
			if !errors.As(err, &in) || in.status < 400 || in.status > 499 || in.code == "" || in.msg == "" {
				t.Fatalf("error is not a named 4xx: %v", err)
			}
			return
		}
		if len(recs) == 0 {
			t.Fatal("accepted a request without records")
		}
		rs := make([]recordbatch.Record, len(recs))
		for i, r := range recs {
			if r.partition < 0 || r.partition >= parts {
				t.Fatalf("partition %d of %d", r.partition, parts)
			}
			rs[i] = r.rec
			rs[i].OffsetDelta = int32(i)
		}
		b, err := recordbatch.Append(nil, rs, recordbatch.DefaultBuildOptions())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := recordbatch.Validate(b); err != nil {
			t.Fatal(err)
		}
	})
}
