package metagrpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain is the google.rpc.ErrorInfo domain of sequencer errors.
const Domain = "loam.meta.v1"

// leaderKey is the ErrorInfo metadata key of a NOT_LEADER error's leader RPC address.
const leaderKey = "leader"

// reasons maps each meta sentinel to its ErrorInfo reason and gRPC code.
var reasons = []struct {
	err    error
	reason string
	code   codes.Code
}{
	{meta.ErrNamespaceNotFound, "NAMESPACE_NOT_FOUND", codes.NotFound},
	{meta.ErrStreamNotFound, "STREAM_NOT_FOUND", codes.NotFound},
	{meta.ErrPartitionNotFound, "PARTITION_NOT_FOUND", codes.NotFound},
	{meta.ErrStreamExists, "STREAM_EXISTS", codes.AlreadyExists},
	{meta.ErrInvalidArgument, "INVALID_ARGUMENT", codes.InvalidArgument},
	{meta.ErrStaleCommit, "STALE_COMMIT", codes.FailedPrecondition},
	{meta.ErrClockAhead, "CLOCK_AHEAD", codes.FailedPrecondition},
	{meta.ErrNotLeader, "NOT_LEADER", codes.FailedPrecondition},
	{meta.ErrUnavailable, "UNAVAILABLE", codes.Unavailable},
	{meta.ErrOffsetOutOfRange, "OFFSET_OUT_OF_RANGE", codes.OutOfRange},
	{meta.ErrLeaseHeld, "LEASE_HELD", codes.FailedPrecondition},
	{meta.ErrLeaseLost, "LEASE_LOST", codes.FailedPrecondition},
	{meta.ErrIndexChanged, "INDEX_CHANGED", codes.Aborted},
	{meta.ErrProducerFenced, "PRODUCER_FENCED", codes.FailedPrecondition},
	{meta.ErrOutOfOrderSequence, "OUT_OF_ORDER_SEQUENCE", codes.FailedPrecondition},
	{meta.ErrUnknownProducer, "UNKNOWN_PRODUCER", codes.FailedPrecondition},
	{meta.ErrNamespaceNotEmpty, "NAMESPACE_NOT_EMPTY", codes.FailedPrecondition},
	{meta.ErrKeyNotFound, "KEY_NOT_FOUND", codes.NotFound},
	{meta.ErrKeyExists, "KEY_EXISTS", codes.AlreadyExists},
	{meta.ErrStaleConsumerEpoch, "STALE_CONSUMER_EPOCH", codes.FailedPrecondition},
	{meta.ErrConsumerNotFound, "CONSUMER_NOT_FOUND", codes.NotFound},
	{meta.ErrStaleGroupGeneration, "STALE_GROUP_GENERATION", codes.FailedPrecondition},
	{meta.ErrKafkaGroupNotFound, "KAFKA_GROUP_NOT_FOUND", codes.NotFound},
	{meta.ErrConsumerActive, "CONSUMER_ACTIVE", codes.FailedPrecondition},
	{meta.ErrSchemaNotFound, "SCHEMA_NOT_FOUND", codes.NotFound},
	{meta.ErrJournalEpoch, "JOURNAL_EPOCH", codes.Aborted},
}

// Status converts an error of the sequencer into a gRPC status error carrying a
// google.rpc.ErrorInfo whose reason names the meta sentinel (and, for NOT_LEADER, the
// leader's address). Context errors become Canceled / DeadlineExceeded; anything else
// Internal. FromStatus reverses it. nil stays nil.
func Status(err error) error {
	if err == nil {
		return nil
	}
	for _, r := range reasons {
		if !errors.Is(err, r.err) {
			continue
		}
		info := &errdetails.ErrorInfo{Reason: r.reason, Domain: Domain}
		var nl *meta.NotLeaderError
		if errors.As(err, &nl) && nl.Leader != "" {
			info.Metadata = map[string]string{leaderKey: nl.Leader}
		}
		st, derr := status.New(r.code, err.Error()).WithDetails(info)
		if derr != nil {
			return status.Error(r.code, err.Error())
		}
		return st.Err()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// remoteError is a sequencer error that crossed gRPC: its text is the server's, and it
// unwraps to the meta sentinel (and a context error when the call was cut short).
type remoteError struct {
	msg  string
	errs []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.errs }

// FromStatus converts an error returned by a Sequencer RPC back into one that errors.Is
// matches against the meta sentinels: the ErrorInfo reason when present; else Unavailable,
// DeadlineExceeded and Canceled (the call did not complete: outcome unknown) become
// meta.ErrUnavailable, joined with the context error. Other errors are returned as is.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != Domain {
			continue
		}
		for _, r := range reasons {
			if r.reason != info.GetReason() {
				continue
			}
			if r.err == meta.ErrNotLeader {
				return &meta.NotLeaderError{Leader: info.GetMetadata()[leaderKey]}
			}
			re := &remoteError{msg: st.Message(), errs: []error{r.err}}
			// The server's own context errors travel in the message only.
			return re
		}
	}
	switch st.Code() {
	case codes.Unavailable:
		return &remoteError{msg: fmt.Sprintf("%s: %s", meta.ErrUnavailable, st.Message()), errs: []error{meta.ErrUnavailable}}
	case codes.DeadlineExceeded:
		return &remoteError{msg: fmt.Sprintf("%s: %s", meta.ErrUnavailable, st.Message()), errs: []error{meta.ErrUnavailable, context.DeadlineExceeded}}
	case codes.Canceled:
		return &remoteError{msg: fmt.Sprintf("%s: %s", meta.ErrUnavailable, st.Message()), errs: []error{meta.ErrUnavailable, context.Canceled}}
	}
	return err
}

// AppliedIndexHeader is the Watch response header naming the applied index the stream
// starts after.
const AppliedIndexHeader = "x-loam-applied-index"
