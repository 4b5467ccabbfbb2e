package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/loamhq/loam/lognode-svc/journal"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
)

// Error codes answered (kerr's numbers).
var (
	errUnsupportedVersion = kerr.UnsupportedVersion.Code
)

// code maps a failure to the Kafka error code clients expect for it. The table:
//
//	stream or partition missing          UNKNOWN_TOPIC_OR_PARTITION (retriable)
//	namespace missing                    UNKNOWN_TOPIC_OR_PARTITION
//	offset outside [log start, hwm]      OFFSET_OUT_OF_RANGE
//	batch CRC, magic, framing, payload   CORRUPT_MESSAGE
//	batch over the record limit          MESSAGE_TOO_LARGE
//	out-of-order sequence                OUT_OF_ORDER_SEQUENCE_NUMBER
//	fenced producer epoch                INVALID_PRODUCER_EPOCH
//	unknown or expired producer          UNKNOWN_PRODUCER_ID
//	a write the class cannot take        INVALID_REQUEST (writer.ErrInvalidRequest; a
//	                                     quorum topic of a namespace with a key)
//	journal append over its entry limit  MESSAGE_TOO_LARGE
//	journal refused the batches or entry CORRUPT_MESSAGE
//	commit outcome unknown               REQUEST_TIMED_OUT (the write may have happened)
//	node closing                         NOT_LEADER_OR_FOLLOWER (retry on another node)
//	journal without a reachable leader   NOT_LEADER_OR_FOLLOWER (retriable: an election
//	                                     outlasted the node's retries)
//	journal full                         KAFKA_STORAGE_ERROR (retriable: offload frees it)
//	commit failed, nothing written       KAFKA_STORAGE_ERROR (retriable: retry as sent)
//	sequencer unavailable (reads, admin) REQUEST_TIMED_OUT
//	invalid argument                     INVALID_REQUEST
//	anything else                        UNKNOWN_SERVER_ERROR
//
// The producer refusals, the class's refusals and the journal's come before the writer's
// outcome they are wrapped in (writer.ErrCommitFailed).
func code(err error) int16 {
	var (
		oor *reader.ErrOutOfRange
		nl  *journal.NotLeaderError
	)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, meta.ErrStreamNotFound), errors.Is(err, meta.ErrPartitionNotFound), errors.Is(err, meta.ErrNamespaceNotFound):
		return kerr.UnknownTopicOrPartition.Code
	case errors.As(err, &oor), errors.Is(err, meta.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, recordbatch.ErrTooLarge):
		return kerr.CorruptMessage.Code // a payload that decompresses past its limit lies about its size
	case errors.Is(err, recordbatch.ErrBadCRC), errors.Is(err, recordbatch.ErrBadMagic), errors.Is(err, recordbatch.ErrTruncated),
		errors.Is(err, recordbatch.ErrCorrupt), errors.Is(err, recordbatch.ErrUnsupportedCompression):
		return kerr.CorruptMessage.Code
	case errors.Is(err, meta.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, meta.ErrProducerFenced):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, meta.ErrUnknownProducer):
		return kerr.UnknownProducerID.Code
	case errors.Is(err, envelope.ErrKeyUnavailable):
		return kerr.TopicAuthorizationFailed.Code // the namespace's key is disabled or shredded (docs/encryption.md)
	case errors.Is(err, writer.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, journal.ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, journal.ErrBadBatches), errors.Is(err, journal.ErrBadEntry):
		return kerr.CorruptMessage.Code
	case errors.Is(err, writer.ErrCommitUnknown), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, writer.ErrClosed):
		return kerr.NotLeaderForPartition.Code
	case errors.As(err, &nl), errors.Is(err, journal.ErrUnreachable), errors.Is(err, journal.ErrClosed):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, journal.ErrJournalFull):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, writer.ErrCommitFailed):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, meta.ErrUnavailable), errors.Is(err, meta.ErrNotLeader):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, meta.ErrInvalidArgument):
		return kerr.InvalidRequest.Code
	}
	return kerr.UnknownServerError.Code
}

// msg is err's text for the responses that carry an error message (nil for no error).
func msg(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
