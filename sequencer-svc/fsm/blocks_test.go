package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/protobuf/proto"
)

func TestBlockRoundTrip(t *testing.T) {
	es := []meta.IndexEntry{
		{BaseOffset: 100, Count: 5, Kind: meta.KindWAL, Object: "wal/standard/node-1/01JDQ8ZK3M4N5P6Q7R8S9T0V1W.wal", Offset: 64, Length: 10, MaxTimestamp: t0},
		{BaseOffset: 105, Count: 1, Kind: meta.KindWAL, Object: "wal/standard/node-1/01JDQ8ZM3M4N5P6Q7R8S9T0V1W.wal", Offset: 0, Length: 1, MaxTimestamp: t0 - 7},
		{BaseOffset: 106, Count: 9, Kind: meta.KindSegment, Object: "seg/1/0/106-x.seg", Offset: 0, Length: 99, MaxTimestamp: -5},
		{BaseOffset: 115, Count: 2, Kind: meta.KindWAL, Object: "", Offset: 3, Length: 4},
		{BaseOffset: 117, Count: 1, Kind: meta.KindWAL, Object: "é\xff", Offset: 3, Length: 4},
	}
	v, err := encodeBlock(es)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBlock(indexKey(1, 0, 100), v, nil)
	if err != nil || !reflect.DeepEqual(got, es) {
		t.Fatalf("%v\n%+v", err, got)
	}
	raw, _ := proto.Marshal(&metapb.IndexBlock{Count: make([]int64, len(es))})
	t.Logf("5 entries: %d bytes (columns without objects: %d)", len(v), len(raw))
}

// FuzzDecodeBlock: any bytes decode to an error or to entries that encode and decode to
// the same entries; never a panic.
func FuzzDecodeBlock(f *testing.F) {
	v, _ := encodeBlock([]meta.IndexEntry{{BaseOffset: 7, Count: 5, Kind: meta.KindWAL, Object: "wal/a", Offset: 64, Length: 10, MaxTimestamp: t0},
		{BaseOffset: 12, Count: 1, Kind: meta.KindSegment, Object: "wal/b", Length: 1, MaxTimestamp: t0 + 1}})
	f.Add(v)
	f.Add([]byte{0x0a, 0x01, 0x05})
	f.Fuzz(func(t *testing.T, b []byte) {
		k := indexKey(3, 1, 7)
		es, err := decodeBlock(k, b, nil)
		if err != nil {
			return
		}
		v, err := encodeBlock(es)
		if err != nil {
			t.Fatal(err)
		}
		es2, err := decodeBlock(k, v, nil)
		if err != nil || !reflect.DeepEqual(es, es2) {
			t.Fatalf("re-encode differs: %v\n%+v\n%+v", err, es, es2)
		}
	})
}

// FuzzDecodeGroup: any bytes decode to an error or to at most groupSize partitions whose
// columns all have one value each; never a panic.
func FuzzDecodeGroup(f *testing.F) {
	v, _ := proto.Marshal(&metapb.PartitionGroup{LogStart: []int64{0, 5}, HighWatermark: []int64{3, 9}, Bytes: []int64{10, 20}, Settled: []int64{3, 5}})
	f.Add(v)
	f.Add([]byte{0x0a, 0x01, 0x05})
	f.Fuzz(func(t *testing.T, b []byte) {
		k := groupKey(3, 1)
		sts, err := groupStates(k, b, nil)
		if err != nil {
			return
		}
		if len(sts) > groupSize {
			t.Fatalf("%d partitions", len(sts))
		}
		for i, st := range sts {
			if st.Partition != groupSize+int32(i) || st.StreamID != 3 {
				t.Fatalf("%+v", st)
			}
		}
	})
}

// v3History builds the state saved in testdata/v3/state.snap: v2History, then enough
// commits that all pending commits settle once, and some left pending.
func v3History(h *harness) {
	v2History(h)
	for i := range 40 {
		h.apply(t0+7000+int64(i), CommitWal(meta.CommitWal{Object: fmt.Sprintf("wal/standard/node-2/%03d.wal", i), CreatedMs: t0 + 7000,
			Chunks: []meta.Chunk{chunk(1, 0, 2, 0, 30), chunk(1, 1, 3, 30, 40)}}))
	}
}

func TestGoldenSnapshotV3(t *testing.T) {
	golden(t, "testdata/v3/state.snap", func() []byte {
		h := newHarness(t)
		v3History(h)
		var buf bytes.Buffer
		snap, err := h.f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Release()
		if err := snap.Persist(&memSink{Buffer: &buf}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	})
	f := restoreGolden(t, "testdata/v3/state.snap")
	h := newHarness(t)
	v3History(h)
	if logicalState(t, f) != logicalState(t, h.f) {
		t.Fatalf("golden snapshot state differs from the history that made it:\n%s\nwant\n%s", logicalState(t, f), logicalState(t, h.f))
	}
	if n, m := countBucket(t, f, bPending), countBucket(t, f, bBlocks); n == 0 || n >= int(settleCommits) || m == 0 {
		t.Fatalf("%d pending commits, %d index blocks: want both", n, m)
	}
	es, st, err := f.Lookup(1, 1, 4, MaxLookup)
	if err != nil || len(es) != 41 || st.HighWatermark != 6+40*3 || es[40].Object != "wal/standard/node-2/039.wal" || es[40].MaxTimestamp != t0+30 {
		t.Fatalf("%d entries %+v %v", len(es), st, err)
	}
	checkRefs(t, f)
}

// TestCommitWalBatch: the commits of one batch entry apply in order, each with its own
// answer (a duplicate of an earlier commit of the batch, a missing partition, a stale
// object fail or dedupe alone); one event carries the merged partition updates.
func TestCommitWalBatch(t *testing.T) {
	for _, settle := range []uint64{settleCommits, 2} {
		t.Run(fmt.Sprint("settle=", settle), func(t *testing.T) {
			defer func(s uint64) { settleCommits = s }(settleCommits)
			settleCommits = settle
			h := newHarness(t)
			s := h.stream("s", 2)
			a := meta.CommitWal{Object: "wal/a", CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 3, 0, 10), chunk(s.ID, 1, 2, 10, 10)}}
			b := meta.CommitWal{Object: "wal/b", CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 4, 0, 5)}}
			c := meta.CommitWal{Object: "wal/c", CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 1, 0, 5), chunk(s.ID, 2, 1, 5, 5)}, AllOrNothing: true}
			d := meta.CommitWal{Object: "wal/d", CreatedMs: t0 - meta.StaleAfter.Milliseconds() - 1, Chunks: []meta.Chunk{chunk(s.ID, 0, 1, 0, 5)}}
			h.events = nil
			r := h.apply(t0, CommitWalBatch([]meta.CommitWal{a, b, a, c, d}))
			if r.Err != nil || len(r.Commits) != 5 {
				t.Fatalf("%+v", r)
			}
			want := []struct {
				bases []int64
				dup   bool
				err   error
			}{{[]int64{0, 0}, false, nil}, {[]int64{3}, false, nil}, {[]int64{0, 0}, true, nil}, {nil, false, meta.ErrPartitionNotFound}, {nil, false, meta.ErrStaleCommit}}
			for i, w := range want {
				got := r.Commits[i]
				if !errors.Is(got.Err, w.err) || (w.err == nil && (!reflect.DeepEqual(got.Commit.BaseOffsets, w.bases) || got.Commit.Duplicate != w.dup || got.Commit.AppliedIndex != h.index)) {
					t.Fatalf("commit %d: %+v %v", i, got.Commit, got.Err)
				}
			}
			if len(h.events) != 1 || len(h.events[0].Partitions) != 2 || len(h.events[0].Partitions[0].Added) != 2 ||
				h.events[0].Partitions[0].HighWatermark != 7 || h.events[0].Partitions[1].HighWatermark != 2 {
				t.Fatalf("events %+v", h.events)
			}
			// More batches and single commits interleaved: offsets stay in commit order.
			for i := range 5 {
				cs := []meta.CommitWal{
					{Object: fmt.Sprint("wal/x", i), CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 1, 0, 1)}},
					{Object: fmt.Sprint("wal/y", i), CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 2, 0, 1)}},
				}
				h.apply(t0, CommitWalBatch(cs))
				if _, err := h.commit(t0, meta.CommitWal{Object: fmt.Sprint("wal/z", i), CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 3, 0, 1)}}); err != nil {
					t.Fatal(err)
				}
			}
			es, st, err := h.f.Lookup(s.ID, 0, 0, MaxLookup)
			if err != nil || st.HighWatermark != 7+5*6 || len(es) != 2+15 {
				t.Fatalf("%d entries %+v %v", len(es), st, err)
			}
			var objs []string
			for _, e := range es[2:5] {
				objs = append(objs, e.Object)
			}
			if fmt.Sprint(objs) != "[wal/x0 wal/y0 wal/z0]" {
				t.Fatalf("order %v", objs)
			}
			checkRefs(t, h.f)
		})
	}
}

func TestGoldenCommitWalBatch(t *testing.T) {
	// Written before per-chunk answers: all or nothing.
	want := CommitWalBatch([]meta.CommitWal{
		{NodeID: "node-1", Object: "wal/standard/node-1/01JDQ8ZK3M4N5P6Q7R8S9T0V1W.wal", Class: meta.ClassStandard, CreatedMs: t0,
			Chunks: []meta.Chunk{{StreamID: 1, Partition: 0, Records: 10, Offset: 64, Length: 1000, MaxTimestamp: t0 - 3}}, AllOrNothing: true},
		{NodeID: "node-2", Object: "wal/standard/node-2/01JDQ8ZM3M4N5P6Q7R8S9T0V1W.wal", Class: meta.ClassStandard, CreatedMs: t0 + 1,
			Chunks: []meta.Chunk{{StreamID: 1, Partition: 0, Records: 2, Offset: 64, Length: 90, MaxTimestamp: t0}, {StreamID: 4, Partition: 1, Records: 7, Offset: 154, Length: 300, MaxTimestamp: t0}}, AllOrNothing: true},
	})
	want.StampMs = t0 + 5
	b := golden(t, "testdata/v3/commit_wal_batch.cmd", func() []byte { b, _ := Encode(want); return b })
	got, err := Decode(b)
	if err != nil || got.String() != want.String() {
		t.Fatalf("%v: %v", err, got)
	}
	if enc, _ := Encode(want); !bytes.Equal(enc, b) {
		t.Fatalf("encoding changed:\n got %x\nwant %x", enc, b)
	}
}

// TestAppendBlockIsProtoMarshal: the hand-written block encoder makes exactly the bytes
// proto.Marshal makes of the same metapb.IndexBlock (so stored blocks did not change).
func TestAppendBlockIsProtoMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 200; n += 1 + n/8 {
		es := make([]meta.IndexEntry, n)
		base := rng.Int64N(1 << 40)
		for i := range es {
			obj := fmt.Sprintf("wal/standard/node-%d/%026d.wal", rng.IntN(3), rng.Int64N(1<<50))
			if rng.IntN(5) == 0 {
				obj = ""
			}
			es[i] = meta.IndexEntry{BaseOffset: base, Count: 1 + rng.Int64N(1000), Kind: meta.EntryKind(1 + rng.IntN(2)), Object: obj,
				Offset: rng.Int64N(8 << 20), Length: rng.Int64N(1 << 20), MaxTimestamp: t0 + rng.Int64N(1<<30) - 1<<29}
			base += es[i].Count
		}
		b := &metapb.IndexBlock{}
		prev, ts := "", int64(0)
		for _, e := range es {
			k := 0
			for k < len(prev) && k < len(e.Object) && prev[k] == e.Object[k] {
				k++
			}
			b.Count, b.Kind, b.ObjectShared = append(b.Count, e.Count), append(b.Kind, uint32(e.Kind)), append(b.ObjectShared, uint32(k))
			b.ObjectSuffix = append(b.ObjectSuffix, []byte(e.Object[k:]))
			b.Offset, b.Length, b.MaxTsDelta = append(b.Offset, e.Offset), append(b.Length, e.Length), append(b.MaxTsDelta, e.MaxTimestamp-ts)
			prev, ts = e.Object, e.MaxTimestamp
		}
		want, err := proto.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := encodeBlock(es)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d entries: encodeBlock\n%x\nproto.Marshal\n%x", n, got, want)
		}
		back, err := decodeBlock(indexKey(1, 2, es[0].BaseOffset), got, nil)
		if err != nil || !reflect.DeepEqual(back, es) {
			t.Fatalf("%d entries: round trip %v", n, err)
		}
	}
}
