package metagrpc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestStatusRoundTrip(t *testing.T) {
	for _, r := range reasons {
		in := fmt.Errorf("create stream default/x: %w", r.err)
		st := Status(in)
		if got := status.Code(st); got != r.code {
			t.Errorf("%v: code %v, want %v", r.err, got, r.code)
		}
		out := FromStatus(st)
		if !errors.Is(out, r.err) {
			t.Errorf("%v: round trip gave %v", r.err, out)
		}
		for _, other := range reasons {
			if other.err != r.err && errors.Is(out, other.err) {
				t.Errorf("%v: also matches %v", r.err, other.err)
			}
		}
		if r.err != meta.ErrNotLeader && out.Error() != in.Error() {
			t.Errorf("message %q, want %q", out.Error(), in.Error())
		}
	}
	// The leader hint survives.
	out := FromStatus(Status(fmt.Errorf("propose: %w", &meta.NotLeaderError{Leader: "10.0.0.1:7070"})))
	var nl *meta.NotLeaderError
	if !errors.As(out, &nl) || nl.Leader != "10.0.0.1:7070" || !errors.Is(out, meta.ErrNotLeader) {
		t.Fatalf("not leader: %v", out)
	}
	// Transport failures are ErrUnavailable (outcome unknown).
	for code, ctxErr := range map[codes.Code]error{codes.Unavailable: nil, codes.DeadlineExceeded: context.DeadlineExceeded, codes.Canceled: context.Canceled} {
		out := FromStatus(status.Error(code, "connection refused"))
		if !errors.Is(out, meta.ErrUnavailable) || (ctxErr != nil && !errors.Is(out, ctxErr)) {
			t.Errorf("%v: %v", code, out)
		}
	}
	if got := status.Code(Status(errors.New("boom"))); got != codes.Internal {
		t.Fatalf("unknown error: %v", got)
	}
	if Status(nil) != nil || FromStatus(nil) != nil {
		t.Fatal("nil")
	}
}
