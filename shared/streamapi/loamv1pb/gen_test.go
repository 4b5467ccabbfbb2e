package loamv1pb_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
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
		"loam/v1/types.proto":                  loamv1pb.File_loam_v1_types_proto,
		"loam/v1/stream_service.proto":         loamv1pb.File_loam_v1_stream_service_proto,
		"loam/v1/record_service.proto":         loamv1pb.File_loam_v1_record_service_proto,
		"loam/v1/auth_service.proto":           loamv1pb.File_loam_v1_auth_service_proto,
		"loam/v1/consumer_service.proto":       loamv1pb.File_loam_v1_consumer_service_proto,
		"loam/v1/quota_service.proto":          loamv1pb.File_loam_v1_quota_service_proto,
		"loam/v1/producer_service.proto":       loamv1pb.File_loam_v1_producer_service_proto,
		"loam/v1/cloudevent_service.proto":     loamv1pb.File_loam_v1_cloudevent_service_proto,
		"loam/v1/consumer_admin_service.proto": loamv1pb.File_loam_v1_consumer_admin_service_proto,
		"loam/v1/namespace_key_service.proto":  loamv1pb.File_loam_v1_namespace_key_service_proto,
	}
	protos, err := filepath.Glob("loam/v1/*.proto")
	if err != nil {
		t.Fatal(err)
	}
	if len(protos) != len(embedded) {
		t.Fatalf("loam/v1 holds %d .proto files %v, the generated code %d: add the new file to gen.sh and to this test", len(protos), protos, len(embedded))
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: func(path string) (io.ReadCloser, error) { return os.Open(path) }}),
		SourceInfoMode: protocompile.SourceInfoStandard}
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
		checkComments(t, f)
	}
}

// checkComments fails when a comment of the .proto (the API's documentation) is missing
// from the generated Go code, which carries every leading comment: the .proto's comments
// changed without running gen.sh.
func checkComments(t *testing.T, f protoreflect.FileDescriptor) {
	base := strings.TrimSuffix(filepath.Base(f.Path()), ".proto")
	var src strings.Builder
	for _, name := range []string{base + ".pb.go", base + "_grpc.pb.go"} {
		if b, err := os.ReadFile(name); err == nil {
			src.Write(b)
		}
	}
	gen := src.String()
	locs := f.SourceLocations()
	var visit func(d protoreflect.Descriptor)
	visit = func(d protoreflect.Descriptor) {
		for _, line := range strings.Split(locs.ByDescriptor(d).LeadingComments, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.Contains(gen, line) {
				t.Errorf("%s: the comment of %s (%q) is not in the generated code: run gen.sh", f.Path(), d.FullName(), line)
				return
			}
		}
	}
	var message func(m protoreflect.MessageDescriptor)
	message = func(m protoreflect.MessageDescriptor) {
		visit(m)
		for i := range m.Fields().Len() {
			visit(m.Fields().Get(i))
		}
		for i := range m.Messages().Len() {
			message(m.Messages().Get(i))
		}
	}
	for i := range f.Messages().Len() {
		message(f.Messages().Get(i))
	}
	for i := range f.Enums().Len() {
		e := f.Enums().Get(i)
		visit(e)
		for j := range e.Values().Len() {
			visit(e.Values().Get(j))
		}
	}
	for i := range f.Services().Len() {
		s := f.Services().Get(i)
		visit(s)
		for j := range s.Methods().Len() {
			visit(s.Methods().Get(j))
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
