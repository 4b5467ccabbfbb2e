package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
)

func TestCheckSwap(t *testing.T) {
	l := meta.Lease{StreamID: 1, Partition: 0, Kind: meta.LeaseSegment, Holder: "h", Epoch: 1}
	w := func(base, count int64, obj string) meta.IndexEntry {
		return meta.IndexEntry{BaseOffset: base, Count: count, Kind: meta.KindWAL, Object: obj, Offset: 0, Length: 10}
	}
	sg := func(base, count int64, obj string) meta.IndexEntry {
		e := w(base, count, obj)
		e.Kind = meta.KindSegment
		return e
	}
	many := make([]meta.IndexEntry, meta.MaxSwapEntries+1)
	for i := range many {
		many[i] = w(int64(i), 1, "o")
	}
	noLease := l
	noLease.Holder = ""
	for _, tc := range []struct {
		name string
		s    meta.IndexSwap
		ok   bool
	}{
		{"one for two", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(5, 2, "a"), w(7, 3, "b")}, New: []meta.IndexEntry{sg(5, 5, "s")}}, true},
		{"two for one", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{sg(0, 10, "s")}, New: []meta.IndexEntry{sg(0, 4, "s1"), sg(4, 6, "s2")}}, true},
		{"no old", meta.IndexSwap{Lease: l, New: []meta.IndexEntry{sg(0, 1, "s")}}, false},
		{"no new", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(0, 1, "a")}}, false},
		{"too many", meta.IndexSwap{Lease: l, Old: many, New: []meta.IndexEntry{sg(0, int64(len(many)), "s")}}, false},
		{"old gap", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(0, 2, "a"), w(3, 1, "b")}, New: []meta.IndexEntry{sg(0, 4, "s")}}, false},
		{"old overlap", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(0, 2, "a"), w(1, 3, "b")}, New: []meta.IndexEntry{sg(0, 4, "s")}}, false},
		{"new gap", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(0, 4, "a")}, New: []meta.IndexEntry{sg(0, 1, "s"), sg(2, 2, "t")}}, false},
		{"new short", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(0, 4, "a")}, New: []meta.IndexEntry{sg(0, 3, "s")}}, false},
		{"new long", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(0, 4, "a")}, New: []meta.IndexEntry{sg(0, 5, "s")}}, false},
		{"new shifted", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(0, 4, "a")}, New: []meta.IndexEntry{sg(1, 4, "s")}}, false},
		{"new of kind wal", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(0, 4, "a")}, New: []meta.IndexEntry{w(0, 4, "s")}}, false},
		{"zero count", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(0, 0, "a"), w(0, 4, "a")}, New: []meta.IndexEntry{sg(0, 4, "s")}}, false},
		{"no object", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(0, 4, "")}, New: []meta.IndexEntry{sg(0, 4, "s")}}, false},
		{"negative base", meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{w(-1, 4, "a")}, New: []meta.IndexEntry{sg(-1, 4, "s")}}, false},
		{"no holder", meta.IndexSwap{Lease: noLease, Old: []meta.IndexEntry{w(0, 4, "a")}, New: []meta.IndexEntry{sg(0, 4, "s")}}, false},
	} {
		err := CheckSwap(tc.s)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, meta.ErrInvalidArgument)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestDeletesInOneBatch: deletes that follow writes to the same bbolt leaf in one batch
// (bbolt's Cursor.Delete + Next skips a key on a leaf already changed in the
// transaction) still drop every entry and reference.
func TestDeletesInOneBatch(t *testing.T) {
	h := newHarness(t)
	a := h.stream("a", 2)
	b := h.stream("b", 1)
	var batch []*raft.Log
	for i := range 300 {
		batch = append(batch, h.entry(t0, CommitWal(meta.CommitWal{Object: fmt.Sprintf("wal/%03d", i), CreatedMs: t0,
			Chunks: []meta.Chunk{chunk(a.ID, 0, 1, 0, 10), chunk(a.ID, 1, 1, 10, 10), chunk(b.ID, 0, 2, 20, 10)}})))
	}
	batch = append(batch, h.entry(t0, TrimPartition(b.ID, 0, 400)), h.entry(t0, DeleteStream("default", "a")))
	for i, r := range h.f.ApplyBatch(batch) {
		if err := r.(*Result).Err; err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if n := countEntries(t, h.f); n != 100 {
		t.Fatalf("%d index entries left, want 100 (b's above 400)", n)
	}
	checkRefs(t, h.f)
	rs, err := h.f.ListRetired("", 0)
	if err != nil || len(rs) != 200 || rs[0].Key != "wal/000" || rs[199].Key != "wal/199" {
		t.Fatalf("retired %d %v", len(rs), err)
	}
}

// allEntries returns every partition's index entries (from its log start), by partition
// key.
func allEntries(t *testing.T, f *FSM) map[string][]meta.IndexEntry {
	t.Helper()
	out := map[string][]meta.IndexEntry{}
	var parts []meta.PartitionState
	err := f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bGroups).ForEach(func(k, v []byte) error {
			var err error
			parts, err = groupStates(k, v, parts)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range parts {
		es, _, err := f.Lookup(st.StreamID, st.Partition, st.LogStart, MaxLookup)
		if err != nil {
			t.Fatal(err)
		}
		out[string(partKey(st.StreamID, st.Partition))] = es
	}
	return out
}

func countEntries(t *testing.T, f *FSM) int {
	n := 0
	for _, es := range allEntries(t, f) {
		n += len(es)
	}
	return n
}

// checkRefs checks the reference counts against the index: one reference per entry, no
// count without an entry, and no retired object that is referenced.
func checkRefs(t *testing.T, f *FSM) {
	t.Helper()
	want := map[string]uint64{}
	got := map[string]uint64{}
	for _, es := range allEntries(t, f) {
		for _, e := range es {
			want[e.Object]++
		}
	}
	err := f.view(func(tx *bolt.Tx) error {
		refs := tx.Bucket(bRefs)
		if err := refs.ForEach(func(k, v []byte) error {
			got[string(k)] = getU64(refs, k)
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bRetired).ForEach(func(k, v []byte) error {
			if want[string(k)] > 0 {
				return fmt.Errorf("retired object %s has %d references", k, want[string(k)])
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reference counts %v, index says %v", got, want)
	}
}

// checkNoLeak checks that every object wal/0001 .. wal/<n> of randomHistory that exists
// (commits and swaps share the numbering) is referenced or retired: an object whose chunks
// were all refused is retired at once, so GC deletes it.
func checkNoLeak(t *testing.T, f *FSM, n int) {
	t.Helper()
	err := f.view(func(tx *bolt.Tx) error {
		for i := 1; i <= n; i++ {
			k := []byte(fmt.Sprintf("wal/%04d", i))
			if tx.Bucket(bDedupe).Get(k) == nil {
				continue // a swap's number
			}
			if tx.Bucket(bRefs).Get(k) == nil && tx.Bucket(bRetired).Get(k) == nil {
				return fmt.Errorf("object %s is neither referenced nor retired", k)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRandomHistoryKeepsRefs applies a random mix of commits (some chunks refused), swaps (under leases, some
// stale), trims and stream deletions and checks after each batch that reference counts
// match the index, the index stays dense from the log start to the high watermark, and
// partition bytes add up.
func TestRandomHistoryKeepsRefs(t *testing.T) {
	for _, layout := range []struct {
		block  int
		settle uint64
	}{{blockEntries, settleCommits}, {2, 3}, {3, 1}, {8, 16}} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("block=%d/settle=%d/%d", layout.block, layout.settle, seed), func(t *testing.T) {
				defer func(b int, s uint64) { blockEntries, settleCommits = b, s }(blockEntries, settleCommits)
				blockEntries, settleCommits = layout.block, layout.settle
				randomHistory(t, seed)
			})
		}
	}
}

func randomHistory(t *testing.T, seed uint64) {
	{
		{
			rng := rand.New(rand.NewPCG(seed, 7))
			h := newHarness(t)
			var streams []meta.Stream
			names := 0
			newStream := func() {
				names++
				streams = append(streams, h.stream(fmt.Sprint("s", names), 3))
			}
			newStream()
			newStream()
			now := t0
			objs := 0
			var batch []*raft.Log
			// flush applies the batch so far: reads and commands applied at once (lease
			// grants) must come after it.
			flush := func() {
				if len(batch) > 0 {
					h.f.ApplyBatch(batch)
					batch = nil
				}
			}
			for step := range 60 {
				for range 1 + rng.IntN(6) {
					now += int64(rng.IntN(20_000))
					live := streams[rng.IntN(len(streams))]
					p := int32(rng.IntN(3))
					switch r := rng.IntN(10); {
					case r < 5:
						objs++
						var chunks []meta.Chunk
						for i := range 1 + rng.IntN(4) {
							id, part := streams[rng.IntN(len(streams))].ID, int32(rng.IntN(3))
							switch rng.IntN(10) { // a chunk refused alone: a missing partition or a deleted stream
							case 0:
								part = 3
							case 1:
								id = streams[0].ID - 1
							}
							chunks = append(chunks, chunk(id, part, 1+int64(rng.IntN(5)), int64(i)*100, 100))
						}
						batch = append(batch, h.entry(now, CommitWal(meta.CommitWal{Object: fmt.Sprintf("wal/%04d", objs), CreatedMs: now, Chunks: chunks})))
					case r < 8:
						flush()
						_, st, err := h.f.Lookup(live.ID, p, 0, 0)
						if err != nil {
							t.Fatal(err)
						}
						es, _, err := h.f.Lookup(live.ID, p, st.LogStart, MaxLookup)
						if err != nil {
							t.Fatal(err)
						}
						if len(es) == 0 {
							continue
						}
						i := rng.IntN(len(es))
						j := i + 1 + rng.IntN(len(es)-i)
						old := es[i:j]
						objs++
						var n []meta.IndexEntry
						for base := old[0].BaseOffset; base < old[len(old)-1].End(); {
							cnt := min(old[len(old)-1].End()-base, 1+int64(rng.IntN(8)))
							n = append(n, meta.IndexEntry{BaseOffset: base, Count: cnt, Kind: meta.KindSegment, Object: fmt.Sprintf("seg/%04d", objs), Offset: base, Length: 7})
							base += cnt
						}
						holder := fmt.Sprint("h", rng.IntN(2))
						l := h.apply(now, AcquireLease(live.ID, p, meta.LeaseSegment, holder, 30_000))
						if rng.IntN(4) == 0 {
							l.Lease.Epoch-- // a stale grant: refused
						}
						if rng.IntN(4) == 0 {
							// Another change first: the swap is refused (index changed).
							batch = append(batch, h.entry(now, TrimPartition(live.ID, p, old[0].End())))
						}
						batch = append(batch, h.entry(now, SwapIndex(meta.IndexSwap{Lease: l.Lease, Old: old, New: n})))
					case r < 9:
						flush()
						_, st, err := h.f.Lookup(live.ID, p, 0, 0)
						if err != nil {
							t.Fatal(err)
						}
						batch = append(batch, h.entry(now, TrimPartition(live.ID, p, st.LogStart+int64(rng.IntN(int(st.HighWatermark-st.LogStart)+2)))))
					default:
						i := rng.IntN(len(streams))
						batch = append(batch, h.entry(now, DeleteStream("default", streams[i].Name)))
						streams = slices.Delete(streams, i, i+1)
						flush()
						newStream()
					}
				}
				flush()
				checkRefs(t, h.f)
				checkTails(t, h.f)
				checkNoLeak(t, h.f, objs)
				if step%10 == 9 { // reopened, the pending entries are read back from the bucket
					before := logicalState(t, h.f)
					if err := h.f.Close(); err != nil {
						t.Fatal(err)
					}
					f, err := Open(h.f.path, h.f.opts)
					if err != nil {
						t.Fatal(err)
					}
					h.f = f
					t.Cleanup(func() { f.Close() })
					if after := logicalState(t, h.f); after != before {
						t.Fatalf("step %d: state after reopening differs:\n%s\nwant\n%s", step, after, before)
					}
				}
				for _, s := range streams {
					_, parts, err := h.f.GetStream("default", s.Name)
					if err != nil {
						t.Fatal(err)
					}
					for _, ps := range parts {
						es, _, err := h.f.Lookup(s.ID, ps.Partition, ps.LogStart, MaxLookup)
						if err != nil {
							t.Fatalf("step %d: %v", step, err)
						}
						next, bytes := ps.HighWatermark, int64(0)
						if len(es) > 0 {
							next = es[0].BaseOffset
						}
						if next > ps.LogStart || (len(es) > 0 && es[0].End() <= ps.LogStart) {
							t.Fatalf("step %d: %d/%d log start %d, first entry %+v", step, s.ID, ps.Partition, ps.LogStart, es[0])
						}
						for _, e := range es {
							if e.BaseOffset != next {
								t.Fatalf("step %d: %d/%d index not dense at %d: %+v", step, s.ID, ps.Partition, next, es)
							}
							next = e.End()
							bytes += e.Length
						}
						if next != ps.HighWatermark || bytes != ps.Bytes {
							t.Fatalf("step %d: %d/%d entries end at %d, %d bytes; state %+v", step, s.ID, ps.Partition, next, bytes, ps)
						}
					}
				}
			}
		}
	}
}

// v2History builds a state with every v2 record: leases (live, released), segments
// swapped in, a trimmed partition, retired and forgotten objects.
func v2History(h *harness) {
	h.apply(t0, CreateNamespace("team-a"))
	s := h.stream("orders", 2)
	h.apply(t0, RegisterNode("seq-1", "127.0.0.1:7070"))
	for i, obj := range []string{"wal/a", "wal/b", "wal/c"} {
		h.apply(t0+int64(i)*1000, CommitWal(meta.CommitWal{Object: obj, CreatedMs: t0,
			Chunks: []meta.Chunk{chunk(s.ID, 0, 5, 0, 100), chunk(s.ID, 1, 2, 100, 10)}}))
	}
	l := h.apply(t0+3000, AcquireLease(s.ID, 0, meta.LeaseSegment, "segmenter-1", 60_000)).Lease
	h.apply(t0+3000, SwapIndex(meta.IndexSwap{Lease: l,
		Old: []meta.IndexEntry{
			{BaseOffset: 0, Count: 5, Kind: meta.KindWAL, Object: "wal/a", Offset: 0, Length: 100},
			{BaseOffset: 5, Count: 5, Kind: meta.KindWAL, Object: "wal/b", Offset: 0, Length: 100}},
		New: []meta.IndexEntry{{BaseOffset: 0, Count: 10, Kind: meta.KindSegment, Object: "seg/1/0/0-01.seg", Offset: 0, Length: 150, MaxTimestamp: t0 + 100}}}))
	h.apply(t0+3000, ReleaseLease(l))
	h.apply(t0+4000, AcquireLease(s.ID, 1, meta.LeaseCompact, "compactor-1", 60_000))
	h.apply(t0+5000, TrimPartition(s.ID, 1, 4)) // drops wal/a's and wal/b's chunks: both retired
	h.apply(t0+6000, ForgetRetired([]string{"wal/a"}))
}

func TestSnapshotRoundTripV2(t *testing.T) {
	h := newHarness(t)
	v2History(h)
	var buf bytes.Buffer
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(&memSink{Buffer: &buf}); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	g, err := Open(filepath.Join(t.TempDir(), "other.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Restore(nopCloser{bytes.NewReader(buf.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if dumpState(t, g) != dumpState(t, h.f) {
		t.Fatalf("restored state differs:\n%s\nwant:\n%s", dumpState(t, g), dumpState(t, h.f))
	}
	checkV2State(t, g)
}

// checkV2State checks the state v2History builds, through the read API.
func checkV2State(t *testing.T, f *FSM) {
	t.Helper()
	es, st, err := f.Lookup(1, 0, 0, MaxLookup)
	if err != nil || len(es) != 2 || es[0].Object != "seg/1/0/0-01.seg" || es[0].Kind != meta.KindSegment || es[1].Object != "wal/c" || st.Bytes != 250 {
		t.Fatalf("partition 0: %+v %+v %v", es, st, err)
	}
	_, st, err = f.Lookup(1, 1, 4, 0)
	if err != nil || st.LogStart != 4 || st.Bytes != 10 {
		t.Fatalf("partition 1: %+v %v", st, err)
	}
	rs, err := f.ListRetired("", 0)
	if err != nil || len(rs) != 1 || rs[0] != (meta.RetiredObject{Key: "wal/b", RetiredMs: t0 + 5000}) {
		t.Fatalf("retired %+v %v", rs, err)
	}
	refd, _ := f.Referenced([]string{"wal/a", "wal/b", "wal/c", "seg/1/0/0-01.seg"})
	if !slices.Equal(refd, []bool{false, false, true, true}) || f.RefCount("wal/c") != 2 {
		t.Fatalf("referenced %v, wal/c count %d", refd, f.RefCount("wal/c"))
	}
	l, ok, err := f.Lease(1, 0, meta.LeaseSegment)
	if err != nil || !ok || l.Epoch != 1 || l.ExpiresMs != 0 || l.Holder != "segmenter-1" {
		t.Fatalf("released lease %+v %v %v", l, ok, err)
	}
	l, ok, err = f.Lease(1, 1, meta.LeaseCompact)
	if err != nil || !ok || l.Epoch != 1 || l.ExpiresMs != t0+64_000 || l.Holder != "compactor-1" {
		t.Fatalf("live lease %+v %v %v", l, ok, err)
	}
}

// TestV1Migration: a v1 database (the v1 golden snapshot) opens as the current format with reference
// counts computed from its index, and takes the new commands.
func TestV1Migration(t *testing.T) {
	f := restoreGolden(t, "testdata/v1/state.snap")
	checkRefs(t, f)
	if f.RefCount("wal/a") != 2 || f.RefCount("wal/c") != 2 {
		t.Fatalf("migrated counts: wal/a %d wal/c %d", f.RefCount("wal/a"), f.RefCount("wal/c"))
	}
	err := f.view(func(tx *bolt.Tx) error {
		if got := string(tx.Bucket(bMeta).Get(kFormat)); got != formatV4 {
			return fmt.Errorf("format %q", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	idx := f.AppliedIndex()
	apply := func(cmd *metapb.Command) *Result {
		idx++
		cmd.StampMs = t0 + 10_000
		b, _ := Encode(cmd)
		return f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: b}).(*Result)
	}
	r := apply(AcquireLease(1, 0, meta.LeaseSegment, "h", 1000))
	if r.Err != nil || r.Lease.Epoch != 1 {
		t.Fatalf("%+v", r)
	}
	// Partition 0 holds wal/a [0,5) [5,7), wal/b [7,9), wal/c [9,11); wal/b and wal/c also
	// hold a chunk of partitions 1 and 2.
	es, _, _ := f.Lookup(1, 0, 0, 3)
	r = apply(SwapIndex(meta.IndexSwap{Lease: r.Lease, Old: es,
		New: []meta.IndexEntry{{BaseOffset: 0, Count: es[2].End(), Kind: meta.KindSegment, Object: "seg/x", Length: 1}}}))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	checkRefs(t, f)
	if rs, _ := f.ListRetired("", 0); len(rs) != 1 || rs[0] != (meta.RetiredObject{Key: "wal/a", RetiredMs: t0 + 10_000}) {
		t.Fatalf("retired %+v", rs)
	}
}

func restoreGolden(t *testing.T, path string) *FSM {
	t.Helper()
	f, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(nopCloser{bytes.NewReader(b)}); err != nil {
		t.Fatal(err)
	}
	return f
}

// FuzzApplyCommand applies an arbitrary command to a small state (two partitions with WAL
// and segment entries, a live lease): it never panics, and afterwards reference counts
// still match the index.
func FuzzApplyCommand(f *testing.F) {
	seed := func(cmd *metapb.Command) {
		cmd.StampMs = t0 + 1000
		b, _ := Encode(cmd)
		f.Add(b)
	}
	l := meta.Lease{StreamID: 1, Partition: 0, Kind: meta.LeaseSegment, Holder: "h", Epoch: 1}
	seed(SwapIndex(meta.IndexSwap{Lease: l,
		Old: []meta.IndexEntry{{BaseOffset: 0, Count: 5, Kind: meta.KindWAL, Object: "wal/a", Offset: 0, Length: 100}},
		New: []meta.IndexEntry{{BaseOffset: 0, Count: 5, Kind: meta.KindSegment, Object: "seg/x", Length: 9}}}))
	seed(SwapIndex(meta.IndexSwap{Lease: l,
		Old: []meta.IndexEntry{{BaseOffset: 5, Count: 5, Kind: meta.KindSegment, Object: "seg/s", Offset: 0, Length: 50}},
		New: []meta.IndexEntry{{BaseOffset: 5, Count: 2, Kind: meta.KindSegment, Object: "wal/a", Length: 9}, {BaseOffset: 7, Count: 3, Kind: meta.KindSegment, Object: "seg/s", Length: 9}}}))
	seed(TrimPartition(1, 0, 7))
	seed(TrimPartition(1, 1, 100))
	seed(DeleteStream("default", "s"))
	seed(AcquireLease(1, 1, "compact", "h2", 5000))
	seed(ReleaseLease(l))
	seed(ForgetRetired([]string{"wal/a", ""}))
	seed(CommitWal(meta.CommitWal{Object: "wal/a", CreatedMs: t0, Chunks: []meta.Chunk{chunk(1, 1, 3, 0, 10)}}))
	seed(CommitWalBatch([]meta.CommitWal{{Object: "wal/n", CreatedMs: t0, Chunks: []meta.Chunk{chunk(1, 1, 3, 0, 10)}},
		{Object: "wal/n", CreatedMs: t0, Chunks: []meta.Chunk{chunk(1, 0, 1, 0, 10)}}, {Object: "wal/m", CreatedMs: t0, Chunks: []meta.Chunk{chunk(1, 9, 1, 0, 10)}}}))
	seed(CommitWal(meta.CommitWal{Object: "wal/r", CreatedMs: t0, Chunks: []meta.Chunk{chunk(1, 0, 1, 0, 10), chunk(1, 5, 1, 10, 10), chunk(7, 0, 1, 20, 10)}}))
	seed(CommitWal(meta.CommitWal{Object: "wal/q", CreatedMs: t0, Chunks: []meta.Chunk{chunk(7, 0, 1, 0, 10), chunk(1, 2, 1, 10, 10)}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h := newHarness(t)
		s := h.stream("s", 2)
		h.apply(t0, CommitWal(meta.CommitWal{Object: "wal/a", CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 5, 0, 100), chunk(s.ID, 1, 5, 100, 100)}}))
		h.apply(t0, CommitWal(meta.CommitWal{Object: "wal/b", CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 5, 0, 50)}}))
		lr := h.apply(t0, AcquireLease(s.ID, 0, meta.LeaseSegment, "h", 60_000))
		h.apply(t0, SwapIndex(meta.IndexSwap{Lease: lr.Lease,
			Old: []meta.IndexEntry{{BaseOffset: 5, Count: 5, Kind: meta.KindWAL, Object: "wal/b", Offset: 0, Length: 50}},
			New: []meta.IndexEntry{{BaseOffset: 5, Count: 5, Kind: meta.KindSegment, Object: "seg/s", Offset: 0, Length: 50}}}))
		h.index++
		r, _ := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: b}).(*Result)
		if r == nil {
			t.Fatal("no result")
		}
		checkRefs(t, h.f)
		checkTails(t, h.f)
	})
}

// TestPartitionGroups: partitions span several groups of 256; growing a stream fills the
// last group and opens new ones; negative or missing partitions are not found.
func TestPartitionGroups(t *testing.T) {
	h := newHarness(t)
	s := h.stream("wide", 600)
	chunks := []meta.Chunk{chunk(s.ID, 0, 1, 0, 10), chunk(s.ID, 255, 2, 10, 10), chunk(s.ID, 256, 3, 20, 10), chunk(s.ID, 599, 4, 30, 10)}
	if _, err := h.commit(t0, meta.CommitWal{Object: "wal/1", CreatedMs: t0, Chunks: chunks}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{-1, 600, 1 << 20} {
		if _, err := h.commit(t0, meta.CommitWal{Object: "wal/x", CreatedMs: t0, AllOrNothing: true, Chunks: []meta.Chunk{chunk(s.ID, p, 1, 0, 1)}}); !errors.Is(err, meta.ErrPartitionNotFound) {
			t.Fatalf("partition %d: %v", p, err)
		}
		res, err := h.commit(t0, meta.CommitWal{Object: fmt.Sprint("wal/x", p), CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, p, 1, 0, 1)}})
		if err != nil || res.Duplicate || !errors.Is(res.ChunkErr(0), meta.ErrPartitionNotFound) || res.BaseOffsets[0] != -1 {
			t.Fatalf("partition %d, per chunk: %+v %v", p, res, err)
		}
		if _, _, err := h.f.Lookup(s.ID, p, 0, 0); !errors.Is(err, meta.ErrPartitionNotFound) {
			t.Fatalf("lookup partition %d: %v", p, err)
		}
	}
	n := int32(700)
	if r := h.apply(t0, UpdateStream("default", "wide", meta.StreamPatch{Partitions: &n})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := h.commit(t0, meta.CommitWal{Object: "wal/2", CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 650, 5, 0, 10), chunk(s.ID, 599, 1, 10, 10)}}); err != nil {
		t.Fatal(err)
	}
	_, parts, err := h.f.GetStream("default", "wide")
	if err != nil || len(parts) != 700 {
		t.Fatalf("%d partitions %v", len(parts), err)
	}
	want := map[int32]int64{0: 1, 255: 2, 256: 3, 599: 5, 650: 5}
	for i, ps := range parts {
		if ps.Partition != int32(i) || ps.StreamID != s.ID || ps.HighWatermark != want[int32(i)] {
			t.Fatalf("partition %d: %+v", i, ps)
		}
	}
	if es, st, err := h.f.Lookup(s.ID, 599, 0, 10); err != nil || len(es) != 2 || es[1].BaseOffset != 4 || st.HighWatermark != 5 {
		t.Fatalf("%+v %+v %v", es, st, err)
	}
	checkRefs(t, h.f)
	if r := h.apply(t0, DeleteStream("default", "wide")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if countBucket(t, h.f, bGroups) != 0 || h.f.RefCount("wal/1") != 0 {
		t.Fatal("delete left partition groups or references")
	}
}
