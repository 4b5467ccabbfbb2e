package fsm

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
)

// harness applies commands to a fresh FSM as a Raft leader would: consecutive indexes,
// every command stamped.
type harness struct {
	t      *testing.T
	f      *FSM
	index  uint64
	events []meta.Event
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t}
	f, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true, Publish: func(evs []meta.Event) {
		h.events = append(h.events, evs...)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	h.f = f
	return h
}

const t0 = int64(1_800_000_000_000) // a fixed wall clock, ms

func (h *harness) entry(stamp int64, cmd *metapb.Command) *raft.Log {
	h.t.Helper()
	cmd.StampMs = stamp
	b, err := Encode(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	h.index++
	return &raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: b}
}

func (h *harness) apply(stamp int64, cmd *metapb.Command) *Result {
	h.t.Helper()
	r, _ := h.f.Apply(h.entry(stamp, cmd)).(*Result)
	if r == nil {
		h.t.Fatalf("index %d: no result", h.index)
	}
	return r
}

func (h *harness) stream(name string, parts int32) meta.Stream {
	h.t.Helper()
	r := h.apply(t0, CreateStream(meta.StreamConfig{Name: name, Partitions: parts}))
	if r.Err != nil {
		h.t.Fatal(r.Err)
	}
	return r.Stream
}

func (h *harness) commit(stamp int64, c meta.CommitWal) (meta.CommitResult, error) {
	h.t.Helper()
	r := h.apply(stamp, CommitWal(c))
	return r.Commit, r.Err
}

func chunk(id uint64, p int32, records, off, length int64) meta.Chunk {
	return meta.Chunk{StreamID: id, Partition: p, Records: records, Offset: off, Length: length, MaxTimestamp: t0 + off}
}

func TestCommitAssignsDenseOffsets(t *testing.T) {
	h := newHarness(t)
	s := h.stream("orders", 3)
	want := []struct {
		chunks []meta.Chunk
		bases  []int64
	}{
		{[]meta.Chunk{chunk(s.ID, 0, 5, 0, 100), chunk(s.ID, 1, 2, 100, 50)}, []int64{0, 0}},
		// two chunks of one partition in one commit get consecutive ranges
		{[]meta.Chunk{chunk(s.ID, 0, 3, 0, 10), chunk(s.ID, 0, 4, 10, 10), chunk(s.ID, 2, 1, 20, 10)}, []int64{5, 8, 0}},
		{[]meta.Chunk{chunk(s.ID, 1, 10, 0, 1000), chunk(s.ID, 0, 1, 1000, 7)}, []int64{2, 12}},
	}
	for i, w := range want {
		res, err := h.commit(t0+int64(i), meta.CommitWal{Object: fmt.Sprintf("wal/standard/n1/%d.wal", i), CreatedMs: t0, Chunks: w.chunks})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.BaseOffsets, w.bases) || res.Duplicate || res.AppliedIndex != h.index {
			t.Fatalf("commit %d: got %+v, want bases %v at index %d", i, res, w.bases, h.index)
		}
	}
	_, parts, err := h.f.GetStream("default", "orders")
	if err != nil {
		t.Fatal(err)
	}
	gotHWM := []int64{parts[0].HighWatermark, parts[1].HighWatermark, parts[2].HighWatermark}
	if !reflect.DeepEqual(gotHWM, []int64{13, 12, 1}) || parts[0].Bytes != 127 {
		t.Fatalf("partitions %+v", parts)
	}
	// The index of partition 0 is dense: each entry starts where the previous ended.
	entries, st, err := h.f.Lookup(s.ID, 0, 0, MaxLookup)
	if err != nil {
		t.Fatal(err)
	}
	var next int64
	for _, e := range entries {
		if e.BaseOffset != next || e.Kind != meta.KindWAL {
			t.Fatalf("entries not dense: %+v", entries)
		}
		next = e.End()
	}
	if next != st.HighWatermark || len(entries) != 4 {
		t.Fatalf("entries end at %d, hwm %d, %d entries", next, st.HighWatermark, len(entries))
	}
	// Watch events carry the added entries and the new high watermark.
	last := h.events[len(h.events)-1]
	if last.AppliedIndex != h.index || len(last.Partitions) != 2 || last.Partitions[1].HighWatermark != 13 ||
		last.Partitions[1].Added[0].Object != "wal/standard/n1/2.wal" || last.Partitions[1].Added[0].Offset != 1000 {
		t.Fatalf("last event %+v", last)
	}
}

func TestLookup(t *testing.T) {
	h := newHarness(t)
	s := h.stream("s", 1)
	for i := range 5 { // entries [0,10) [10,20) ... [40,50)
		if _, err := h.commit(t0, meta.CommitWal{Object: fmt.Sprint("o", i), CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 10, 0, 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		from  int64
		max   int
		bases []int64
		err   error
	}{
		{0, 2, []int64{0, 10}, nil},
		{9, 1, []int64{0}, nil},
		{10, 1, []int64{10}, nil},
		{45, 10, []int64{40}, nil},
		{49, 0, nil, nil}, // max <= 0: the state alone, whatever from is
		{-1, 0, nil, nil},
		{51, -1, nil, nil},
		{50, 10, nil, nil}, // at the high watermark: nothing
		{51, 10, nil, meta.ErrOffsetOutOfRange},
		{-1, 10, nil, meta.ErrOffsetOutOfRange},
	} {
		es, st, err := h.f.Lookup(s.ID, 0, tc.from, tc.max)
		if !errors.Is(err, tc.err) {
			t.Fatalf("from %d: err %v, want %v", tc.from, err, tc.err)
		}
		var bases []int64
		for _, e := range es {
			bases = append(bases, e.BaseOffset)
		}
		if !reflect.DeepEqual(bases, tc.bases) {
			t.Fatalf("from %d max %d: bases %v, want %v", tc.from, tc.max, bases, tc.bases)
		}
		if err == nil && st.HighWatermark != 50 {
			t.Fatalf("state %+v", st)
		}
	}
	if _, _, err := h.f.Lookup(s.ID, 1, 0, 1); !errors.Is(err, meta.ErrPartitionNotFound) {
		t.Fatalf("partition 1: %v", err)
	}
	if _, _, err := h.f.Lookup(s.ID+1, 0, 0, 1); !errors.Is(err, meta.ErrStreamNotFound) {
		t.Fatalf("stream: %v", err)
	}
}

func TestDedupeAndStale(t *testing.T) {
	h := newHarness(t)
	s := h.stream("s", 2)
	c := meta.CommitWal{Object: "wal/a", CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 3, 0, 9), chunk(s.ID, 1, 1, 9, 9)}}
	first, err := h.commit(t0, c)
	if err != nil {
		t.Fatal(err)
	}
	// Another commit moves the offsets on.
	if _, err := h.commit(t0, meta.CommitWal{Object: "wal/b", CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 1, 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	nev := len(h.events)
	// A retry 20 minutes later answers the first commit's offsets, changes nothing.
	dup, err := h.commit(t0+20*60_000, c)
	if err != nil || !dup.Duplicate || !reflect.DeepEqual(dup.BaseOffsets, first.BaseOffsets) || dup.AppliedIndex != first.AppliedIndex {
		t.Fatalf("retry: %+v %v (first %+v)", dup, err, first)
	}
	if len(h.events) != nev {
		t.Fatal("a duplicate published an event")
	}
	_, parts, _ := h.f.GetStream("default", "s")
	if parts[0].HighWatermark != 4 || parts[1].HighWatermark != 1 {
		t.Fatalf("duplicate changed state: %+v", parts)
	}
	// A new object created 15 min + 1 ms before the metastore clock is stale.
	clock := t0 + 20*60_000
	_, err = h.commit(clock, meta.CommitWal{Object: "wal/c", CreatedMs: clock - 15*60_000 - 1, Chunks: c.Chunks})
	if !errors.Is(err, meta.ErrStaleCommit) {
		t.Fatalf("stale: %v", err)
	}
	// Exactly 15 min old is still accepted.
	if _, err = h.commit(clock, meta.CommitWal{Object: "wal/d", CreatedMs: clock - 15*60_000, Chunks: c.Chunks}); err != nil {
		t.Fatalf("15 min old: %v", err)
	}
	// After the dedupe window the record is gone and the old object is stale.
	_, err = h.commit(t0+31*60_000, c)
	if !errors.Is(err, meta.ErrStaleCommit) {
		t.Fatalf("retry after window: %v", err)
	}
	if n := countBucket(t, h.f, bDedupe); n != 1 { // only wal/d (clock-15min) survives... see below
		t.Fatalf("dedupe records after pruning: %d", n)
	}
	if n := countBucket(t, h.f, bDedupeT); n != 1 {
		t.Fatalf("dedupe time records after pruning: %d", n)
	}
}

func countBucket(t *testing.T, f *FSM, name []byte) int {
	t.Helper()
	var n int
	if err := f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(name).ForEach(func(_, _ []byte) error { n++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}
