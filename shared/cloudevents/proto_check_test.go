package cloudevents

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// ceMessage compiles testdata/cloudevents.proto (the CloudEvents spec's file) and returns
// a dynamic message of name.
func ceMessage(t *testing.T, name protoreflect.FullName) *dynamicpb.Message {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: func(path string) (io.ReadCloser, error) { return os.Open("testdata/" + path) }})}
	files, err := c.Compile(context.Background(), "cloudevents.proto")
	if err != nil {
		t.Fatal(err)
	}
	d := files[0].Messages().ByName(name.Name())
	if d == nil {
		t.Fatalf("no message %s", name)
	}
	return dynamicpb.NewMessage(d)
}

// TestProtoMatchesSpec: the hand-written encoding is what a protobuf implementation of
// the CloudEvents .proto reads, and what it writes decodes to the same event.
func TestProtoMatchesSpec(t *testing.T) {
	e, err := DecodeJSON([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	m := ceMessage(t, "io.cloudevents.v1.CloudEvent")
	if err := proto.Unmarshal(AppendProto(nil, e), m); err != nil {
		t.Fatal(err)
	}
	fd := m.Descriptor().Fields()
	if got := m.Get(fd.ByName("id")).String(); got != "A234-1234-1234" {
		t.Fatalf("id %q", got)
	}
	attrs := m.Get(fd.ByName("attributes")).Map()
	val := func(name string) protoreflect.Message {
		return attrs.Get(protoreflect.ValueOfString(name).MapKey()).Message()
	}
	vd := val("count").Descriptor().Fields()
	if got := val("count").Get(vd.ByName("ce_integer")).Int(); got != 42 {
		t.Fatalf("count %d", got)
	}
	if !val("flag").Get(vd.ByName("ce_boolean")).Bool() {
		t.Fatal("flag")
	}
	ts := val("time").Get(vd.ByName("ce_timestamp")).Message()
	tf := ts.Descriptor().Fields()
	if s, n := ts.Get(tf.ByName("seconds")).Int(), ts.Get(tf.ByName("nanos")).Int(); s != 1796036400 || n != 500000000 {
		t.Fatalf("time %d %d", s, n)
	}
	if got := m.Get(fd.ByName("text_data")).String(); got != `{"n": [1, 2.50, "x"]}` {
		t.Fatalf("text_data %q", got)
	}
	// What the real implementation writes (map order is its own) decodes to the same
	// attributes.
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeProto(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range e.Attrs {
		v, ok := back.Get(a.Name)
		want := a.Value
		if a.Name == AttrTime {
			want = "2026-11-30T11:00:00.5Z"
		}
		if !ok || v != want {
			t.Errorf("%s: got %q, want %q", a.Name, v, want)
		}
	}
	if string(back.Data) != string(e.Data) {
		t.Fatalf("data %q", back.Data)
	}
}
