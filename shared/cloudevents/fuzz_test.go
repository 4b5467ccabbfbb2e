package cloudevents

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/loamhq/loam/shared/recordbatch"
)

// FuzzDecodeJSON: any input decodes to a valid event or an error; a decoded event
// encodes to JSON that decodes to the same encoding, and survives the record layout.
func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data_base64":"AA=="}`))
	f.Add([]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"text/plain","data":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeJSON(b)
		if err != nil {
			return
		}
		if e.Validate() != nil {
			t.Fatal("decoded an invalid event")
		}
		enc := AppendJSON(nil, e)
		e2, err := DecodeJSON(enc)
		if err != nil {
			t.Fatalf("re-decode %s: %v", enc, err)
		}
		if enc2 := AppendJSON(nil, e2); !bytes.Equal(enc, enc2) {
			t.Fatalf("not stable:\n%s\n%s", enc, enc2)
		}
		s := FromRecord(Record(e), Origin{})
		if s.Form != FormHeaders || !bytes.Equal(AppendStoredJSON(nil, s), enc) {
			t.Fatalf("record round trip of %s: %s", enc, AppendStoredJSON(nil, s))
		}
		if _, err := DecodeProto(AppendProto(nil, e)); err != nil {
			t.Fatalf("proto of %s: %v", enc, err)
		}
	})
}

func FuzzDecodeBatchJSON(f *testing.F) {
	f.Add([]byte(`[` + sample + `,{"specversion":"1.0","id":"2","source":"/s","type":"t"}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := DecodeBatchJSON(b)
		if err != nil {
			return
		}
		if _, err := DecodeBatchJSON(AppendBatchJSON(nil, es)); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDecodeProto: any input decodes or errors; a decoded event re-encodes to bytes that
// decode to the same encoding.
func FuzzDecodeProto(f *testing.F) {
	e, _ := DecodeJSON([]byte(sample))
	f.Add(AppendProto(nil, e))
	f.Add(AppendBatchProto(nil, []*Event{e}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if es, err := DecodeBatchProto(b); err == nil {
			_ = AppendBatchProto(nil, es)
		}
		e, err := DecodeProto(b)
		if err != nil {
			return
		}
		enc := AppendProto(nil, e)
		e2, err := DecodeProto(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if enc2 := AppendProto(nil, e2); !bytes.Equal(enc, enc2) {
			t.Fatalf("not stable")
		}
	})
}

// FuzzDecodeBinary: headers from the input's lines ("name: value"), the rest the body.
func FuzzDecodeBinary(f *testing.F) {
	f.Add([]byte("ce-specversion: 1.0\nce-id: 1\nce-source: /s\nce-type: t\ncontent-type: text/plain\n\nbody"))
	f.Add([]byte("ce-specversion: 1.0\nce-id: a%20b\nce-source: %zz\nce-type: t\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		head, body, _ := bytes.Cut(b, []byte("\n\n"))
		h := http.Header{}
		for _, l := range bytes.Split(head, []byte("\n")) {
			k, v, ok := bytes.Cut(l, []byte(": "))
			if ok {
				h.Add(string(k), string(v))
			}
		}
		e, err := DecodeBinary(h, body)
		if err != nil {
			return
		}
		out := http.Header{}
		data := SetBinary(out, e)
		e2, err := DecodeBinary(out, data)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !bytes.Equal(AppendJSON(nil, e), AppendJSON(nil, e2)) {
			t.Fatalf("binary round trip:\n%s\n%s", AppendJSON(nil, e), AppendJSON(nil, e2))
		}
	})
}

// FuzzFromRecord: any record reads back as a valid event.
func FuzzFromRecord(f *testing.F) {
	e, _ := DecodeJSON([]byte(sample))
	r := Record(e)
	f.Add(r.Key, r.Value, "ce_id", "1", "loam_ce_types", "count=integer")
	f.Add([]byte(nil), []byte(`{"a":1}`), "content-type", "application/cloudevents+json", "x", "y")
	f.Fuzz(func(t *testing.T, key, value []byte, h1, v1, h2, v2 string) {
		rec := recordbatch.Record{Key: key, Value: value, Headers: append(append([]recordbatch.Header{}, r.Headers...),
			recordbatch.Header{Key: h1, Value: []byte(v1)}, recordbatch.Header{Key: h2, Value: []byte(v2)})}
		for _, rc := range []recordbatch.Record{rec, {Key: key, Value: value, Headers: rec.Headers[len(rec.Headers)-2:]}} {
			s := FromRecord(rc, Origin{StreamID: 1, Namespace: "n", Stream: "s"})
			if err := s.Event.Validate(); err != nil {
				t.Fatalf("form %d: %v", s.Form, err)
			}
			if _, err := DecodeJSON(AppendJSON(nil, s.Event)); err != nil {
				t.Fatalf("form %d JSON %s: %v", s.Form, AppendJSON(nil, s.Event), err)
			}
		}
	})
}
