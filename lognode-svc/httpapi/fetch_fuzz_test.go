package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

// A value that is JSON syntax in invalid UTF-8 must not be written verbatim: the answer
// would not be valid JSON, and decoders would replace the bytes.
func TestFetchBodyInvalidUTF8JSONValue(t *testing.T) {
	v := []byte("\"\xff\"")
	b := checkFetchBody(t, []recordbatch.Record{{Timestamp: 1, Value: v}}, 0)
	if !bytes.Contains(b, []byte(`"value_base64":"Iv8i"`)) {
		t.Fatalf("answer %q: want the value as value_base64", b)
	}
}

// FuzzFetchBody: whatever the stored records hold, the fetch answer is valid JSON and
// gives back each record's offset, timestamp, key and value bytes and its headers exactly:
// their order, repeated keys, binary and null values.
func FuzzFetchBody(f *testing.F) {
	for _, s := range []struct{ key, value, hk, hv string }{
		{"k", `{"a": 1}`, "h", "v"},
		{"\xff", "\"\xff\"", "", ""},
		{"", " 1 ", "h\x00", "\u2028"},
		{"k\"\n<", "null", "a", "\xc3"},
		{"", "", "", ""},
		{"\xc3\xa9", `"\ud800"`, "x", "y"},
	} {
		f.Add([]byte(s.key), []byte(s.value), s.hk, s.hv, false, false)
	}
	f.Add([]byte("k"), []byte("v"), "\xff", "\x00\xff", false, true)
	f.Fuzz(func(t *testing.T, key, value []byte, hk, hv string, nullKey, nullValue bool) {
		r := recordbatch.Record{Timestamp: 5, Key: key, Value: value}
		if nullKey {
			r.Key = nil
		}
		if nullValue {
			r.Value = nil
		}
		if hk != "" {
			// A repeated key, a binary value and a null one.
			r.Headers = []recordbatch.Header{{Key: hk, Value: []byte(hv)}, {Key: hk, Value: value}, {Key: hv, Value: nil}, {Key: "", Value: []byte{}}}
		}
		checkFetchBody(t, []recordbatch.Record{r, {Timestamp: 6, Value: value}}, 1)
	})
}

// checkFetchBody builds one stored batch of recs at base offset 10, answers a fetch of it
// from offset 10+skip and checks the answer; it returns the answer.
func checkFetchBody(t *testing.T, recs []recordbatch.Record, skip int) []byte {
	t.Helper()
	batch, err := recordbatch.Append(nil, recs, recordbatch.DefaultBuildOptions())
	if err != nil {
		t.Skip(err)
	}
	if err := recordbatch.SetBaseOffset(batch, 10); err != nil {
		t.Fatal(err)
	}
	// Read the records back as stored (the batch codec's view of empty and null).
	parsed, _, err := recordbatch.Parse(batch)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := parsed.Records()
	if err != nil {
		t.Fatal(err)
	}
	body, n, err := appendFetchBody(nil, int64(10+skip), reader.Result{Batches: [][]byte{batch}, NextOffset: int64(10 + len(recs)), HighWatermark: 20, LogStart: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(body) || !utf8.Valid(body) {
		t.Fatalf("fetch answer is not valid JSON: %q", body)
	}
	var fr streamapi.FetchResponse
	if err := json.Unmarshal(body, &fr); err != nil {
		t.Fatal(err)
	}
	if n != len(recs)-skip || len(fr.Records) != n || fr.NextOffset != int64(10+len(recs)) || fr.HighWatermark != 20 || fr.LogStart != 3 {
		t.Fatalf("answer %s: %d records, want %d", body, len(fr.Records), len(recs)-skip)
	}
	for i, got := range fr.Records {
		want := stored[skip+i]
		if got.Offset == nil || *got.Offset != int64(10+skip+i) || got.Timestamp == nil || *got.Timestamp != want.Timestamp {
			t.Fatalf("record %d: offset or timestamp wrong in %s", i, body)
		}
		k, err := got.KeyBytes()
		if err != nil || !bytes.Equal(k, want.Key) || (k == nil) != (want.Key == nil) {
			t.Fatalf("record %d: key %q, want %q (%s)", i, k, want.Key, body)
		}
		v, err := got.Bytes()
		if err != nil || !bytes.Equal(v, want.Value) || (v == nil) != (want.Value == nil) {
			t.Fatalf("record %d: value %q, want %q (%s)", i, v, want.Value, body)
		}
		var wantHeaders streamapi.Headers
		for _, h := range want.Headers {
			wantHeaders = append(wantHeaders, streamapi.Header{Key: h.Key, Value: h.Value})
		}
		if !got.Headers.Equal(wantHeaders) {
			t.Fatalf("record %d: headers %+v, want %+v exactly (%s)", i, got.Headers, wantHeaders, body)
		}
	}
	return body
}
