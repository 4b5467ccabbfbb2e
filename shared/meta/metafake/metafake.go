package metafake

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// Meta is an in-memory sequencer: one namespace, streams with an offset index per
// partition, leases and index swaps with the FSM's rules (issue4-design.md).
type Meta struct {
	// Now is the clock leases are granted and checked against; New sets time.Now.
	Now func() time.Time
	// BeforeSwap, when set, is called at the start of each SwapIndex, without the lock.
	BeforeSwap func(meta.IndexSwap)

	mu      sync.Mutex
	streams []meta.Stream
	parts   map[[2]int64]*partition
	leases  map[string]meta.Lease
	epochs  map[string]uint64
	swaps   int
}

type partition struct {
	logStart, hwm int64
	entries       []meta.IndexEntry
}

// New returns an empty Meta with the namespace "default".
func New() *Meta {
	return &Meta{Now: time.Now, parts: map[[2]int64]*partition{}, leases: map[string]meta.Lease{}, epochs: map[string]uint64{}}
}

// AddStream adds stream id, named "s<id>" in "default", with empty partitions.
func (f *Meta) AddStream(id uint64, partitions int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams = append(f.streams, meta.Stream{ID: id, StreamConfig: meta.StreamConfig{Namespace: "default", Name: fmt.Sprint("s", id), Partitions: partitions}})
	for p := range partitions {
		f.parts[[2]int64{int64(id), int64(p)}] = &partition{}
	}
}

// ListNamespaces answers "default".
func (f *Meta) ListNamespaces(ctx context.Context) ([]string, error) {
	return []string{"default"}, nil
}

// ListStreams answers every stream added, whatever ns.
func (f *Meta) ListStreams(ctx context.Context, ns string) ([]meta.Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.streams), nil
}

func (f *Meta) part(stream uint64, p int32) (*partition, error) {
	fp := f.parts[[2]int64{int64(stream), int64(p)}]
	if fp == nil {
		return nil, meta.ErrStreamNotFound
	}
	return fp, nil
}

// Commit appends e (its BaseOffset set to the high watermark) to the partition's index,
// advances the high watermark by e.Count and returns the base offset.
func (f *Meta) Commit(stream uint64, p int32, e meta.IndexEntry) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp, _ := f.part(stream, p)
	e.BaseOffset = fp.hwm
	fp.hwm += e.Count
	fp.entries = append(fp.entries, e)
	return e.BaseOffset
}

// HighWatermark returns the partition's high watermark.
func (f *Meta) HighWatermark(stream uint64, p int32) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp, _ := f.part(stream, p)
	return fp.hwm
}

// Entries returns a copy of the partition's index.
func (f *Meta) Entries(stream uint64, p int32) []meta.IndexEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp, _ := f.part(stream, p)
	return slices.Clone(fp.entries)
}

// Swaps returns how many SwapIndex calls were applied.
func (f *Meta) Swaps() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.swaps
}

// DropLeases forgets every lease (epochs are kept), as if each had expired and been taken
// over: a swap under any lease granted so far is refused with meta.ErrLeaseLost.
func (f *Meta) DropLeases() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = map[string]meta.Lease{}
}

// Lookup answers the partition's state and, when max > 0, up to max entries that end
// after from; from outside [log start, high watermark] is meta.ErrOffsetOutOfRange.
func (f *Meta) Lookup(ctx context.Context, stream uint64, p int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error) {
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

// AcquireLease grants or renews the (stream, partition, kind) lease for holder.
func (f *Meta) AcquireLease(ctx context.Context, stream uint64, p int32, kind, holder string, ttl time.Duration) (meta.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := leaseKey(stream, p, kind)
	now := f.Now().UnixMilli()
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

// ReleaseLease drops l if it is still the current lease; otherwise it does nothing.
func (f *Meta) ReleaseLease(ctx context.Context, l meta.Lease) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := leaseKey(l.StreamID, l.Partition, l.Kind)
	if cur, ok := f.leases[k]; ok && cur.Holder == l.Holder && cur.Epoch == l.Epoch {
		delete(f.leases, k)
	}
	return nil
}

// SwapIndex replaces the run s.Old of the index by s.New under the current lease s.Lease;
// an empty Old or New is meta.ErrInvalidArgument.
func (f *Meta) SwapIndex(ctx context.Context, s meta.IndexSwap) error {
	if f.BeforeSwap != nil {
		f.BeforeSwap(s)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(s.Old) == 0 || len(s.New) == 0 {
		return meta.ErrInvalidArgument
	}
	k := leaseKey(s.Lease.StreamID, s.Lease.Partition, s.Lease.Kind)
	cur, ok := f.leases[k]
	if !ok || cur.Holder != s.Lease.Holder || cur.Epoch != s.Lease.Epoch || cur.ExpiresMs <= f.Now().UnixMilli() {
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

// Referenced answers, for each key, whether an index entry names it.
func (f *Meta) Referenced(ctx context.Context, keys []string) ([]bool, error) {
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
