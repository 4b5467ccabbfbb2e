package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Partition names one partition of a stream (meta.PartitionState's StreamID and Partition).
type Partition struct {
	StreamID  uint64
	Partition int32
}

func (p Partition) String() string { return fmt.Sprintf("%d/%d", p.StreamID, p.Partition) }

// WorkKind names a kind of pending work counted per partition.
type WorkKind string

// Work kinds.
const (
	// WorkSegment counts WAL bytes of a partition not yet rewritten into segments.
	WorkSegment WorkKind = "segment"
	// WorkCompact counts bytes appended to a compacted stream's partition since its last
	// compaction.
	WorkCompact WorkKind = "compact"
)

// Work is work accounting: bytes pending per partition and kind, so a function knows when
// a partition is worth segmenting or compacting. Producers of work Add the bytes they
// created (the segmenter, handling a WAL object's notification, adds each chunk's length);
// whoever does the work subtracts the bytes it covered. Subtract what was done, never reset
// to zero: bytes added meanwhile stay counted. A count can go negative after work was done
// twice; treat it as nothing pending. Counts are hints: the sequencer's index is the truth,
// and Set rebuilds a count from it.
//
// Layout: pk "work/" + stream ID (decimal), sk the partition as 10 zero-padded digits (so
// sort-key order is partition order); one counter per kind.
type Work struct {
	Store Store
}

const workPrefix = "work/"

func workKey(p Partition) (string, string, error) {
	if p.Partition < 0 {
		return "", "", fmt.Errorf("coord: work %s: negative partition: %w", p, ErrInvalid)
	}
	return workPrefix + strconv.FormatUint(p.StreamID, 10), fmt.Sprintf("%010d", p.Partition), nil
}

func checkKind(kind WorkKind) error {
	if err := checkName(string(kind)); err != nil {
		return fmt.Errorf("coord: work kind: %w", err)
	}
	return nil
}

// Add adds bytes (negative: work done) to p's count of kind and returns the new count.
func (w Work) Add(ctx context.Context, p Partition, kind WorkKind, bytes int64) (int64, error) {
	pk, sk, err := workKey(p)
	if err != nil {
		return 0, err
	}
	if err := checkKind(kind); err != nil {
		return 0, err
	}
	n, err := w.Store.Add(ctx, pk, sk, string(kind), bytes)
	if err != nil {
		return 0, fmt.Errorf("coord: work add %s %s: %w", p, kind, err)
	}
	return n, nil
}

// Pending returns p's count of kind, 0 when nothing was counted.
func (w Work) Pending(ctx context.Context, p Partition, kind WorkKind) (int64, error) {
	pk, sk, err := workKey(p)
	if err != nil {
		return 0, err
	}
	it, err := w.Store.Get(ctx, pk, sk)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("coord: work pending %s: %w", p, err)
	}
	return it.Counters[string(kind)], nil
}

// Set sets p's count of kind to bytes, leaving its other kinds (a rebuild from the
// sequencer). It retries while concurrent writes change the item.
func (w Work) Set(ctx context.Context, p Partition, kind WorkKind, bytes int64) error {
	pk, sk, err := workKey(p)
	if err != nil {
		return err
	}
	if err := checkKind(kind); err != nil {
		return err
	}
	for {
		it, err := w.Store.Get(ctx, pk, sk)
		cond := IfVersion(it.Version)
		switch {
		case errors.Is(err, ErrNotFound):
			it, cond = Item{PK: pk, SK: sk}, IfAbsent
		case err != nil:
			return fmt.Errorf("coord: work set %s: %w", p, err)
		}
		if it.Counters == nil {
			it.Counters = make(map[string]int64, 1)
		}
		it.Counters[string(kind)] = bytes
		_, err = w.Store.Put(ctx, it, cond)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("coord: work set %s: %w", p, err)
		}
	}
}

// List calls fn with each partition of stream whose count of kind is at least min, in
// partition order.
func (w Work) List(ctx context.Context, stream uint64, kind WorkKind, min int64, fn func(p Partition, pending int64) error) error {
	pk := workPrefix + strconv.FormatUint(stream, 10)
	err := w.Store.Query(ctx, pk, "", func(it Item) error {
		n, ok := it.Counters[string(kind)]
		if !ok || n < min {
			return nil
		}
		part, err := strconv.ParseInt(it.SK, 10, 32)
		if err != nil || part < 0 {
			return fmt.Errorf("coord: work item %s/%s: bad partition: %w", pk, it.SK, ErrCorrupt)
		}
		return fn(Partition{StreamID: stream, Partition: int32(part)}, n)
	})
	if err != nil {
		return fmt.Errorf("coord: work list %d %s: %w", stream, kind, err)
	}
	return nil
}
