package compaction

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// fakeMeta is an in-test sequencer: one namespace, streams with an offset index per
// partition, leases and index swaps with the FSM's rules from issue4-design.md.
type fakeMeta struct {
	mu      sync.Mutex
	now     func() time.Time
	streams []meta.Stream
	parts   map[[2]int64]*fakePart
	leases  map[string]meta.Lease
	epochs  map[string]uint64
	swaps   int
	// hooks
	beforeSwap func(meta.IndexSwap)
}

type fakePart struct {
	logStart, hwm int64
	entries       []meta.IndexEntry
}

func newFakeMeta() *fakeMeta {
	return &fakeMeta{now: time.Now, parts: map[[2]int64]*fakePart{}, leases: map[string]meta.Lease{}, epochs: map[string]uint64{}}
}

func (f *fakeMeta) addStream(id uint64, partitions int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams = append(f.streams, meta.Stream{ID: id, StreamConfig: meta.StreamConfig{Namespace: "default", Name: fmt.Sprint("s", id), Partitions: partitions}})
	for p := range partitions {
		f.parts[[2]int64{int64(id), int64(p)}] = &fakePart{}
	}
}

func (f *fakeMeta) ListNamespaces(ctx context.Context) ([]string, error) {
	return []string{"default"}, nil
}

func (f *fakeMeta) ListStreams(ctx context.Context, ns string) ([]meta.Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.streams), nil
}

func (f *fakeMeta) part(stream uint64, p int32) (*fakePart, error) {
	fp := f.parts[[2]int64{int64(stream), int64(p)}]
	if fp == nil {
		return nil, meta.ErrStreamNotFound
	}
	return fp, nil
}

func (f *fakeMeta) commit(stream uint64, p int32, e meta.IndexEntry) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp, _ := f.part(stream, p)
	e.BaseOffset = fp.hwm
	fp.hwm += e.Count
	fp.entries = append(fp.entries, e)
	return e.BaseOffset
}

func (f *fakeMeta) Lookup(ctx context.Context, stream uint64, p int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp, err := f.part(stream, p)
	if err != nil {
		return nil, meta.PartitionState{}, err
	}
	st := meta.PartitionState{StreamID: stream, Partition: p, LogStart: fp.logStart, HighWatermark: fp.hwm}
	for _, e := range fp.entries {
		st.Bytes += e.Length
	}
	if max <= 0 {
		return nil, st, nil
	}
	if from < fp.logStart || from > fp.hwm {
		return nil, st, meta.ErrOffsetOutOfRange
	}
	var out []meta.IndexEntry
	for _, e := range fp.entries {
		if e.End() > from && len(out) < max {
			out = append(out, e)
		}
	}
	return out, st, nil
}

func leaseKey(stream uint64, p int32, kind string) string {
	return fmt.Sprint(stream, "/", p, "/", kind)
}

func (f *fakeMeta) AcquireLease(ctx context.Context, stream uint64, p int32, kind, holder string, ttl time.Duration) (meta.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := leaseKey(stream, p, kind)
	now := f.now().UnixMilli()
	cur, ok := f.leases[k]
	if ok && cur.ExpiresMs > now && cur.Holder != holder {
		return meta.Lease{}, meta.ErrLeaseHeld
	}
	epoch := cur.Epoch
	if !ok || cur.Holder != holder || cur.ExpiresMs <= now {
		f.epochs[k]++
		epoch = f.epochs[k]
	}
	l := meta.Lease{StreamID: stream, Partition: p, Kind: kind, Holder: holder, Epoch: epoch, ExpiresMs: now + ttl.Milliseconds()}
	f.leases[k] = l
	return l, nil
}

func (f *fakeMeta) ReleaseLease(ctx context.Context, l meta.Lease) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := leaseKey(l.StreamID, l.Partition, l.Kind)
	if cur, ok := f.leases[k]; ok && cur.Holder == l.Holder && cur.Epoch == l.Epoch {
		delete(f.leases, k)
	}
	return nil
}

func (f *fakeMeta) SwapIndex(ctx context.Context, s meta.IndexSwap) error {
	if f.beforeSwap != nil {
		f.beforeSwap(s)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := leaseKey(s.Lease.StreamID, s.Lease.Partition, s.Lease.Kind)
	cur, ok := f.leases[k]
	if !ok || cur.Holder != s.Lease.Holder || cur.Epoch != s.Lease.Epoch || cur.ExpiresMs <= f.now().UnixMilli() {
		return meta.ErrLeaseLost
	}
	fp, err := f.part(s.Lease.StreamID, s.Lease.Partition)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(fp.entries, func(e meta.IndexEntry) bool { return e.BaseOffset == s.Old[0].BaseOffset })
	if i < 0 || i+len(s.Old) > len(fp.entries) || !slices.Equal(fp.entries[i:i+len(s.Old)], s.Old) {
		return meta.ErrIndexChanged
	}
	if s.New[0].BaseOffset != s.Old[0].BaseOffset || s.New[len(s.New)-1].End() != s.Old[len(s.Old)-1].End() {
		return meta.ErrInvalidArgument
	}
	fp.entries = slices.Concat(fp.entries[:i], s.New, fp.entries[i+len(s.Old):])
	f.swaps++
	return nil
}

func (f *fakeMeta) entries(stream uint64, p int32) []meta.IndexEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp, _ := f.part(stream, p)
	return slices.Clone(fp.entries)
}

func (f *fakeMeta) Referenced(ctx context.Context, keys []string) ([]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]bool, len(keys))
	for i, k := range keys {
		for _, fp := range f.parts {
			for _, e := range fp.entries {
				if e.Object == k {
					out[i] = true
				}
			}
		}
	}
	return out, nil
}
