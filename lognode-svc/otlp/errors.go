package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/otlplogs"
)

// This file is the one place where failures become OTLP answers, for both transports, as
// the OTLP specification prescribes: a retryable failure is HTTP 429/503 with Retry-After
// or gRPC UNAVAILABLE / RESOURCE_EXHAUSTED with RetryInfo; every other failure is not
// retried by exporters.
//
//	failure                                         HTTP  gRPC                retryable
//	body not protobuf / not OTLP JSON               400   INVALID_ARGUMENT    no
//	bad target header, bad name, too many records   400   INVALID_ARGUMENT    no
//	Content-Type not protobuf or JSON               415   -                   no
//	Content-Encoding not gzip or identity           415   -                   no
//	body over the request limit                     413   RESOURCE_EXHAUSTED  no (gRPC refuses it itself)
//	no / malformed / unknown / revoked API key      401   UNAUTHENTICATED     no
//	key of another namespace                        403   PERMISSION_DENIED   no
//	namespace or stream not found (not auto-created) 404  NOT_FOUND           no
//	namespace over its ingest quota                 429   RESOURCE_EXHAUSTED  yes (Retry-After / RetryInfo: the quota's delay)
//	node over its admission limits                  429   RESOURCE_EXHAUSTED  yes (1 s)
//	sequencer unavailable, not leader, node closing 503   UNAVAILABLE         yes (1 s)
//	commit failed or outcome unknown                503   UNAVAILABLE         yes (1 s; the logs may be written twice)
//	anything else                                   500   INTERNAL            no
//
// Wrong paths answer 404 and wrong methods 405 (HTTP only).

// answer is what one failure answers.
type answer struct {
	status    int
	code      codes.Code
	retry     time.Duration // > 0: retryable, with this delay
	msg       string
	permanent bool // for a write of a partial commit: the records can never be written
}

// requestError is a mistake in the request.
type requestError struct {
	status int
	code   codes.Code
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{status: http.StatusBadRequest, code: codes.InvalidArgument, msg: fmt.Sprintf(format, args...)}
}

// writeFailure wraps the error of writer.Write.
type writeFailure struct{ err error }

func (e *writeFailure) Error() string { return e.err.Error() }
func (e *writeFailure) Unwrap() error { return e.err }

const retryDelay = time.Second

// errorAnswer maps err to its answer.
func errorAnswer(err error) answer {
	a := classify(err)
	if a.msg == "" {
		a.msg = err.Error()
	}
	return a
}

func classify(err error) answer {
	var (
		re  *requestError
		ov  *overloadError
		qe  *meta.QuotaExceededError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &re):
		return answer{status: re.status, code: re.code}
	case errors.Is(err, otlplogs.ErrMalformed):
		return answer{status: http.StatusBadRequest, code: codes.InvalidArgument}
	case errors.As(err, &mbe):
		return answer{status: http.StatusRequestEntityTooLarge, code: codes.ResourceExhausted,
			msg: fmt.Sprintf("the request body is over the limit of %d bytes", mbe.Limit)}
	case errors.Is(err, auth.ErrUnauthenticated):
		return answer{status: http.StatusUnauthorized, code: codes.Unauthenticated}
	case errors.Is(err, auth.ErrPermissionDenied):
		return answer{status: http.StatusForbidden, code: codes.PermissionDenied}
	case errors.As(err, &ov):
		return answer{status: http.StatusTooManyRequests, code: codes.ResourceExhausted, retry: retryDelay}
	case errors.As(err, &qe):
		return answer{status: http.StatusTooManyRequests, code: codes.ResourceExhausted,
			retry: time.Duration(httpapi.RetryAfterSeconds(err)) * time.Second}
	}
	var wf *writeFailure
	if errors.As(err, &wf) {
		return writeAnswer(wf.err)
	}
	switch {
	case errors.Is(err, meta.ErrNamespaceNotFound), errors.Is(err, meta.ErrStreamNotFound):
		return answer{status: http.StatusNotFound, code: codes.NotFound, permanent: true}
	case errors.Is(err, meta.ErrInvalidArgument):
		return answer{status: http.StatusBadRequest, code: codes.InvalidArgument}
	case errors.Is(err, meta.ErrUnavailable), errors.Is(err, meta.ErrNotLeader), errors.Is(err, writer.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return answer{status: http.StatusServiceUnavailable, code: codes.Unavailable, retry: retryDelay}
	}
	return answer{status: http.StatusInternalServerError, code: codes.Internal}
}

// writeAnswer maps the error of a write (or of one partition's chunk in a partial
// commit). Only a refusal the writer calls definite is not retried; everything else may
// have committed, or may commit on a retry, and is retryable.
func writeAnswer(err error) answer {
	if errors.Is(err, writer.ErrCommitFailed) {
		switch {
		case errors.Is(err, meta.ErrNamespaceNotFound), errors.Is(err, meta.ErrStreamNotFound), errors.Is(err, meta.ErrPartitionNotFound):
			return answer{status: http.StatusNotFound, code: codes.NotFound, permanent: true}
		}
	}
	if errors.Is(err, writer.ErrInvalidRequest) {
		return answer{status: http.StatusBadRequest, code: codes.InvalidArgument, permanent: true}
	}
	return answer{status: http.StatusServiceUnavailable, code: codes.Unavailable, retry: retryDelay}
}
