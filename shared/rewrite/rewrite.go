// Package rewrite holds what the functions that rewrite a partition's index under a lease
// (the segmenter and compaction) share: the sequencer calls they make, their lease holder
// names, and the cleanup after a refused swap.
package rewrite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// Meta is what an index rewriter needs from the sequencer (a subset of meta.Client).
type Meta interface {
	ListNamespaces(ctx context.Context) ([]string, error)
	ListStreams(ctx context.Context, ns string) ([]meta.Stream, error)
	Lookup(ctx context.Context, streamID uint64, partition int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error)
	AcquireLease(ctx context.Context, streamID uint64, partition int32, kind, holder string, ttl time.Duration) (meta.Lease, error)
	ReleaseLease(ctx context.Context, l meta.Lease) error
	SwapIndex(ctx context.Context, s meta.IndexSwap) error
	Referenced(ctx context.Context, keys []string) ([]bool, error)
}

// Holder returns a lease holder name: prefix, a dash and 16 random hex digits.
func Holder(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// DeleteUnreferenced deletes the objects of a refused swap that no index entry references
// (an earlier attempt of the same swap may have been applied). What it cannot tell or
// delete is left to GC's orphan sweep.
func DeleteUnreferenced(ctx context.Context, m Meta, b objstore.Bucket, log *slog.Logger, keys ...string) {
	refd, err := m.Referenced(ctx, keys)
	if err != nil || len(refd) != len(keys) {
		log.Warn("refused swap: cannot tell whether its objects are referenced; left to gc", "keys", keys, "err", err)
		return
	}
	for i, k := range keys {
		if refd[i] {
			continue
		}
		if err := b.Delete(ctx, k); err != nil {
			log.Warn("delete refused segment", "key", k, "err", err)
		}
	}
}
