package grpcapi_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestStreamKeyAttribute: key_attribute is set by CreateStream, answered by GetStream,
// replaced and cleared by UpdateStream; a value over 255 bytes is INVALID_ARGUMENT.
func TestStreamKeyAttribute(t *testing.T) {
	e := start(t, httpapi.Limits{})
	c := ctx(t)
	cr, err := e.streams.CreateStream(c, &loamv1pb.CreateStreamRequest{Namespace: "default", Name: "logs", KeyAttribute: "service.name"})
	if err != nil || cr.GetStream().GetKeyAttribute() != "service.name" {
		t.Fatalf("create: %v %v", cr, err)
	}
	get := func() string {
		t.Helper()
		g, err := e.streams.GetStream(c, &loamv1pb.GetStreamRequest{Namespace: "default", Name: "logs"})
		if err != nil {
			t.Fatal(err)
		}
		return g.GetStream().GetKeyAttribute()
	}
	if a := get(); a != "service.name" {
		t.Fatalf("get: %q", a)
	}
	long := strings.Repeat("k", 256)
	if _, err := e.streams.UpdateStream(c, &loamv1pb.UpdateStreamRequest{Namespace: "default", Name: "logs", KeyAttribute: &long}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("update with 256 bytes: %v, want InvalidArgument", err)
	}
	if _, err := e.streams.CreateStream(c, &loamv1pb.CreateStreamRequest{Namespace: "default", Name: "bad", KeyAttribute: long}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("create with 256 bytes: %v, want InvalidArgument", err)
	}
	for _, v := range []string{"host.name", ""} {
		up, err := e.streams.UpdateStream(c, &loamv1pb.UpdateStreamRequest{Namespace: "default", Name: "logs", KeyAttribute: ptr(v)})
		if err != nil || up.GetStream().GetKeyAttribute() != v || get() != v {
			t.Fatalf("update to %q: %v %v", v, up, err)
		}
	}
}
