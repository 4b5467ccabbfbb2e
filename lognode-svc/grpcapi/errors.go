package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// This file is the one place where failures become gRPC statuses; it mirrors the HTTP
// API's table (lognode-svc/httpapi/errors.go) code for code. Every status carries a
// google.rpc.ErrorInfo (domain ErrorDomain) whose reason is the HTTP API's error code and
// whose metadata says "retriable" and, for writes, "may_have_happened"; a retriable
// status also carries a google.rpc.RetryInfo.
//
//	failure                                          gRPC code           reason                retriable
//	client mistake (*inputError)                     its own (mostly     its own               no
//	                                                 INVALID_ARGUMENT)
//	node over its admission limits (*overloadError)  RESOURCE_EXHAUSTED  overloaded            yes
//	namespace over its ingest quota                  RESOURCE_EXHAUSTED  quota_exceeded        yes (RetryInfo: its delay)
//	namespace key unavailable (envelope)             FAILED_PRECONDITION key_unavailable       no
//	offset outside the log (*reader.ErrOutOfRange)   OUT_OF_RANGE        offset_out_of_range   no
//	meta namespace/stream/partition not found        NOT_FOUND           *_not_found           no
//	meta stream exists                               ALREADY_EXISTS      stream_exists         no
//	meta invalid argument                            INVALID_ARGUMENT    invalid_argument      no
//	sequencer unreachable, not leader, writer closed UNAVAILABLE         unavailable           yes
//	deadline exceeded / canceled                     DEADLINE_EXCEEDED / CANCELED              yes
//	anything else                                    INTERNAL            internal              no
//
// A write (the error of writer.Write, wrapped in *writeFailure):
//
//	writer.ErrCommitUnknown                          UNAVAILABLE  commit_unknown  yes, may_have_happened=true
//	writer.ErrCommitFailed + stream/partition gone   NOT_FOUND    *_not_found     no,  may_have_happened=false
//	meta.ErrOutOfOrderSequence / ErrProducerFenced /  FAILED_PRECONDITION  out_of_order_sequence /
//	  ErrUnknownProducer (idempotent producers)       producer_fenced / unknown_producer  no, may_have_happened=false
//	writer.ErrInvalidRequest                         INVALID_ARGUMENT  invalid_argument  no, may_have_happened=false
//	writer.ErrCommitFailed                           UNAVAILABLE  commit_failed   yes, may_have_happened=false
//	writer.ErrClosed (refused before buffering)      UNAVAILABLE  unavailable     yes, may_have_happened=false
//	anything else (meta.ErrUnavailable, deadline, …) UNAVAILABLE  commit_unknown  yes, may_have_happened=true

// ErrorDomain is the domain of every ErrorInfo this API answers.
const ErrorDomain = "loam.v1"

// writeFailure carries the error of a writer.Write call: its outcome decides the answer.
type writeFailure struct{ err error }

func (e *writeFailure) Error() string { return e.err.Error() }
func (e *writeFailure) Unwrap() error { return e.err }

// overloadError refuses a call at admission: the node is over one of its limits.
type overloadError struct{ msg string }

func (e *overloadError) Error() string { return e.msg }

// inputError is a client mistake: its gRPC code and error code (ErrorInfo.reason).
type inputError struct {
	code   codes.Code
	reason string
	msg    string
}

func (e *inputError) Error() string { return e.msg }

// badInput is an INVALID_ARGUMENT mistake.
func badInput(reason, format string, args ...any) *inputError {
	return &inputError{code: codes.InvalidArgument, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// answer is what one failure answers.
type answer struct {
	code      codes.Code
	reason    string
	retriable bool
	// mayHaveHappened is set for writes only: nil for other calls.
	mayHaveHappened *bool
	msg             string
	meta            map[string]string
	retryAfter      time.Duration // RetryInfo's delay when set (else retryDelay)
}

var (
	yes = func() *bool { b := true; return &b }()
	no  = func() *bool { b := false; return &b }()
)

// errorAnswer maps err to its answer; the message is err's text unless said otherwise.
func errorAnswer(err error) answer {
	var (
		we  *writeFailure
		in  *inputError
		ov  *overloadError
		oor *reader.ErrOutOfRange
	)
	var a answer
	switch {
	case errors.As(err, &we):
		a = writeOutcome(we.err)
	case errors.As(err, &in):
		a = answer{code: in.code, reason: in.reason}
	case errors.As(err, &ov):
		a = answer{code: codes.ResourceExhausted, reason: streamapi.CodeOverloaded, retriable: true}
	case errors.As(err, &oor):
		a = answer{code: codes.OutOfRange, reason: streamapi.CodeOffsetOutOfRange, meta: map[string]string{
			"log_start": strconv.FormatInt(oor.LogStart, 10), "high_watermark": strconv.FormatInt(oor.HighWatermark, 10)}}
	default:
		var ok bool
		if a, ok = notFound(err); ok {
			break
		}
		if a, ok = quotaAnswer(err); ok {
			break
		}
		if a, ok = keyAnswer(err); ok { // nskeys.go
			break
		}
		if a, ok = producerRefusal(err); ok {
			a.mayHaveHappened = nil // not a write: InitProducer
			break
		}
		switch {
		case errors.Is(err, meta.ErrStreamExists):
			a = answer{code: codes.AlreadyExists, reason: streamapi.CodeStreamExists}
		case errors.Is(err, meta.ErrInvalidArgument):
			a = answer{code: codes.InvalidArgument, reason: streamapi.CodeInvalidArgument}
		case errors.Is(err, context.DeadlineExceeded):
			a = answer{code: codes.DeadlineExceeded, reason: streamapi.CodeUnavailable, retriable: true}
		case errors.Is(err, context.Canceled):
			a = answer{code: codes.Canceled, reason: streamapi.CodeUnavailable, retriable: true}
		case errors.Is(err, meta.ErrUnavailable), errors.Is(err, meta.ErrNotLeader), errors.Is(err, writer.ErrClosed):
			a = answer{code: codes.Unavailable, reason: streamapi.CodeUnavailable, retriable: true}
		default:
			a = answer{code: codes.Internal, reason: streamapi.CodeInternal}
		}
	}
	if a.msg == "" {
		a.msg = err.Error()
	}
	return a
}

// writeOutcome maps the error of one write. Only a refusal the writer calls definite
// (ErrCommitFailed, or ErrClosed before anything was buffered) answers a definite code;
// every other failure may have committed and answers commit_unknown, whatever it wraps.
func writeOutcome(err error) answer {
	if a, ok := producerRefusal(err); ok {
		return a
	}
	switch {
	case errors.Is(err, writer.ErrCommitUnknown):
		return answer{code: codes.Unavailable, reason: streamapi.CodeCommitUnknown, retriable: true, mayHaveHappened: yes}
	case errors.Is(err, writer.ErrCommitFailed):
		if a, ok := notFound(err); ok {
			a.mayHaveHappened = no
			return a
		}
		if a, ok := keyAnswer(err); ok { // nskeys.go
			a.mayHaveHappened = no
			return a
		}
		return answer{code: codes.Unavailable, reason: streamapi.CodeCommitFailed, retriable: true, mayHaveHappened: no}
	case errors.Is(err, writer.ErrClosed):
		return answer{code: codes.Unavailable, reason: streamapi.CodeUnavailable, retriable: true, mayHaveHappened: no}
	default:
		return answer{code: codes.Unavailable, reason: streamapi.CodeCommitUnknown, retriable: true, mayHaveHappened: yes}
	}
}

// notFound maps the sequencer's not-found errors.
func notFound(err error) (answer, bool) {
	switch {
	case errors.Is(err, meta.ErrNamespaceNotFound):
		return answer{code: codes.NotFound, reason: streamapi.CodeNamespaceNotFound}, true
	case errors.Is(err, meta.ErrStreamNotFound):
		return answer{code: codes.NotFound, reason: streamapi.CodeStreamNotFound}, true
	case errors.Is(err, meta.ErrPartitionNotFound):
		return answer{code: codes.NotFound, reason: streamapi.CodePartitionNotFound}, true
	}
	return answer{}, false
}

// retryDelay is what RetryInfo suggests for a retriable failure.
const retryDelay = time.Second

// statusOf is err's gRPC status with its ErrorInfo (and RetryInfo when retriable).
func statusOf(err error) *status.Status {
	if st, ok := status.FromError(err); ok && err != nil {
		return st // already a status (a gRPC library error)
	}
	return answerStatus(errorAnswer(err))
}

func answerStatus(a answer) *status.Status {
	md := map[string]string{"retriable": strconv.FormatBool(a.retriable)}
	if a.mayHaveHappened != nil {
		md["may_have_happened"] = strconv.FormatBool(*a.mayHaveHappened)
	}
	for k, v := range a.meta {
		md[k] = v
	}
	st := status.New(a.code, a.msg)
	info := &errdetails.ErrorInfo{Reason: a.reason, Domain: ErrorDomain, Metadata: md}
	var withDetails *status.Status
	var derr error
	if a.retriable {
		delay := retryDelay
		if a.retryAfter > 0 {
			delay = a.retryAfter
		}
		withDetails, derr = st.WithDetails(info, &errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
	} else {
		withDetails, derr = st.WithDetails(info)
	}
	if derr != nil {
		return st
	}
	return withDetails
}

// errorOf is the per-part Error of a produce answer.
func errorOf(a answer) *loamv1pb.Error {
	return &loamv1pb.Error{Code: a.reason, Message: a.msg, Retriable: a.retriable}
}
