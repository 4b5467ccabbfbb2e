package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// This file is the one place where failures become HTTP answers. Every handler returns its
// error and the route wrapper answers errorAnswer(err); a write's outcome goes through
// writeOutcome, so a write that may have happened is never answered with a definite code.
//
//	failure                                          status  code                   retriable
//	client mistake (*inputError)                     4xx     its own                no
//	body over the limit (*http.MaxBytesError)        413     request_too_large      no
//	node over its admission limits (*overloadError)  429     overloaded             yes
//	namespace over its ingest quota                  429     quota_exceeded         yes (Retry-After: its delay)
//	namespace over its CloudEvents ledger cap        429     dedup_ledger_full      yes
//	namespace key unavailable (envelope)             403     key_unavailable        no
//	offset outside the log (*reader.ErrOutOfRange)   416     offset_out_of_range    no
//	meta not-found / exists / invalid argument       404/409/400                    no
//	sequencer unreachable, not leader, writer closed 503     unavailable            yes
//	context ended                                    503     unavailable            yes
//	anything else                                    500     internal               no
//
// A write (the error of writer.Write, wrapped in *writeFailure):
//
//	writer.ErrCommitUnknown                          503     commit_unknown         yes (may duplicate)
//	writer.ErrCommitFailed + stream/partition/ns gone 404    *_not_found            no
//	writer.ErrCommitFailed + producer refusal        409     out_of_order_sequence,  no
//	                                                         producer_fenced,
//	                                                         unknown_producer
//	writer.ErrInvalidRequest                         400     invalid_argument       no
//	writer.ErrCommitFailed                           503     commit_failed          yes
//	writer.ErrClosed (refused before buffering)      503     unavailable            yes
//	anything else (meta.ErrUnavailable, deadline, …) 503     commit_unknown         yes (may duplicate)

// writeFailure carries the error of a writer.Write call: its outcome decides the answer.
type writeFailure struct{ err error }

func (e *writeFailure) Error() string { return e.err.Error() }
func (e *writeFailure) Unwrap() error { return e.err }

// overloadError refuses a request at admission: the node is over one of its limits.
type overloadError struct{ msg string }

func (e *overloadError) Error() string { return e.msg }

// answer is what one failure answers.
type answer struct {
	status int
	detail streamapi.ErrorDetail
}

func retriable(status int, code string) answer {
	return answer{status: status, detail: streamapi.ErrorDetail{Code: code, Retriable: true}}
}

func definite(status int, code string) answer {
	return answer{status: status, detail: streamapi.ErrorDetail{Code: code}}
}

// errorAnswer maps err to its answer; the message is err's text unless said otherwise.
func errorAnswer(err error) answer {
	var (
		we  *writeFailure
		in  *inputError
		ov  *overloadError
		oor *reader.ErrOutOfRange
		mbe *http.MaxBytesError
	)
	var a answer
	switch {
	case errors.As(err, &we):
		a = writeOutcome(we.err)
	case errors.As(err, &in):
		a = definite(in.status, in.code)
	case errors.As(err, &ov):
		a = retriable(http.StatusTooManyRequests, streamapi.CodeOverloaded)
	case errors.As(err, &mbe):
		a = definite(http.StatusRequestEntityTooLarge, streamapi.CodeRequestTooLarge)
		a.detail.Message = fmt.Sprintf("the request body is over the limit of %d bytes", mbe.Limit)
	case errors.As(err, &oor):
		a = definite(http.StatusRequestedRangeNotSatisfiable, streamapi.CodeOffsetOutOfRange)
		a.detail.LogStart, a.detail.HighWater = &oor.LogStart, &oor.HighWatermark
	default:
		var ok bool
		if a, ok = notFound(err); ok {
			break
		}
		if a, ok = producerAnswer(err); ok {
			break
		}
		if a, ok = quotaAnswer(err); ok {
			break
		}
		if a, ok = ledgerAnswer(err); ok { // cloudevents.go
			break
		}
		if a, ok = keyAnswer(err); ok { // nskeys.go
			break
		}
		switch {
		case errors.Is(err, meta.ErrStreamExists):
			a = definite(http.StatusConflict, streamapi.CodeStreamExists)
		case errors.Is(err, meta.ErrInvalidArgument):
			a = definite(http.StatusBadRequest, streamapi.CodeInvalidArgument)
		case errors.Is(err, meta.ErrUnavailable), errors.Is(err, meta.ErrNotLeader), errors.Is(err, writer.ErrClosed),
			errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			a = retriable(http.StatusServiceUnavailable, streamapi.CodeUnavailable)
		default:
			a = definite(http.StatusInternalServerError, streamapi.CodeInternal)
		}
	}
	if a.detail.Message == "" {
		a.detail.Message = err.Error()
	}
	return a
}

// writeOutcome maps the error of one write. Only a refusal the writer calls definite
// (ErrCommitFailed, or ErrClosed before anything was buffered) answers a definite code;
// every other failure may have committed and answers commit_unknown, whatever it wraps.
func writeOutcome(err error) answer {
	switch {
	case errors.Is(err, writer.ErrCommitUnknown):
		return retriable(http.StatusServiceUnavailable, streamapi.CodeCommitUnknown)
	case errors.Is(err, writer.ErrCommitFailed):
		if a, ok := notFound(err); ok {
			return a
		}
		if a, ok := keyAnswer(err); ok { // nskeys.go
			return a
		}
		if a, ok := producerAnswer(err); ok {
			return a
		}
		return retriable(http.StatusServiceUnavailable, streamapi.CodeCommitFailed)
	case errors.Is(err, writer.ErrClosed):
		return retriable(http.StatusServiceUnavailable, streamapi.CodeUnavailable)
	default:
		return retriable(http.StatusServiceUnavailable, streamapi.CodeCommitUnknown)
	}
}

// notFound maps the sequencer's not-found errors.
func notFound(err error) (answer, bool) {
	switch {
	case errors.Is(err, meta.ErrNamespaceNotFound):
		return definite(http.StatusNotFound, streamapi.CodeNamespaceNotFound), true
	case errors.Is(err, meta.ErrStreamNotFound):
		return definite(http.StatusNotFound, streamapi.CodeStreamNotFound), true
	case errors.Is(err, meta.ErrPartitionNotFound):
		return definite(http.StatusNotFound, streamapi.CodePartitionNotFound), true
	}
	return answer{}, false
}
