package coord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// WALWork is the segmenter's work accounting: WAL bytes not yet rewritten into segments,
// per partition, kept in one item per log node so that handling one WAL object (all of it
// written by one node) costs one write however many partitions it holds: an AddAll of the
// object's chunk lengths to its node's item. Writes therefore grow with nodes x flush
// rate, not with chunks. The segmenter subtracts what it segmented from the item of each
// node whose objects it covered, and its sweep corrects the counts from the sequencer's
// index. Counts are hints (see Work): a partition's pending bytes are the sum over nodes.
//
// Layout: pk "walwork", sk the node ID; one counter per partition, named "<stream>/<partition>"
// (decimal). An item holds the partitions with unsegmented data from that node: about 30
// bytes each, so DynamoDB's 400 KB item limit allows some 13,000 such partitions per node.
// Compact drops counters that reached zero. An object with more than MaxAddAll partitions
// costs one write per MaxAddAll of them.
type WALWork struct {
	Store Store
}

const walWorkPK = "walwork"

func walWorkName(p Partition) string {
	return strconv.FormatUint(p.StreamID, 10) + "/" + strconv.FormatInt(int64(p.Partition), 10)
}

func parseWALWorkName(name string) (Partition, error) {
	s, part, ok := strings.Cut(name, "/")
	id, err1 := strconv.ParseUint(s, 10, 64)
	n, err2 := strconv.ParseInt(part, 10, 32)
	if !ok || err1 != nil || err2 != nil || n < 0 {
		return Partition{}, fmt.Errorf("coord: wal work counter %q: %w", clip(name), ErrCorrupt)
	}
	return Partition{StreamID: id, Partition: int32(n)}, nil
}

func checkNode(node string) error {
	if node == "" || len(node) > MaxSKLen {
		return fmt.Errorf("coord: wal work: node %q: must be 1-%d bytes: %w", clip(node), MaxSKLen, ErrInvalid)
	}
	return nil
}

// Add adds bytes (negative: work done) to node's counts and returns the node's new count
// of each partition in bytes. It makes one write per MaxAddAll partitions.
func (w WALWork) Add(ctx context.Context, node string, bytes map[Partition]int64) (map[Partition]int64, error) {
	if err := checkNode(node); err != nil {
		return nil, err
	}
	out := make(map[Partition]int64, len(bytes))
	parts := slices.SortedFunc(maps.Keys(bytes), func(a, b Partition) int {
		if a.StreamID != b.StreamID {
			return cmpU64(a.StreamID, b.StreamID)
		}
		return int(a.Partition) - int(b.Partition)
	})
	for len(parts) > 0 {
		n := min(len(parts), MaxAddAll)
		deltas := make(map[string]int64, n)
		for _, p := range parts[:n] {
			if p.Partition < 0 {
				return nil, fmt.Errorf("coord: wal work %s: negative partition: %w", p, ErrInvalid)
			}
			deltas[walWorkName(p)] = bytes[p]
		}
		got, err := w.Store.AddAll(ctx, walWorkPK, node, deltas)
		if err != nil {
			return nil, fmt.Errorf("coord: wal work add %s: %w", node, err)
		}
		for _, p := range parts[:n] {
			out[p] = got[walWorkName(p)]
		}
		parts = parts[n:]
	}
	return out, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Nodes calls fn with each node's counts, in node order.
func (w WALWork) Nodes(ctx context.Context, fn func(node string, pending map[Partition]int64) error) error {
	err := w.Store.Query(ctx, walWorkPK, "", func(it Item) error {
		m := make(map[Partition]int64, len(it.Counters))
		for name, n := range it.Counters {
			p, err := parseWALWorkName(name)
			if err != nil {
				return err
			}
			m[p] = n
		}
		return fn(it.SK, m)
	})
	if err != nil {
		return fmt.Errorf("coord: wal work nodes: %w", err)
	}
	return nil
}

// Pending returns p's pending bytes: the sum of its counts over nodes (negative counts are
// taken as zero).
func (w WALWork) Pending(ctx context.Context, p Partition) (int64, error) {
	var sum int64
	err := w.Nodes(ctx, func(_ string, m map[Partition]int64) error {
		sum += max(m[p], 0)
		return nil
	})
	return sum, err
}

// compactAttempts bounds Compact's retries while writes keep changing the item.
const compactAttempts = 8

// Compact removes node's counters that are zero or negative (nothing pending), and the
// item when none is left, so items hold only partitions with pending bytes. It retries
// while concurrent writes change the item, and gives up (nil) after a few attempts: a
// later call finishes.
func (w WALWork) Compact(ctx context.Context, node string) error {
	if err := checkNode(node); err != nil {
		return err
	}
	for range compactAttempts {
		it, err := w.Store.Get(ctx, walWorkPK, node)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("coord: wal work compact %s: %w", node, err)
		}
		keep := maps.Clone(it.Counters)
		maps.DeleteFunc(keep, func(_ string, n int64) bool { return n <= 0 })
		if len(keep) == len(it.Counters) {
			return nil
		}
		if len(keep) == 0 {
			err = w.Store.Delete(ctx, walWorkPK, node, IfVersion(it.Version))
		} else {
			it.Counters = keep
			_, err = w.Store.Put(ctx, it, IfVersion(it.Version))
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("coord: wal work compact %s: %w", node, err)
		}
	}
	return nil
}
