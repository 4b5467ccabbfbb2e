package meta

import (
	"errors"
	"fmt"
)

// Deleting a named consumer and resetting its offsets (tools, not members).
//
// Both are refused with ErrConsumerActive while members are live (on any stream for a
// delete, on the stream reset for a reset), as Kafka's kafka-consumer-groups refuses them
// for a group that is not empty, unless forced. Forced, the live members concerned are
// dropped and their leases end (a lease keeps its epoch, so the next claim is at a newer
// one and a dropped member's commits are refused as stale); a member still running joins
// again at its next heartbeat (re-creating a deleted consumer) and reads from the offsets
// the reset left.

// ErrConsumerActive: a consumer delete or offset reset while members are live, not forced.
// Nothing was changed.
var ErrConsumerActive = errors.New("meta: consumer has live members")

// Where a reset moves each partition's committed offset.
const (
	ResetEarliest  = "earliest"  // the partition's log start
	ResetLatest    = "latest"    // its high watermark
	ResetOffset    = "offset"    // ConsumerReset.Offset, clamped to log start..high watermark
	ResetTimestamp = "timestamp" // the first chunk holding a record at or after TimestampMs
)

// ConsumerReset resets the committed offsets of one stream's partitions (all of them when
// Partitions is empty). To is one of ResetEarliest, ResetLatest, ResetOffset (Offset) or
// ResetTimestamp (TimestampMs, ms since the epoch): the start of the first committed
// chunk whose largest timestamp is at or after TimestampMs (so no record at or after it
// is skipped; a few before it may be read again), or the high watermark when there is
// none. The offsets set are answered per partition.
type ConsumerReset struct {
	Namespace   string
	Consumer    string
	Stream      string
	Partitions  []int32
	To          string
	Offset      int64
	TimestampMs int64
	Force       bool
}

// CheckConsumerReset validates a reset's shape: a known To, an offset or timestamp >= 0
// where it applies, at most MaxPartitions distinct partitions >= 0.
func CheckConsumerReset(r ConsumerReset) error {
	switch r.To {
	case ResetEarliest, ResetLatest:
	case ResetOffset:
		if r.Offset < 0 {
			return fmt.Errorf("%w: reset consumer offsets: offset %d: want >= 0", ErrInvalidArgument, r.Offset)
		}
	case ResetTimestamp:
		if r.TimestampMs < 0 {
			return fmt.Errorf("%w: reset consumer offsets: timestamp %d: want >= 0 (ms since the epoch)", ErrInvalidArgument, r.TimestampMs)
		}
	default:
		return fmt.Errorf("%w: reset consumer offsets: to %q: want %s, %s, %s or %s", ErrInvalidArgument, r.To,
			ResetEarliest, ResetLatest, ResetOffset, ResetTimestamp)
	}
	if len(r.Partitions) > MaxPartitions {
		return fmt.Errorf("%w: reset consumer offsets: %d partitions: at most %d", ErrInvalidArgument, len(r.Partitions), MaxPartitions)
	}
	seen := make(map[int32]bool, len(r.Partitions))
	for _, p := range r.Partitions {
		if p < 0 || seen[p] {
			return fmt.Errorf("%w: reset consumer offsets: partition %d negative or named twice", ErrInvalidArgument, p)
		}
		seen[p] = true
	}
	return nil
}
