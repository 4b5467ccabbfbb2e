package reader

import (
	"context"
	"time"
)

// WaitArrow waits up to maxWait for a partition of an arrow stream to hold data at offset:
// it returns at once when offset is below the high watermark (or outside the log, which
// ReadArrow then reports), when maxWait is 0 or the reader is draining, and otherwise when
// a commit raises the high watermark past offset or maxWait ends. It is the long-poll of
// arrow fetches, on the same commit notifications as Fetch's.
func (r *Reader) WaitArrow(ctx context.Context, streamID uint64, partition int32, offset int64, maxWait time.Duration) error {
	if maxWait <= 0 || r.isDraining() {
		return nil
	}
	k := pkey{streamID, partition}
	t := time.NewTimer(maxWait)
	defer t.Stop()
	for {
		logStart, hwm, notify, err := r.state(ctx, k)
		if err != nil {
			return err
		}
		if offset != hwm || offset < logStart {
			return nil
		}
		select {
		case <-notify:
		case <-t.C:
			return nil
		case <-r.draining:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// CheckArrowRange returns *ErrOutOfRange, with the partition's bounds, when offset is
// outside [log start, high watermark] of a partition of an arrow stream (the bounds Fetch
// checks a kafka stream's offsets against), else nil.
func (r *Reader) CheckArrowRange(ctx context.Context, streamID uint64, partition int32, offset int64) error {
	logStart, hwm, _, err := r.state(ctx, pkey{streamID, partition})
	if err != nil {
		return err
	}
	if offset < logStart || offset > hwm {
		return &ErrOutOfRange{Offset: offset, LogStart: logStart, HighWatermark: hwm}
	}
	return nil
}

// ArrowBounds returns a partition's log start and high watermark as this reader knows
// them (the bounds Fetch and WaitArrow use).
func (r *Reader) ArrowBounds(ctx context.Context, streamID uint64, partition int32) (logStart, hwm int64, err error) {
	logStart, hwm, _, err = r.state(ctx, pkey{streamID, partition})
	return logStart, hwm, err
}
