package arrowenc

import (
	"bytes"
	"encoding/json"
	"testing"
)

var jsonScanSeeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":1,"a":2}`, `{"a" : "x" , "b":[1,{"c":"]"}],"d":{"e":null}}`,
	`{"\u00e9":true,"k\"q":false,"x":-1.5e+3}`, "{\"a\":\"\xff\"}", "{\"\xff\":1}", `{"a":"\\"}`,
	`{"a":"tab\there"}`, `{"a":[],"b":{},"c":""}`, `{"a":1}x`, `[1]`, `{"a":}`,
}

// FuzzSplitObject: on every valid JSON object splitObject answers what json.Unmarshal
// into a map of raw messages answers, and jsonString what json.Unmarshal into a string
// answers whenever it answers at all.
func FuzzSplitObject(f *testing.F) {
	for _, s := range jsonScanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, ok := jsonString(b); ok {
			var want string
			if err := json.Unmarshal(b, &want); err != nil || want != s {
				t.Fatalf("jsonString(%q) = %q; json.Unmarshal: %q %v", b, s, want, err)
			}
		}
		raw := bytes.TrimSpace(b)
		if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
			return
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("json.Valid but json.Unmarshal: %v", err)
		}
		got, err := splitObject(raw)
		if err != nil {
			t.Fatalf("splitObject(%q): %v", raw, err)
		}
		if len(got) != len(want) {
			t.Fatalf("splitObject(%q): %d members, json.Unmarshal %d", raw, len(got), len(want))
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
				t.Fatalf("splitObject(%q)[%q] = %q, json.Unmarshal %q", raw, k, g, v)
			}
		}
	})
}

func TestStrictObjectErrors(t *testing.T) {
	for _, s := range []string{`{"a":}`, `{"a":1}x`, `{"a":1`, `[1]`, ``} {
		var obj map[string]json.RawMessage
		if err := strictObject(json.RawMessage(s), &obj); err == nil {
			t.Errorf("strictObject(%q): no error", s)
		}
	}
}
