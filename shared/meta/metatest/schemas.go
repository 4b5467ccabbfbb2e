package metatest

import (
	"errors"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

// testSchemas: an arrow stream is created with schema version 1; a put names the latest
// version and must follow the evolution rules; gets read any version or the latest;
// refusals (bad schema, breaking change, stale version, a kafka stream, compaction,
// unknown stream or version) carry their sentinels. Skipped for a client without
// schemas.
func testSchemas(t *testing.T, s *suite) {
	sc, ok := s.c.(meta.SchemaClient)
	if !ok {
		t.Skipf("%T is not a meta.SchemaClient", s.c)
	}
	const v1 = `{"fields":[{"name":"id","type":"int64","nullable":false}],"key":"id"}`
	const v2 = `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"n","type":"utf8","nullable":true}],"key":"id"}`
	s.n++
	name := "mt-schemas-" + s.prefix[len("wal/standard/"):len(s.prefix)-1]
	cfg := meta.StreamConfig{Namespace: meta.DefaultNS, Name: name, Partitions: 2, Class: meta.ClassStandard, RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete}
	st, first, err := sc.CreateArrowStream(s.ctx, cfg, []byte(v1))
	if err != nil || st.ID == 0 || st.Encoding != meta.EncodingArrow || first.Version != 1 || first.StreamID != st.ID {
		t.Fatalf("CreateArrowStream = %+v %+v, %v", st, first, err)
	}
	if _, _, err := sc.CreateArrowStream(s.ctx, cfg, []byte(v1)); !errors.Is(err, meta.ErrStreamExists) {
		t.Fatalf("a second create: %v", err)
	}
	bad := cfg
	bad.Name += "-bad"
	if _, _, err := sc.CreateArrowStream(s.ctx, bad, []byte(`{"fields":[{"name":"a","type":"int9"}]}`)); !errors.Is(err, meta.ErrInvalidArgument) || !strings.Contains(err.Error(), "int9") {
		t.Fatalf("create with a bad schema: %v", err)
	}
	bad.CleanupPolicy = meta.CleanupCompact
	if _, _, err := sc.CreateArrowStream(s.ctx, bad, []byte(v1)); !errors.Is(err, meta.ErrInvalidArgument) || !strings.Contains(err.Error(), "compact is not supported for arrow streams") {
		t.Fatalf("create compacted: %v", err)
	}
	next, err := sc.PutSchema(s.ctx, meta.PutSchema{Namespace: meta.DefaultNS, Stream: name, Schema: []byte(v2), ExpectVersion: 1})
	if err != nil || next.Version != 2 || next.StreamID != st.ID {
		t.Fatalf("PutSchema v2 = %+v, %v", next, err)
	}
	for _, c := range []struct {
		what   string
		p      meta.PutSchema
		want   error
		naming string
	}{
		{"breaking", meta.PutSchema{Namespace: meta.DefaultNS, Stream: name, Schema: []byte(v1), ExpectVersion: 2}, meta.ErrInvalidArgument, `column "n" removed`},
		{"stale version", meta.PutSchema{Namespace: meta.DefaultNS, Stream: name, Schema: []byte(v2), ExpectVersion: 1}, meta.ErrInvalidArgument, "latest schema version is 2"},
		{"unknown stream", meta.PutSchema{Namespace: meta.DefaultNS, Stream: name + "-none", Schema: []byte(v2), ExpectVersion: 1}, meta.ErrStreamNotFound, ""},
	} {
		if _, err := sc.PutSchema(s.ctx, c.p); !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.naming) {
			t.Errorf("PutSchema %s: %v, want %v naming %q", c.what, err, c.want, c.naming)
		}
	}
	kafka := s.stream(t, 1)
	if _, err := sc.PutSchema(s.ctx, meta.PutSchema{Namespace: kafka.Namespace, Stream: kafka.Name, Schema: []byte(v1), ExpectVersion: 0}); !errors.Is(err, meta.ErrInvalidArgument) || !strings.Contains(err.Error(), "not arrow") {
		t.Errorf("PutSchema of a kafka stream: %v", err)
	}
	for v, want := range map[uint32]uint32{0: 2, 1: 1, 2: 2} {
		got, err := sc.GetSchema(s.ctx, st.ID, v)
		if err != nil || got.Version != want || got.StreamID != st.ID {
			t.Fatalf("GetSchema %d = %+v, %v", v, got, err)
		}
	}
	if got, _ := sc.GetSchema(s.ctx, st.ID, 0); !strings.Contains(string(got.Schema), `"n"`) {
		t.Fatalf("latest schema %s", got.Schema)
	}
	if _, err := sc.GetSchema(s.ctx, st.ID, 9); !errors.Is(err, meta.ErrSchemaNotFound) {
		t.Fatalf("GetSchema of a missing version: %v", err)
	}
	if _, err := sc.GetSchema(s.ctx, kafka.ID, 0); !errors.Is(err, meta.ErrSchemaNotFound) {
		t.Fatalf("GetSchema of a kafka stream: %v", err)
	}
}
