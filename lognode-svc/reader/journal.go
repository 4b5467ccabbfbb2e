package reader

import (
	"context"
	"time"
)

// JournalSource serves the partitions that live in a journal (the quorum class,
// lognode-svc/journal) from this node's member of it, instead of the offset index.
type JournalSource interface {
	// FetchJournal answers a fetch as Fetch does (batches, next offset, high watermark,
	// log start, *ErrOutOfRange, the long-poll wait); ok is false when the partition is
	// not in a journal on this node and the offset index serves it.
	FetchJournal(ctx context.Context, streamID uint64, partition int32, offset int64, maxBytes int, maxWait time.Duration) (res Result, ok bool, err error)
	// AwaitJournalToken waits at most wait for the journal of the partition to apply the
	// commit of token (a journal commit index) on this node; ok is false when the
	// partition is not in a journal here.
	AwaitJournalToken(ctx context.Context, streamID uint64, partition int32, token uint64, wait time.Duration) (ok bool)
}

// AwaitJournal is AwaitJournalToken of the reader's journal source (false without one).
func (r *Reader) AwaitJournal(ctx context.Context, streamID uint64, partition int32, token uint64, wait time.Duration) bool {
	if r.cfg.Journal == nil {
		return false
	}
	return r.cfg.Journal.AwaitJournalToken(ctx, streamID, partition, token, wait)
}
