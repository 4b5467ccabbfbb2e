package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// CleanPoints records, per partition of a compacted stream, how far compaction has cleaned
// it: every offset below the point was compacted against every later offset below it, so
// each key has at most one record there. The compaction function starts its next run at
// the point instead of at the log start. Losing a point (or reading an older one) costs a
// repeated full pass, never data: compaction treats everything after the point as dirty.
//
// Layout: pk "clean/" + stream ID (decimal), sk the partition as 10 zero-padded digits;
// counters "offset" and "recheck_ms".
type CleanPoints struct {
	Store Store
}

// CleanPoint is one partition's cleaned point.
type CleanPoint struct {
	// Offset: offsets below it are clean. 0 when nothing was cleaned.
	Offset int64
	// RecheckMs is when the earliest tombstone kept below Offset passes its retention
	// (Unix ms; 0: none kept), so the partition is worth compacting again then even if no
	// data was added.
	RecheckMs int64
}

const cleanPrefix = "clean/"

func cleanKey(p Partition) (string, string, error) {
	if p.Partition < 0 {
		return "", "", fmt.Errorf("coord: clean point %s: negative partition: %w", p, ErrInvalid)
	}
	return cleanPrefix + strconv.FormatUint(p.StreamID, 10), fmt.Sprintf("%010d", p.Partition), nil
}

// Get returns p's point; the zero CleanPoint when none was recorded.
func (c CleanPoints) Get(ctx context.Context, p Partition) (CleanPoint, error) {
	pk, sk, err := cleanKey(p)
	if err != nil {
		return CleanPoint{}, err
	}
	it, err := c.Store.Get(ctx, pk, sk)
	if errors.Is(err, ErrNotFound) {
		return CleanPoint{}, nil
	}
	if err != nil {
		return CleanPoint{}, fmt.Errorf("coord: clean point %s: %w", p, err)
	}
	pt := CleanPoint{Offset: it.Counters["offset"], RecheckMs: it.Counters["recheck_ms"]}
	if pt.Offset < 0 || pt.RecheckMs < 0 {
		return CleanPoint{}, fmt.Errorf("coord: clean point %s: offset %d, recheck %d: negative: %w", p, pt.Offset, pt.RecheckMs, ErrCorrupt)
	}
	return pt, nil
}

// Set records p's point, replacing the one recorded. Writers hold the partition's
// compaction lease; a late write from a writer that lost it can only move the point back,
// which costs repeated work.
func (c CleanPoints) Set(ctx context.Context, p Partition, pt CleanPoint) error {
	pk, sk, err := cleanKey(p)
	if err != nil {
		return err
	}
	if pt.Offset < 0 || pt.RecheckMs < 0 {
		return fmt.Errorf("coord: clean point %s: offset %d, recheck %d: negative: %w", p, pt.Offset, pt.RecheckMs, ErrInvalid)
	}
	it := Item{PK: pk, SK: sk, Counters: map[string]int64{"offset": pt.Offset, "recheck_ms": pt.RecheckMs}}
	if _, err := c.Store.Put(ctx, it, Condition{}); err != nil {
		return fmt.Errorf("coord: clean point %s: %w", p, err)
	}
	return nil
}

// Delete forgets p's point (the partition will be compacted from its log start).
func (c CleanPoints) Delete(ctx context.Context, p Partition) error {
	pk, sk, err := cleanKey(p)
	if err != nil {
		return err
	}
	if err := c.Store.Delete(ctx, pk, sk, Condition{}); err != nil {
		return fmt.Errorf("coord: clean point %s: %w", p, err)
	}
	return nil
}
