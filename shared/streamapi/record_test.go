package streamapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRecordJSONShape(t *testing.T) {
	key := func(k []byte) Record { var r Record; r.SetKey(k); return r }
	jv, _ := JSONValue([]any{"<a>", 1})
	for _, c := range []struct {
		name string
		rec  Record
		want string
	}{
		{"tombstone", Record{}, `{}`},
		{"empty value", BytesValue(nil), `{"value_base64":""}`},
		{"bytes", BytesValue([]byte("hi")), `{"value_base64":"aGk="}`},
		{"auto json verbatim", AutoValue([]byte(` {"a": 1,
 "b": "<&>"} `)), `{"value":{"a": 1,
 "b": "<&>"}}`},
		{"json null", AutoValue([]byte("null")), `{"value":null}`},
		{"all fields", Record{Offset: ptr(int64(3)), Partition: ptr(int32(1)), Timestamp: ptr(int64(5)), Key: ptr("k"),
			Value: json.RawMessage(`[1]`), Headers: Headers{StringHeader("h", "<v>"), {Key: "h", Value: []byte{0xff}}, {Key: "\xfe", Value: nil}, StringHeader("", "")}},
			`{"offset":3,"partition":1,"timestamp":5,"key":"k","headers":[{"key":"h","value":"<v>"},{"key":"h","value_base64":"/w=="},{"key_base64":"/g==","value":null},{"key":"","value":""}],"value":[1]}`},
		{"auto text", AutoValue([]byte("hi")), `{"value_base64":"aGk="}`},
		{"auto empty", AutoValue([]byte{}), `{"value_base64":""}`},
		{"json no html escaping", jv, `{"value":["<a>",1]}`},
		{"utf8 key", key([]byte("k")), `{"key":"k"}`},
		{"empty key", key([]byte{}), `{"key":""}`},
		{"binary key", key([]byte{0xff}), `{"key_base64":"/w=="}`},
		{"null key", key(nil), `{}`},
	} {
		got, err := AppendRecordJSON(nil, c.rec)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %s, %v; want %s", c.name, got, err, c.want)
		}
	}
}

func TestRecordBytes(t *testing.T) {
	for _, c := range []struct {
		name           string
		json           string
		value, key     []byte // nil: null
		valErr, keyErr bool
	}{
		{"tombstone, null key", `{}`, nil, nil, false, false},
		{"json value", `{"value": {"a": [1, 2]}, "key": "k"}`, []byte(`{"a": [1, 2]}`), []byte("k"), false, false},
		{"base64", `{"value_base64": "AAE=", "key_base64": "/w=="}`, []byte{0, 1}, []byte{0xff}, false, false},
		{"empty", `{"value_base64": "", "key": ""}`, []byte{}, []byte{}, false, false},
		{"json null value is a tombstone", `{"value": null}`, nil, nil, false, false},
		{"both values", `{"value": 1, "value_base64": "AA=="}`, nil, nil, true, false},
		{"both keys", `{"key": "a", "key_base64": "AA=="}`, nil, nil, false, true},
	} {
		var r Record
		if err := json.Unmarshal([]byte(c.json), &r); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		v, err := r.Bytes()
		if c.valErr != errors.Is(err, ErrInvalidRecord) || !bytes.Equal(v, c.value) || (c.value == nil) != (v == nil) {
			t.Errorf("%s: Bytes %q, %v; want %q", c.name, v, err, c.value)
		}
		if !c.valErr && r.IsTombstone() != (c.value == nil) {
			t.Errorf("%s: IsTombstone %v", c.name, r.IsTombstone())
		}
		k, err := r.KeyBytes()
		if c.keyErr != errors.Is(err, ErrInvalidRecord) || !bytes.Equal(k, c.key) || (c.key == nil) != (k == nil) {
			t.Errorf("%s: KeyBytes %q, %v; want %q", c.name, k, err, c.key)
		}
	}
}

// The constructors copy: changing the caller's slice later does not change the record.
func TestConstructorsCopy(t *testing.T) {
	b := []byte(`"x"`)
	auto, raw := AutoValue(b), BytesValue(b)
	var r Record
	r.SetKey([]byte{0xff})
	k := r.KeyBase64
	b[1] = 'y'
	if string(auto.Value) != `"x"` || string(raw.ValueBase64) != `"x"` || k[0] != 0xff {
		t.Fatalf("aliased: %s %s", auto.Value, raw.ValueBase64)
	}
}

func ptr[T any](v T) *T { return &v }

func TestAppendRecordJSONRefuses(t *testing.T) {
	if _, err := AppendRecordJSON(nil, Record{Value: json.RawMessage(`{"a":`)}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("invalid JSON value: %v", err)
	}
}

func TestParseAPIError(t *testing.T) {
	for _, c := range []struct {
		status    int
		body      string
		code, msg string
	}{
		{404, `{"error":{"code":"stream_not_found","message":"no s"}}`, "stream_not_found", "no s"},
		{500, `{"error":{}}`, "", `{"error":{}}`},
		{502, "  bad gateway\nfrom nginx", "", "bad gateway"},
		{418, "", "", "I'm a teapot"},
		{400, "\xff\xfe", "", "\ufffd"},
		{400, strings.Repeat("\xffa", 100), "", strings.Repeat("\ufffda", 50)},
	} {
		e := parseAPIError(c.status, []byte(c.body))
		if e.Status != c.status || e.Detail.Code != c.code || e.Detail.Message != c.msg {
			t.Errorf("%d %q: %+v", c.status, c.body, e)
		}
	}
}

// FuzzRecordJSON: any JSON that decodes into a Record re-encodes with AppendRecordJSON to
// valid JSON that decodes to the same value bytes (byte for byte: the value text goes in
// verbatim), key bytes, tombstone state and headers; Bytes and KeyBytes never panic.
func FuzzRecordJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"value":{"a":1},"key":"k"}`, `{"value_base64":"","key_base64":""}`,
		`{"value":null}`, `{"value":"<&>","headers":{"h":"v"},"offset":3,"partition":1,"timestamp":5}`,
		`{"value":1,"value_base64":"AA=="}`, `{"key_base64":"/w==","value_base64":"AAE="}`,
		`{"value": [1, {"b" : "\u2028"}]  }`,
		`{"headers":[{"key":"k","value":"v"},{"key":"k","value_base64":"AA=="},{"key":"n","value":null},{"key_base64":"/w=="}]}`,
		`{"headers":{"b":"1","a":null,"b":"2"}}`, `{"headers":[{"key":"k","value":"v","value_base64":"AA=="}]}`,
		`{"headers":[{"value":"v"}]}`, `{"headers":[{"key":"k","bogus":1}]}`, `{"headers":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Record
		if json.Unmarshal(data, &r) != nil {
			return
		}
		v1, verr := r.Bytes()
		k1, kerr := r.KeyBytes()
		out, err := AppendRecordJSON(nil, r)
		if err != nil {
			t.Fatalf("re-encode %q: %v", data, err)
		}
		var r2 Record
		if err := json.Unmarshal(out, &r2); err != nil {
			t.Fatalf("decode of re-encoded %q: %v", out, err)
		}
		v2, verr2 := r2.Bytes()
		k2, kerr2 := r2.KeyBytes()
		if (verr == nil) != (verr2 == nil) || (kerr == nil) != (kerr2 == nil) {
			t.Fatalf("errors changed: %v/%v, %v/%v", verr, verr2, kerr, kerr2)
		}
		if verr == nil && (!bytes.Equal(v1, v2) || (v1 == nil) != (v2 == nil) || r.IsTombstone() != r2.IsTombstone()) {
			t.Fatalf("value %q became %q", v1, v2)
		}
		if kerr == nil && (!bytes.Equal(k1, k2) || (k1 == nil) != (k2 == nil)) {
			t.Fatalf("key %q became %q", k1, k2)
		}
		if !r.Headers.Equal(r2.Headers) {
			t.Fatalf("headers %v became %v", r.Headers, r2.Headers)
		}
	})
}

// FuzzParseAPIError: any error answer becomes an APIError with the status kept, and a
// message that is valid UTF-8 and, when the body is not the error JSON, at most 200 bytes.
func FuzzParseAPIError(f *testing.F) {
	f.Add(404, []byte(`{"error":{"code":"stream_not_found","message":"no"}}`))
	f.Add(502, []byte("<html>\nbad gateway</html>"))
	f.Add(500, []byte("\xff\xfe"))
	f.Add(500, bytes.Repeat([]byte("\xffa"), 150))
	f.Add(416, []byte(`{"error":{"code":"offset_out_of_range","log_start":1,"high_watermark":2}}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := parseAPIError(status, body)
		if e.Status != status || (!json.Valid(body) && !utf8.ValidString(e.Detail.Message)) {
			t.Fatalf("%d %q: %+v", status, body, e)
		}
		if len(e.Detail.Message) > 200 && !json.Valid(body) {
			t.Fatalf("%d %q: message of %d bytes", status, body, len(e.Detail.Message))
		}
		_ = e.Error()
	})
}
