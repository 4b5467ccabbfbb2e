package reader

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// headReader returns a reader over partition 0 of stream 1 holding one WAL chunk of
// offsets [0, 10), and the means to append more.
func headReader(t *testing.T, cfg Config) (*Reader, *fakeMeta, objstore.Bucket) {
	t.Helper()
	mem := objstore.NewMem()
	idx := newFakeMeta()
	idx.add(1, 0, putWAL(t, mem, "wal/standard/w/0.wal", map[int32]int64{0: 0}, 1, 10)[0])
	cfg.Bucket, cfg.Meta = mem, idx
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, idx, mem
}

// TestLongPollWakesOnLocalCommit: a poll at the head answers with a chunk this node
// committed, from the tail cache.
func TestLongPollWakesOnLocalCommit(t *testing.T) {
	r, idx, _ := headReader(t, Config{})
	poll := goFetch(context.Background(), r, 0, 10, time.Minute)
	quiet(t, poll, "poll at the head")
	before := idx.lookupCount()
	e := meta.IndexEntry{BaseOffset: 10, Count: 10, Kind: meta.KindWAL, Object: "wal/standard/w/1.wal"} // never read: served from the tail
	var data []byte
	for _, b := range batches(t, 10, 2, 5) {
		data = append(data, b...)
	}
	r.Committed(1, 0, e, data)
	a := await(t, poll, "poll after a local commit")
	if a.err != nil {
		t.Fatal(a.err)
	}
	checkFrom(t, a.res, 10, 10)
	if a.res.HighWatermark != 20 || a.res.NextOffset != 20 {
		t.Fatalf("next %d hwm %d, want 20 and 20", a.res.NextOffset, a.res.HighWatermark)
	}
	if n := idx.lookupCount() - before; n != 0 {
		t.Fatalf("%d lookups to serve a local commit, want 0", n)
	}
}

// TestLongPollWakesOnWatchEvent: a poll at the head answers with what a watch event adds.
func TestLongPollWakesOnWatchEvent(t *testing.T) {
	r, idx, mem := headReader(t, Config{})
	poll := goFetch(context.Background(), r, 0, 10, time.Minute)
	quiet(t, poll, "poll at the head")
	e := putWAL(t, mem, "wal/standard/w/1.wal", map[int32]int64{0: 10}, 2, 5)[0]
	idx.add(1, 0, e)
	r.Apply(meta.Event{Partitions: []meta.PartitionUpdate{{StreamID: 1, Partition: 0, HighWatermark: 20, Added: []meta.IndexEntry{e}}}})
	a := await(t, poll, "poll after a watch event")
	if a.err != nil {
		t.Fatal(a.err)
	}
	checkFrom(t, a.res, 10, 10)
}

// TestLongPollTimeout: a poll at the head with nothing new answers empty once its wait
// is over, not before.
func TestLongPollTimeout(t *testing.T) {
	r, _, _ := headReader(t, Config{})
	t0 := time.Now()
	res, err := r.Fetch(context.Background(), 1, 0, 10, 1<<20, 100*time.Millisecond)
	if d := time.Since(t0); err != nil || len(res.Batches) != 0 || res.NextOffset != 10 || res.HighWatermark != 10 || d < 90*time.Millisecond {
		t.Fatalf("poll: %+v %v after %v", res, err, d)
	}
}

// TestLongPollCancel: a waiter whose context ends leaves; the others on the partition
// keep waiting and get the next records.
func TestLongPollCancel(t *testing.T) {
	r, _, _ := headReader(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	gone := goFetch(ctx, r, 0, 10, time.Minute)
	stays := goFetch(context.Background(), r, 0, 10, time.Minute)
	quiet(t, gone, "poll")
	cancel()
	if a := await(t, gone, "cancelled poll"); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("cancelled poll: %+v %v", a.res, a.err)
	}
	quiet(t, stays, "the other poll")
	var data []byte
	for _, b := range batches(t, 10, 1, 5) {
		data = append(data, b...)
	}
	r.Committed(1, 0, meta.IndexEntry{BaseOffset: 10, Count: 5, Kind: meta.KindWAL, Object: "x"}, data)
	if a := await(t, stays, "the other poll"); a.err != nil {
		t.Fatal(a.err)
	} else {
		checkFrom(t, a.res, 10, 5)
	}
}

// TestLongPollSurvivesEviction: a waiting partition dropped from the partition map (more
// partitions fetched than MaxPartitions) is looked up again by its waiter, which keeps
// waiting and is woken by the partition's next event.
func TestLongPollSurvivesEviction(t *testing.T) {
	r, idx, mem := headReader(t, Config{MaxPartitions: 1})
	idx.add(1, 1, putWAL(t, mem, "wal/standard/w/p1.wal", map[int32]int64{1: 0}, 1, 3)[1])
	ctx := context.Background()
	poll := goFetch(ctx, r, 0, 10, time.Minute)
	quiet(t, poll, "poll")
	before := idx.lookupCount()
	if _, err := r.Fetch(ctx, 1, 1, 0, 1<<20, 0); err != nil { // evicts partition 0
		t.Fatal(err)
	}
	quiet(t, poll, "poll of an evicted partition")
	if idx.lookupCount()-before < 3 { // partition 1's bounds and entry, then partition 0's bounds again
		t.Fatalf("%d lookups: the evicted partition's waiter did not look it up again", idx.lookupCount()-before)
	}
	r.mu.Lock()
	n := len(r.parts)
	r.mu.Unlock()
	if n > 1 {
		t.Fatalf("%d partitions tracked, MaxPartitions 1", n)
	}
	e := putWAL(t, mem, "wal/standard/w/1.wal", map[int32]int64{0: 10}, 1, 5)[0]
	idx.add(1, 0, e)
	r.Apply(meta.Event{Partitions: []meta.PartitionUpdate{{StreamID: 1, Partition: 0, HighWatermark: 15, Added: []meta.IndexEntry{e}}}})
	a := await(t, poll, "poll after the event")
	if a.err != nil {
		t.Fatal(a.err)
	}
	checkFrom(t, a.res, 10, 5)
}

// TestWatchReset: a Reset wakes every waiter, which resolves its partition again from the
// sequencer; the tail cache and the cached entries are dropped.
func TestWatchReset(t *testing.T) {
	r, idx, mem := headReader(t, Config{})
	ctx := context.Background()
	if _, err := r.Fetch(ctx, 1, 0, 0, 1<<20, 0); err != nil { // caches the run
		t.Fatal(err)
	}
	var data []byte
	for _, b := range batches(t, 10, 1, 5) {
		data = append(data, b...)
	}
	e1 := putWAL(t, mem, "wal/standard/w/1.wal", map[int32]int64{0: 10}, 1, 5)[0]
	idx.add(1, 0, e1)
	r.Committed(1, 0, e1, data)
	poll := goFetch(ctx, r, 0, 15, time.Minute)
	quiet(t, poll, "poll")
	r.mu.Lock()
	runs, idxBytes := r.runs.Len(), r.indexBytes
	r.mu.Unlock()
	if runs != 1 || idxBytes == 0 || r.tail.size() == 0 {
		t.Fatalf("before the reset: %d runs, %d index bytes, %d tail bytes", runs, idxBytes, r.tail.size())
	}
	// Events were missed: the partition moved on meanwhile.
	e2 := putWAL(t, mem, "wal/standard/w/2.wal", map[int32]int64{0: 15}, 1, 5)[0]
	idx.add(1, 0, e2)
	r.Apply(meta.Event{Reset: true})
	// The waiter may have looked its offset up again already: only what it found since
	// (offsets from 15) may be cached.
	r.mu.Lock()
	var kept []meta.IndexEntry
	if p := r.parts[pkey{1, 0}]; p != nil {
		kept = p.entries
	}
	r.mu.Unlock()
	if len(kept) > 0 && kept[0].BaseOffset < 15 || r.tail.size() != 0 {
		t.Fatalf("after the reset: cached entries %+v, %d tail bytes; want none before offset 15, 0", kept, r.tail.size())
	}
	a := await(t, poll, "poll after a reset")
	if a.err != nil {
		t.Fatal(a.err)
	}
	checkFrom(t, a.res, 15, 5)
	// The offsets the tail held are read again, through a new lookup.
	before := idx.lookupCount()
	res, err := r.Fetch(ctx, 1, 0, 10, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkFrom(t, res, 10, 10)
	if idx.lookupCount() == before {
		t.Fatal("served offsets after a reset without looking them up again")
	}
}

// TestIndexGap: an Added run that does not join the cached one (events were lost) drops
// the cached run; offsets in the gap are looked up again.
func TestIndexGap(t *testing.T) {
	r, idx, mem := headReader(t, Config{})
	ctx := context.Background()
	if _, err := r.Fetch(ctx, 1, 0, 0, 1<<20, 0); err != nil {
		t.Fatal(err)
	}
	e1 := putWAL(t, mem, "wal/standard/w/1.wal", map[int32]int64{0: 10}, 1, 5)[0]
	e2 := putWAL(t, mem, "wal/standard/w/2.wal", map[int32]int64{0: 15}, 1, 5)[0]
	idx.add(1, 0, e1, e2)
	// The event of e1 is lost; e2's arrives.
	r.Apply(meta.Event{Partitions: []meta.PartitionUpdate{{StreamID: 1, Partition: 0, HighWatermark: 20, Added: []meta.IndexEntry{e2}}}})
	r.mu.Lock()
	n := len(r.parts[pkey{1, 0}].entries)
	r.mu.Unlock()
	if n != 0 {
		t.Fatalf("the cached run kept %d entries across a gap", n)
	}
	before := idx.lookupCount()
	res, err := r.Fetch(ctx, 1, 0, 12, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkFrom(t, res, 12, 8)
	if idx.lookupCount() == before {
		t.Fatal("offsets in the gap were served without a lookup")
	}
	// The run looked up reaches the head: it is kept, and the next offsets come from it.
	before = idx.lookupCount()
	if _, err := r.Fetch(ctx, 1, 0, 0, 1<<20, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Fetch(ctx, 1, 0, 16, 1<<20, 0); err != nil {
		t.Fatal(err)
	}
	if n := idx.lookupCount() - before; n != 1 {
		t.Fatalf("%d lookups, want 1 (offset 0 is before the kept run)", n)
	}
}

// TestUntrackedPartitionsCostNothing: watch events for partitions nobody fetches here
// allocate nothing and leave nothing behind.
func TestUntrackedPartitionsCostNothing(t *testing.T) {
	r, _, _ := headReader(t, Config{})
	evs := make([]meta.Event, 10000)
	for i := range evs {
		p := int32(i)
		evs[i] = meta.Event{Partitions: []meta.PartitionUpdate{{StreamID: 7, Partition: p, HighWatermark: 10,
			Added: []meta.IndexEntry{{BaseOffset: 0, Count: 10, Kind: meta.KindWAL, Object: fmt.Sprintf("wal/standard/w/%d.wal", i)}}}}}
	}
	i := 0
	allocs := testing.AllocsPerRun(len(evs)-1, func() {
		r.Apply(evs[i])
		i++
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per watch event of an untracked partition, want 0", allocs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.parts) != 0 || r.runs.Len() != 0 {
		t.Fatalf("%d partitions and %d runs tracked after events of untracked partitions", len(r.parts), r.runs.Len())
	}
}

// TestIndexBudget: the cached entries of many tracked partitions stay within
// IndexCacheBytes, the least recently used dropped first, and the partition map within
// MaxPartitions.
func TestIndexBudget(t *testing.T) {
	const budget = 64 << 10
	r, err := New(Config{Bucket: objstore.NewMem(), Meta: newFakeMeta(), IndexCacheBytes: budget, MaxPartitions: 300})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for p := range int32(500) {
		if _, err := r.Fetch(ctx, 1, p, 0, 1<<20, 0); err != nil { // tracks it at offset 0
			t.Fatal(err)
		}
		for i := range int64(20) {
			r.Apply(meta.Event{Partitions: []meta.PartitionUpdate{{StreamID: 1, Partition: p, HighWatermark: 10 * (i + 1),
				Added: []meta.IndexEntry{{BaseOffset: 10 * i, Count: 10, Kind: meta.KindWAL, Object: fmt.Sprintf("wal/standard/w/%d-%d.wal", p, i)}}}}})
		}
		r.mu.Lock()
		used, n := r.indexBytes, len(r.parts)
		var sum int64
		for el := r.runs.Front(); el != nil; el = el.Next() {
			sum += el.Value.(*partition).cost()
		}
		r.mu.Unlock()
		if used > budget || sum != used {
			t.Fatalf("after %d partitions: index cache accounts %d bytes, its runs cost %d, budget %d", p+1, used, sum, budget)
		}
		if n > 300 {
			t.Fatalf("%d partitions tracked, MaxPartitions 300", n)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if last := r.parts[pkey{1, 499}]; last == nil || len(last.entries) != 20 {
		t.Fatal("the partition used last lost its entries")
	}
	if first := r.parts[pkey{1, 0}]; first != nil {
		t.Fatal("the partition used first is still tracked")
	}
}

// TestLoadSeesConcurrentEvents: a watch event applied while a partition's bounds are being
// looked up is not lost when the lookup answers with older bounds.
func TestLoadSeesConcurrentEvents(t *testing.T) {
	r, idx, _ := headReader(t, Config{})
	idx.mu.Lock()
	idx.gate, idx.inLookup = make(chan struct{}), make(chan struct{}, 1)
	gate := idx.gate
	idx.mu.Unlock()
	poll := goFetch(context.Background(), r, 0, 10, time.Minute)
	<-idx.inLookup // the lookup has read the index: high watermark 10
	var data []byte
	for _, b := range batches(t, 10, 1, 5) {
		data = append(data, b...)
	}
	e := meta.IndexEntry{BaseOffset: 10, Count: 5, Kind: meta.KindWAL, Object: "x"}
	r.Committed(1, 0, e, data)
	r.Apply(meta.Event{Partitions: []meta.PartitionUpdate{{StreamID: 1, Partition: 0, HighWatermark: 15, Added: []meta.IndexEntry{e}}}})
	idx.mu.Lock()
	idx.gate, idx.inLookup = nil, nil
	idx.mu.Unlock()
	close(gate)
	a := await(t, poll, "poll")
	if a.err != nil {
		t.Fatal(a.err)
	}
	checkFrom(t, a.res, 10, 5)
}
