package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Golden files of per-chunk answers (testdata/v3/per_chunk_*), written once with
// -golden.create when absent and never regenerated: a CommitWal command refused per chunk
// (per_chunk set), and a snapshot holding a dedupe record with refusals and the pending
// record of a partly committed object.

func goldenPerChunkCommand() *metapb.Command {
	cmd := CommitWal(meta.CommitWal{NodeID: "node-1", Object: "wal/standard/node-1/01JDQ8ZK3M4N5P6Q7R8S9T0V1W.wal",
		Class: meta.ClassStandard, CreatedMs: t0, Chunks: []meta.Chunk{
			{StreamID: 1, Partition: 0, Records: 10, Offset: 64, Length: 1000, MaxTimestamp: t0 - 3},
			{StreamID: 2, Partition: 0, Records: 1, Offset: 1100, Length: 90, MaxTimestamp: t0 - 1},
		}})
	cmd.StampMs = t0 + 5
	return cmd
}

func TestGoldenPerChunkCommand(t *testing.T) {
	want := goldenPerChunkCommand()
	b := golden(t, "testdata/v3/per_chunk_commit_wal.cmd", func() []byte { b, _ := Encode(want); return b })
	got, err := Decode(b)
	if err != nil || got.String() != want.String() || !got.GetCommitWal().GetPerChunk() {
		t.Fatalf("%v: %v", err, got)
	}
	if enc, _ := Encode(want); !bytes.Equal(enc, b) {
		t.Fatalf("encoding changed:\n got %x\nwant %x", enc, b)
	}
	c, err := DecodeCommitWal(got.GetCommitWal())
	if err != nil || c.AllOrNothing {
		t.Fatalf("%+v %v", c, err)
	}
}

// perChunkHistory builds the state saved in testdata/v3/per_chunk_state.snap: stream b
// deleted, then an object with chunks of a and b (b's refused), one with b's chunks only
// (all refused: retired), and one with a missing partition of a.
func perChunkHistory(h *harness) {
	a := h.stream("a", 2)
	h.stream("b", 1)
	h.apply(t0, DeleteStream("default", "b"))
	h.apply(t0+1000, CommitWal(meta.CommitWal{Object: "wal/ab", CreatedMs: t0,
		Chunks: []meta.Chunk{chunk(a.ID, 0, 3, 0, 100), chunk(a.ID+1, 0, 2, 100, 50), chunk(a.ID, 1, 4, 150, 70)}}))
	h.apply(t0+2000, CommitWal(meta.CommitWal{Object: "wal/b", CreatedMs: t0, Chunks: []meta.Chunk{chunk(a.ID+1, 0, 2, 0, 50)}}))
	h.apply(t0+3000, CommitWal(meta.CommitWal{Object: "wal/a2", CreatedMs: t0,
		Chunks: []meta.Chunk{chunk(a.ID, 2, 1, 0, 10), chunk(a.ID, 0, 1, 10, 20)}}))
}

func TestGoldenPerChunkSnapshot(t *testing.T) {
	golden(t, "testdata/v3/per_chunk_state.snap", func() []byte {
		h := newHarness(t)
		perChunkHistory(h)
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
	f := restoreGolden(t, "testdata/v3/per_chunk_state.snap")
	h := newHarness(t)
	perChunkHistory(h)
	if logicalState(t, f) != logicalState(t, h.f) {
		t.Fatalf("golden snapshot state differs from the history that made it:\n%s\nwant\n%s", logicalState(t, f), logicalState(t, h.f))
	}
	checkTails(t, f)
	checkRefs(t, f)
	es, st, err := f.Lookup(1, 0, 0, MaxLookup)
	if err != nil || st.HighWatermark != 4 || len(es) != 2 || es[0].Object != "wal/ab" || es[1].Object != "wal/a2" || es[1].BaseOffset != 3 {
		t.Fatalf("%+v %+v %v", es, st, err)
	}
	if got, _ := f.ListRetired("", 0); len(got) != 1 || got[0].Key != "wal/b" || got[0].RetiredMs != t0+2000 {
		t.Fatalf("retired %+v", got)
	}
	// Retries read the dedupe records back: exactly the first answers.
	g := &harness{t: t, f: f, index: f.AppliedIndex()}
	for _, c := range []struct {
		obj    string
		chunks []meta.Chunk
		bases  []int64
		status []meta.ChunkStatus
	}{
		{"wal/ab", []meta.Chunk{chunk(1, 0, 3, 0, 100), chunk(2, 0, 2, 100, 50), chunk(1, 1, 4, 150, 70)}, []int64{0, -1, 0}, []meta.ChunkStatus{0, meta.ChunkStreamNotFound, 0}},
		{"wal/b", []meta.Chunk{chunk(2, 0, 2, 0, 50)}, []int64{-1}, []meta.ChunkStatus{meta.ChunkStreamNotFound}},
		{"wal/a2", []meta.Chunk{chunk(1, 2, 1, 0, 10), chunk(1, 0, 1, 10, 20)}, []int64{-1, 3}, []meta.ChunkStatus{meta.ChunkPartitionNotFound, 0}},
	} {
		res, err := g.commit(t0+4000, meta.CommitWal{Object: c.obj, CreatedMs: t0, Chunks: c.chunks})
		if err != nil || !res.Duplicate || !reflect.DeepEqual(res.BaseOffsets, c.bases) || !reflect.DeepEqual(res.Status, c.status) {
			t.Fatalf("retry %s: %+v %v", c.obj, res, err)
		}
	}
}

// TestChunkRefusedAlone: a chunk of a deleted stream or a missing partition is refused
// alone; the commit's other chunks get dense offsets, and the object is referenced by them
// only.
func TestChunkRefusedAlone(t *testing.T) {
	h := newHarness(t)
	a := h.stream("a", 2)
	b := h.stream("b", 1)
	if res, err := h.commit(t0, meta.CommitWal{Object: "w0", CreatedMs: t0, Chunks: []meta.Chunk{chunk(a.ID, 0, 2, 0, 10), chunk(b.ID, 0, 2, 10, 10)}}); err != nil || res.Status != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if r := h.apply(t0, DeleteStream("default", "b")); r.Err != nil {
		t.Fatal(r.Err)
	}
	res, err := h.commit(t0, meta.CommitWal{Object: "w1", CreatedMs: t0,
		Chunks: []meta.Chunk{chunk(a.ID, 0, 3, 0, 10), chunk(b.ID, 0, 5, 10, 10), chunk(a.ID, 1, 1, 20, 10), chunk(a.ID, 2, 1, 30, 10)}})
	if err != nil {
		t.Fatalf("one stream's chunk failed the whole commit: %v", err)
	}
	if !reflect.DeepEqual(res.BaseOffsets, []int64{2, -1, 0, -1}) || res.Committed() != 2 {
		t.Fatalf("%+v", res)
	}
	for i, want := range []error{nil, meta.ErrStreamNotFound, nil, meta.ErrPartitionNotFound} {
		got := res.ChunkErr(i)
		if (want == nil) != (got == nil) || want != nil && (!errors.Is(got, want) || !errors.Is(got, meta.ErrChunkRefused)) {
			t.Fatalf("chunk %d: %v, want %v", i, got, want)
		}
	}
	_, parts, _ := h.f.GetStream("default", "a")
	if parts[0].HighWatermark != 5 || parts[1].HighWatermark != 1 || parts[0].Bytes != 20 {
		t.Fatalf("%+v", parts)
	}
	if got, _ := h.f.Referenced([]string{"w1"}); !got[0] {
		t.Fatal("w1 not referenced")
	}
	checkRefs(t, h.f)
	checkTails(t, h.f)
}
