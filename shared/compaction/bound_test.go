package compaction

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/objstore"
)

// newBounded returns a Compactor whose key map holds at most keyMapBytes, keeping its
// cleaned points in store (nil: in memory).
func newBounded(t *testing.T, b objstore.Bucket, f *metafake.Meta, now *time.Time, target, keyMapBytes int64, store coord.Store) *Compactor {
	t.Helper()
	c, err := New(Config{Bucket: b, Meta: f, Coord: store, TargetBytes: target, KeyMapBytes: keyMapBytes, ReadBytes: 512,
		TombstoneRetention: 24 * time.Hour, Now: func() time.Time { return *now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func passes(r Result) int { return r.Passes }

// cleanedOffset is partition 1/0's cleaned point.
func cleanedOffset(c *Compactor) int64 {
	pt, _ := c.points.get(context.Background(), coord.Partition{StreamID: 1})
	return pt.Offset
}
