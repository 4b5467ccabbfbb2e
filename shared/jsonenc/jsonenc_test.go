package jsonenc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// want is what encoding/json writes for s without HTML escaping.
func want(t testing.TB, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// same reports whether two JSON strings decode to the same value (encoding/json writes \b
// and \f short, AppendString as \u0008 and \u000c).
func same(t testing.TB, a, b []byte) bool {
	var x, y string
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return x == y
}

func TestAppendStringAsEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "\n\r\t\x00\x1f\x7f", "<html>&", "é日本\U0001F600",
		"bad \xff utf8 \xc3", "\u2028\u2029", "mixed \"\xfe\u2028x"} {
		got := AppendString([]byte("pre"), s)
		if !bytes.Equal(got, append([]byte("pre"), want(t, s)...)) {
			t.Errorf("%q: got %s, want %s", s, got[3:], want(t, s))
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("plain")
	f.Add("\x00\"\\\xff\u2028")
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
		if !json.Valid(got) {
			t.Fatalf("%q: %s is not valid JSON", s, got)
		}
		if w := want(t, s); !same(t, got, w) {
			t.Fatalf("%q: got %s, encoding/json %s: they decode differently", s, got, w)
		}
	})
}
