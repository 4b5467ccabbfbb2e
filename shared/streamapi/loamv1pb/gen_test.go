package loamv1pb_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestGeneratedCodeIsCurrent compiles the .proto files (no protoc needed) and compares
// each with the descriptor embedded in the committed generated code: a .proto changed
// without running gen.sh fails here.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	embedded := map[string]protoreflect.FileDescriptor{
		"loam/v1/types.proto":          loamv1pb.File_loam_v1_types_proto,
		"loam/v1/stream_service.proto": loamv1pb.File_loam_v1_stream_service_proto,
		"loam/v1/record_service.proto": loamv1pb.File_loam_v1_record_service_proto,
	}
	protos, err := filepath.Glob("loam/v1/*.proto")
	if err != nil {
		t.Fatal(err)
	}
	if len(protos) != len(embedded) {
		t.Fatalf("loam/v1 holds %d .proto files %v, the generated code %d: add the new file to gen.sh and to this test", len(protos), protos, len(embedded))
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: func(path string) (io.ReadCloser, error) { return os.Open(path) }})}
	files, err := c.Compile(context.Background(), protos...)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	for _, f := range files {
		want := normalize(protodesc.ToFileDescriptorProto(f))
		emb, ok := embedded[f.Path()]
		if !ok {
			t.Errorf("%s has no generated code: run gen.sh", f.Path())
			continue
		}
		got := normalize(protodesc.ToFileDescriptorProto(emb))
		if !proto.Equal(got, want) {
			t.Errorf("%s: the generated code is stale: run shared/streamapi/loamv1pb/gen.sh and commit the result", f.Path())
		}
	}
}

// normalize drops what protoc and protocompile fill in differently: source info and
// the derived json_name of fields.
func normalize(fd *descriptorpb.FileDescriptorProto) *descriptorpb.FileDescriptorProto {
	fd = proto.Clone(fd).(*descriptorpb.FileDescriptorProto)
	fd.SourceCodeInfo = nil
	var msgs func([]*descriptorpb.DescriptorProto)
	msgs = func(ms []*descriptorpb.DescriptorProto) {
		for _, m := range ms {
			for _, f := range m.Field {
				f.JsonName = nil
			}
			msgs(m.NestedType)
		}
	}
	msgs(fd.MessageType)
	return fd
}
