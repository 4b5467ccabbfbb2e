package kafka

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/loamhq/loam/lognode-svc/journal"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
)

// TestCodeOfQuorumFailures: the errors the quorum writer answers (the journal's, wrapped
// in the writer's outcome as lognode-svc/node's quorum writer wraps them) map to the codes
// Kafka clients retry or give up on.
func TestCodeOfQuorumFailures(t *testing.T) {
	failed := func(err error) error { return fmt.Errorf("%w: %w", writer.ErrCommitFailed, err) }
	for _, tc := range []struct {
		name      string
		err       error
		want      *kerr.Error
		retriable bool
	}{
		{"gap in sequences", failed(fmt.Errorf("j0: %w", meta.ErrOutOfOrderSequence)), kerr.OutOfOrderSequenceNumber, false},
		{"older epoch", failed(fmt.Errorf("j0: %w", meta.ErrProducerFenced)), kerr.InvalidProducerEpoch, false},
		{"journal full", failed(fmt.Errorf("%w (from 127.0.0.1:1)", journal.ErrJournalFull)), kerr.KafkaStorageError, true},
		{"append too large", failed(journal.ErrTooLarge), kerr.MessageTooLarge, false},
		{"bad batches", failed(journal.ErrBadBatches), kerr.CorruptMessage, true}, // as Kafka defines it
		{"no leader elected", failed(&journal.NotLeaderError{Journal: "j0"}), kerr.NotLeaderForPartition, true},
		{"leader unreachable", failed(fmt.Errorf("%w: 127.0.0.1:1: connection refused", journal.ErrUnreachable)), kerr.NotLeaderForPartition, true},
		{"journal host closing", failed(journal.ErrClosed), kerr.NotLeaderForPartition, true},
		{"outcome unknown", fmt.Errorf("%w: %v", writer.ErrCommitUnknown, journal.ErrCommitUnknown), kerr.RequestTimedOut, true},
		{"produce wait over", fmt.Errorf("%w: %v", writer.ErrCommitUnknown, context.DeadlineExceeded), kerr.RequestTimedOut, true},
		{"namespace with a key", failed(fmt.Errorf("%w: %w: stream 3 is in a namespace with a key", writer.ErrInvalidRequest, meta.ErrInvalidArgument)), kerr.InvalidRequest, false},
		{"standard commit failed", writer.ErrSequencerUnavailable, kerr.KafkaStorageError, true},
	} {
		got := code(tc.err)
		if got != tc.want.Code {
			t.Errorf("%s: %v answers %v, want %v", tc.name, tc.err, kerr.ErrorForCode(got), tc.want)
		}
		if kerr.IsRetriable(kerr.ErrorForCode(got)) != tc.retriable {
			t.Errorf("%s: %v retriable %v, want %v", tc.name, kerr.ErrorForCode(got), !tc.retriable, tc.retriable)
		}
	}
}
