package reader

import (
	"context"
	"errors"
	"time"
)

// JournalSource serves the partitions that live in a journal (the quorum class,
// lognode-svc/journal) from this node's member of it, instead of the offset index.
//
// A journal offloads what it sealed to segments, committed to the partition's offset
// index, and drops it: below the journal's start the offsets are read from the index
// (ErrInSegments), like any stream's segments, above it from the journal. The
// partition's high watermark is the journal's; its log start the index's (retention
// trims the index) once something was offloaded.
type JournalSource interface {
	// FetchJournal answers a fetch as Fetch does (batches, next offset, high watermark,
	// log start, *ErrOutOfRange, the long-poll wait); ok is false when the partition is
	// not in a journal on this node and the offset index serves it. An offset below the
	// journal's start is ErrInSegments, with the journal's high watermark and start in
	// res.
	FetchJournal(ctx context.Context, streamID uint64, partition int32, offset int64, maxBytes int, maxWait time.Duration) (res Result, ok bool, err error)
	// AwaitJournalToken waits at most wait for the journal of the partition to apply the
	// commit of token (a journal commit index) on this node; ok is false when the
	// partition is not in a journal here.
	AwaitJournalToken(ctx context.Context, streamID uint64, partition int32, token uint64, wait time.Duration) (ok bool)
}

// ErrInSegments: FetchJournal's offset is below the journal's start, offloaded to
// segments the offset index serves.
var ErrInSegments = errors.New("reader: offset offloaded from the journal to segments")

// journalBoundary completes a journal's answer: below its start the index serves the
// segments (at most up to the journal's start, with the journal's high watermark); above
// it the log start is the index's when the journal has offloaded anything.
func (r *Reader) journalBoundary(ctx context.Context, k pkey, offset int64, maxBytes int, res Result, err error) (Result, error) {
	jhwm, jstart := res.HighWatermark, res.LogStart
	if errors.Is(err, ErrInSegments) {
		for retried := false; ; retried = true {
			ires, ierr := r.fetchIndex(ctx, k, offset, maxBytes, 0)
			var oor *ErrOutOfRange
			stale := (ierr == nil && len(ires.Batches) == 0) || (errors.As(ierr, &oor) && offset >= oor.HighWatermark)
			if stale && !retried {
				// The cached index ends before the journal's start (the watch has not
				// brought the latest segment yet): look the partition up again, once.
				r.forgetPartition(k)
				continue
			}
			ires.HighWatermark = max(ires.HighWatermark, jhwm)
			if oor != nil {
				oor.HighWatermark = max(oor.HighWatermark, jhwm)
			}
			return ires, ierr
		}
	}
	if jstart > 0 {
		// Offloaded below: the partition starts where the index does (retention trims it).
		if logStart, _, _, serr := r.state(ctx, k); serr == nil && logStart < jstart {
			res.LogStart = logStart
			var oor *ErrOutOfRange
			if errors.As(err, &oor) {
				oor.LogStart = logStart
			}
		}
	}
	return res, err
}

// forgetPartition drops what the reader caches of one partition (its next fetch looks
// it up again).
func (r *Reader) forgetPartition(k pkey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.parts[k]; p != nil {
		r.removeLocked(p)
	}
}

// AwaitJournal is AwaitJournalToken of the reader's journal source (false without one).
func (r *Reader) AwaitJournal(ctx context.Context, streamID uint64, partition int32, token uint64, wait time.Duration) bool {
	if r.cfg.Journal == nil {
		return false
	}
	return r.cfg.Journal.AwaitJournalToken(ctx, streamID, partition, token, wait)
}
