package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

const (
	schemaV1 = `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"name","type":"utf8","nullable":true}],"key":"id"}`
	schemaV2 = `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"name","type":"utf8","nullable":true},{"name":"age","type":"int32","nullable":true}],"key":"id"}`
)

func TestArrowStreamSchemas(t *testing.T) {
	h := newHarness(t)
	r := h.apply(t0, CreateArrowStream(meta.StreamConfig{Namespace: "default", Name: "orders", Partitions: 3}, []byte(schemaV1)))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Stream.Encoding != meta.EncodingArrow || r.Stream.Partitions != 3 || r.Schema.Version != 1 || r.Schema.StreamID != r.Stream.ID {
		t.Fatalf("created %+v schema %+v", r.Stream, r.Schema)
	}
	s, _, err := h.f.GetStream("default", "orders")
	if err != nil || s.Encoding != meta.EncodingArrow {
		t.Fatalf("GetStream: %+v %v", s, err)
	}
	id := r.Stream.ID
	if got := h.apply(t0, CreateArrowStream(meta.StreamConfig{Name: "orders", Partitions: 1}, []byte(schemaV1))); !errors.Is(got.Err, meta.ErrStreamExists) {
		t.Fatalf("second create: %v", got.Err)
	}
	// A bad schema creates nothing.
	if got := h.apply(t0, CreateArrowStream(meta.StreamConfig{Name: "bad", Partitions: 1}, []byte(`{"fields":[{"name":"a","type":"int65"}]}`))); !errors.Is(got.Err, meta.ErrInvalidArgument) || !strings.Contains(got.Err.Error(), `unknown type "int65"`) {
		t.Fatalf("bad schema: %v", got.Err)
	}
	if _, _, err := h.f.GetStream("default", "bad"); !errors.Is(err, meta.ErrStreamNotFound) {
		t.Fatalf("a refused create made a stream: %v", err)
	}
	if got := h.apply(t0, CreateArrowStream(meta.StreamConfig{Name: "c", Partitions: 1, CleanupPolicy: meta.CleanupCompact}, []byte(schemaV1))); !errors.Is(got.Err, meta.ErrInvalidArgument) || !strings.Contains(got.Err.Error(), "compact is not supported for arrow streams") {
		t.Fatalf("compacted arrow stream: %v", got.Err)
	}
	compact := meta.CleanupCompact
	if got := h.apply(t0, UpdateStream("default", "orders", meta.StreamPatch{CleanupPolicy: &compact})); !errors.Is(got.Err, meta.ErrInvalidArgument) || !strings.Contains(got.Err.Error(), "compact is not supported for arrow streams") {
		t.Fatalf("patch to compact: %v", got.Err)
	}
	// Plain CreateStream still refuses arrow: an arrow stream needs its schema.
	if got := h.apply(t0, CreateStream(meta.StreamConfig{Name: "x", Partitions: 1, Encoding: meta.EncodingArrow})); !errors.Is(got.Err, meta.ErrInvalidArgument) {
		t.Fatalf("CreateStream arrow: %v", got.Err)
	}

	// Evolution: adding a nullable column is version 2; a stale expectation, a breaking
	// change and a kafka stream are refused.
	put := func(schema string, expect uint32) *Result {
		return h.apply(t0+10, PutSchema(meta.PutSchema{Namespace: "default", Stream: "orders", Schema: []byte(schema), ExpectVersion: expect}))
	}
	if got := put(schemaV2, 1); got.Err != nil || got.Schema.Version != 2 || got.Schema.CreatedMs != t0+10 {
		t.Fatalf("put v2: %+v %v", got.Schema, got.Err)
	}
	if got := put(schemaV2, 1); !errors.Is(got.Err, meta.ErrInvalidArgument) || !strings.Contains(got.Err.Error(), "latest schema version is 2, not 1") {
		t.Fatalf("stale put: %v", got.Err)
	}
	breaking := strings.Replace(schemaV2, `"age","type":"int32"`, `"age","type":"int64"`, 1)
	if got := put(breaking, 2); !errors.Is(got.Err, meta.ErrInvalidArgument) || !strings.Contains(got.Err.Error(), `column "age" changed type`) {
		t.Fatalf("breaking put: %v", got.Err)
	}
	h.stream("plain", 1)
	if got := h.apply(t0, PutSchema(meta.PutSchema{Namespace: "default", Stream: "plain", Schema: []byte(schemaV1)})); !errors.Is(got.Err, meta.ErrInvalidArgument) || !strings.Contains(got.Err.Error(), "not arrow") {
		t.Fatalf("put on kafka stream: %v", got.Err)
	}

	for v, want := range map[uint32]string{0: schemaV2, 1: schemaV1, 2: schemaV2} {
		got, err := h.f.GetSchema(id, v)
		if err != nil || got.Version != map[uint32]uint32{0: 2, 1: 1, 2: 2}[v] {
			t.Fatalf("GetSchema(%d): %+v %v", v, got, err)
		}
		if !bytes.Contains(got.Schema, []byte(`"age"`)) != !strings.Contains(want, `"age"`) {
			t.Fatalf("GetSchema(%d) = %s", v, got.Schema)
		}
	}
	if _, err := h.f.GetSchema(id, 3); !errors.Is(err, meta.ErrSchemaNotFound) {
		t.Fatalf("GetSchema(3): %v", err)
	}
	if _, err := h.f.GetSchema(id+100, 0); !errors.Is(err, meta.ErrSchemaNotFound) {
		t.Fatalf("GetSchema of another stream: %v", err)
	}

	// Deleting the stream deletes its schemas.
	if got := h.apply(t0, DeleteStream("default", "orders")); got.Err != nil {
		t.Fatal(got.Err)
	}
	if _, err := h.f.GetSchema(id, 0); !errors.Is(err, meta.ErrSchemaNotFound) {
		t.Fatalf("schema after delete: %v", err)
	}
}

// Golden files of schema commands and state (testdata/v4/), never regenerated.
func TestGoldenSchemas(t *testing.T) {
	create := CreateArrowStream(meta.StreamConfig{Namespace: "default", Name: "orders", Partitions: 2, RetentionMs: 3600000}, []byte(schemaV1))
	create.StampMs = t0 + 5
	put := PutSchema(meta.PutSchema{Namespace: "default", Stream: "orders", Schema: []byte(schemaV2), ExpectVersion: 1})
	put.StampMs = t0 + 6
	for _, c := range []struct {
		path string
		cmd  *metapb.Command
	}{{"testdata/v4/create_arrow_stream.cmd", create}, {"testdata/v4/put_schema.cmd", put}} {
		b := golden(t, c.path, func() []byte { b, _ := Encode(c.cmd); return b })
		got, err := Decode(b)
		if err != nil || got.String() != c.cmd.String() {
			t.Fatalf("%s: %v: %v", c.path, err, got)
		}
	}
	golden(t, "testdata/v4/schema_state.snap", func() []byte {
		h := newHarness(t)
		h.apply(t0, create)
		h.apply(t0, put)
		var buf bytes.Buffer
		snap, err := h.f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Release()
		if err := snap.Persist(&memSink{Buffer: &buf}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	})
	f := restoreGolden(t, "testdata/v4/schema_state.snap")
	s, _, err := f.GetStream("default", "orders")
	if err != nil || s.Encoding != meta.EncodingArrow {
		t.Fatalf("restored stream: %+v %v", s, err)
	}
	got, err := f.GetSchema(s.ID, 0)
	if err != nil || got.Version != 2 || !bytes.Contains(got.Schema, []byte(`"age"`)) {
		t.Fatalf("restored schema: %+v %v", got, err)
	}
}
