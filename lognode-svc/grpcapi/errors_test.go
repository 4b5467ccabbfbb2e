package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
)

// TestErrorTable pins every row of the table in errors.go: code, reason, retriable and,
// for writes, may_have_happened.
func TestErrorTable(t *testing.T) {
	for _, tc := range []struct {
		err       error
		code      codes.Code
		reason    string
		retriable bool
		happened  string // "" for calls that are not writes
	}{
		{badInput("invalid_record", "records[0]: bad"), codes.InvalidArgument, "invalid_record", false, ""},
		{&overloadError{"full"}, codes.ResourceExhausted, "overloaded", true, ""},
		{fmt.Errorf("fetch: %w", &reader.ErrOutOfRange{Offset: 9, LogStart: 1, HighWatermark: 5}), codes.OutOfRange, "offset_out_of_range", false, ""},
		{fmt.Errorf("get: %w", meta.ErrNamespaceNotFound), codes.NotFound, "namespace_not_found", false, ""},
		{fmt.Errorf("get: %w", meta.ErrStreamNotFound), codes.NotFound, "stream_not_found", false, ""},
		{fmt.Errorf("get: %w", meta.ErrPartitionNotFound), codes.NotFound, "partition_not_found", false, ""},
		{fmt.Errorf("create: %w", meta.ErrStreamExists), codes.AlreadyExists, "stream_exists", false, ""},
		{fmt.Errorf("create: %w", meta.ErrInvalidArgument), codes.InvalidArgument, "invalid_argument", false, ""},
		{fmt.Errorf("list: %w", meta.ErrUnavailable), codes.Unavailable, "unavailable", true, ""},
		{&meta.NotLeaderError{Leader: "x"}, codes.Unavailable, "unavailable", true, ""},
		{context.DeadlineExceeded, codes.DeadlineExceeded, "unavailable", true, ""},
		{errors.New("boom"), codes.Internal, "internal", false, ""},
		{&writeFailure{fmt.Errorf("%w: put timed out", writer.ErrCommitUnknown)}, codes.Unavailable, "commit_unknown", true, "true"},
		{&writeFailure{fmt.Errorf("%w: %w", writer.ErrCommitFailed, meta.ErrStreamNotFound)}, codes.NotFound, "stream_not_found", false, "false"},
		{&writeFailure{fmt.Errorf("%w: sequencer refused", writer.ErrCommitFailed)}, codes.Unavailable, "commit_failed", true, "false"},
		{&writeFailure{writer.ErrClosed}, codes.Unavailable, "unavailable", true, "false"},
		{&writeFailure{fmt.Errorf("commit: %w", meta.ErrUnavailable)}, codes.Unavailable, "commit_unknown", true, "true"},
		{&writeFailure{context.DeadlineExceeded}, codes.Unavailable, "commit_unknown", true, "true"},
	} {
		st := statusOf(tc.err)
		var info *errdetails.ErrorInfo
		var retry *errdetails.RetryInfo
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.ErrorInfo:
				info = d
			case *errdetails.RetryInfo:
				retry = d
			}
		}
		switch {
		case st.Code() != tc.code:
			t.Errorf("%v: code %v, want %v", tc.err, st.Code(), tc.code)
		case info == nil || info.Reason != tc.reason || info.Domain != ErrorDomain:
			t.Errorf("%v: ErrorInfo %v, want reason %q", tc.err, info, tc.reason)
		case info.Metadata["retriable"] != fmt.Sprint(tc.retriable) || (retry != nil) != tc.retriable:
			t.Errorf("%v: retriable %q, RetryInfo %v; want %v", tc.err, info.Metadata["retriable"], retry, tc.retriable)
		case info.Metadata["may_have_happened"] != tc.happened:
			t.Errorf("%v: may_have_happened %q, want %q", tc.err, info.Metadata["may_have_happened"], tc.happened)
		case st.Message() != tc.err.Error():
			t.Errorf("%v: message %q", tc.err, st.Message())
		}
	}
}

// TestAdmissionBudget: a produce's bytes are reserved from the budget until its call
// ends; one that does not fit is refused as overloaded; calls past MaxConcurrent are.
func TestAdmissionBudget(t *testing.T) {
	a := &admission{httpapi.NewAdmission(Limits{MaxConcurrent: 2, MaxInflightBodyBytes: 1000})}
	r1, err := a.admit()
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.reserve(800); err != nil {
		t.Fatal(err)
	}
	r2, err := a.admit()
	if err != nil {
		t.Fatal(err)
	}
	var ov *overloadError
	if err := r2.reserve(300); !errors.As(err, &ov) {
		t.Fatalf("reserve over the budget: %v", err)
	}
	if _, err := a.admit(); !errors.As(err, &ov) {
		t.Fatalf("a third call with MaxConcurrent 2: %v", err)
	}
	r1.release()
	r1.release() // idempotent
	if err := r2.reserve(300); err != nil {
		t.Fatal(err)
	}
	r2.release()
	if calls, bytes := a.held(); calls != 0 || bytes != 0 {
		t.Fatalf("after release: %d calls, %d bytes held", calls, bytes)
	}
}
