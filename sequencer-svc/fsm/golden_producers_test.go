package fsm

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Golden files of idempotent producers (testdata/v4/), written once with -golden.create
// when absent and never regenerated: an InitProducer command, a CommitWal command whose
// chunks carry producers, and a snapshot holding producer state (format v4).

func goldenInitProducerCommand() *metapb.Command {
	cmd := InitProducer("default", "billing", 7, 3, 500)
	cmd.StampMs = t0 + 5
	return cmd
}

func goldenProducerCommitCommand() *metapb.Command {
	cmd := CommitWal(meta.CommitWal{NodeID: "node-1", Object: "wal/standard/node-1/01JDQ8ZK3M4N5P6Q7R8S9T0V1W.wal",
		Class: meta.ClassStandard, CreatedMs: t0, Chunks: []meta.Chunk{
			{StreamID: 1, Partition: 0, Records: 10, Offset: 64, Length: 1000, MaxTimestamp: t0 - 3,
				Producer: meta.ChunkProducer{ID: 7, Epoch: 3, BaseSequence: 2147483640}},
			{StreamID: 1, Partition: 1, Records: 1, Offset: 1100, Length: 90, MaxTimestamp: t0 - 1},
		}})
	cmd.StampMs = t0 + 5
	return cmd
}

func TestGoldenProducerCommands(t *testing.T) {
	for _, c := range []struct {
		path string
		cmd  *metapb.Command
	}{
		{"testdata/v4/init_producer.cmd", goldenInitProducerCommand()},
		{"testdata/v4/producer_commit_wal.cmd", goldenProducerCommitCommand()},
	} {
		b := golden(t, c.path, func() []byte { b, _ := Encode(c.cmd); return b })
		got, err := Decode(b)
		if err != nil || got.String() != c.cmd.String() {
			t.Fatalf("%s: %v: %v", c.path, err, got)
		}
		if enc, _ := Encode(c.cmd); !bytes.Equal(enc, b) {
			t.Fatalf("%s: encoding changed:\n got %x\nwant %x", c.path, enc, b)
		}
	}
	b := golden(t, "testdata/v4/producer_commit_wal.cmd", nil)
	cmd, _ := Decode(b)
	c, err := DecodeCommitWal(cmd.GetCommitWal())
	if err != nil {
		t.Fatal(err)
	}
	want := meta.ChunkProducer{ID: 7, Epoch: 3, BaseSequence: 2147483640}
	if c.Chunks[0].Producer != want || c.Chunks[1].Producer.Has() {
		t.Fatalf("%+v", c.Chunks)
	}
	// A commit without producers encodes as before (no producer columns).
	plain := CommitWal(meta.CommitWal{Object: "w", CreatedMs: t0, Chunks: []meta.Chunk{chunk(1, 0, 1, 0, 10)}})
	if plain.GetCommitWal().ProducerId != nil {
		t.Fatal("producer columns on a commit without producers")
	}
}

// producerHistory builds the state saved in testdata/v4/producer_state.snap: an anonymous
// producer (id 1) that wrote seqs 0..4 and 5..7 to a/0 and 0..1 to a/1, a named one
// (billing, id 2) bumped to epoch 1 after writing 0..2 to a/0 at epoch 0.
func producerHistory(h *harness) {
	a := h.stream("a", 2)
	h.apply(t0, InitProducer("default", "", 0, -1, 0))
	h.apply(t0, InitProducer("default", "billing", 0, -1, 0))
	p := func(id int64, epoch int16, seq int32) meta.ChunkProducer {
		return meta.ChunkProducer{ID: id, Epoch: epoch, BaseSequence: seq}
	}
	with := func(c meta.Chunk, pr meta.ChunkProducer) meta.Chunk { c.Producer = pr; return c }
	h.apply(t0+1000, CommitWal(meta.CommitWal{Object: "wal/1", CreatedMs: t0,
		Chunks: []meta.Chunk{with(chunk(a.ID, 0, 5, 0, 100), p(1, 0, 0)), with(chunk(a.ID, 1, 2, 100, 50), p(1, 0, 0))}}))
	h.apply(t0+2000, CommitWal(meta.CommitWal{Object: "wal/2", CreatedMs: t0,
		Chunks: []meta.Chunk{with(chunk(a.ID, 0, 3, 0, 60), p(1, 0, 5))}}))
	h.apply(t0+3000, CommitWal(meta.CommitWal{Object: "wal/3", CreatedMs: t0,
		Chunks: []meta.Chunk{with(chunk(a.ID, 0, 3, 0, 60), p(2, 0, 0))}}))
	h.apply(t0+4000, InitProducer("default", "billing", 0, -1, 0))
}

func TestGoldenProducerSnapshot(t *testing.T) {
	golden(t, "testdata/v4/producer_state.snap", func() []byte {
		h := newHarness(t)
		producerHistory(h)
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
	f := restoreGolden(t, "testdata/v4/producer_state.snap")
	h := newHarness(t)
	producerHistory(h)
	if logicalState(t, f) != logicalState(t, h.f) {
		t.Fatalf("golden snapshot state differs from the history that made it:\n%s\nwant\n%s", logicalState(t, f), logicalState(t, h.f))
	}
	if p, ok := f.Producer(2); !ok || p.Epoch != 1 || p.Name != "billing" || p.Namespace != "default" {
		t.Fatalf("producer 2: %+v %v", p, ok)
	}
	if n := f.ProducerCount("default"); n != 2 {
		t.Fatalf("count %d", n)
	}
	// The restored state answers as the original: duplicates with their offsets, the next
	// sequences accepted, the old epoch fenced, the name's holder bumped again.
	g := &harness{t: t, f: f, index: f.AppliedIndex()}
	pc := func(c meta.Chunk, id int64, epoch int16, seq int32) meta.Chunk {
		c.Producer = meta.ChunkProducer{ID: id, Epoch: epoch, BaseSequence: seq}
		return c
	}
	res, err := g.commit(t0+5000, meta.CommitWal{Object: "wal/4", CreatedMs: t0, Chunks: []meta.Chunk{
		pc(chunk(1, 0, 5, 0, 100), 1, 0, 0), pc(chunk(1, 0, 3, 100, 60), 1, 0, 5), pc(chunk(1, 1, 1, 160, 10), 1, 0, 2),
		pc(chunk(1, 1, 1, 170, 10), 2, 0, 3), pc(chunk(1, 1, 1, 180, 10), 2, 1, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	want := []meta.ChunkStatus{meta.ChunkDuplicate, meta.ChunkDuplicate, 0, meta.ChunkProducerFenced, 0}
	if !reflect.DeepEqual(res.Status, want) || !reflect.DeepEqual(res.BaseOffsets, []int64{0, 5, 2, -1, 3}) {
		t.Fatalf("%+v", res)
	}
	if r := g.apply(t0+6000, InitProducer("default", "billing", 0, -1, 0)); r.Err != nil || r.Producer != (meta.Producer{ID: 2, Epoch: 2}) {
		t.Fatalf("%+v", r)
	}
	checkRefs(t, f)
	checkTails(t, f)
}

// FuzzApplyProducers applies an arbitrary command to a state holding producers, twice.
// Invariants: applying never panics; the state stays consistent (references, tails); a
// CommitWal applied again (a retry) moves no high watermark; and two replicas applying the
// same entries hold the same state.
func FuzzApplyProducers(f *testing.F) {
	seed := func(cmd *metapb.Command) {
		cmd.StampMs = t0 + 1000
		b, _ := Encode(cmd)
		f.Add(b)
	}
	pc := func(c meta.Chunk, id int64, epoch int16, seq int32) meta.Chunk {
		c.Producer = meta.ChunkProducer{ID: id, Epoch: epoch, BaseSequence: seq}
		return c
	}
	seed(goldenInitProducerCommand())
	seed(goldenProducerCommitCommand())
	seed(InitProducer("default", "", 1, 0, 0))
	seed(InitProducer("default", "billing", 2, 1, 2))
	seed(InitProducer("default", "", 0, -1, 1))
	seed(CommitWal(meta.CommitWal{Object: "wal/x", CreatedMs: t0, Chunks: []meta.Chunk{pc(chunk(1, 0, 5, 0, 100), 1, 0, 0),
		pc(chunk(1, 0, 3, 100, 10), 1, 0, 5), pc(chunk(1, 1, 3, 110, 10), 1, 0, 2), pc(chunk(1, 1, 3, 120, 10), 2, 0, 0)}}))
	seed(CommitWal(meta.CommitWal{Object: "wal/y", CreatedMs: t0, Chunks: []meta.Chunk{pc(chunk(1, 0, 1, 0, 100), 1, 0, 2147483647),
		pc(chunk(1, 1, 3, 100, 10), 9, 0, 0), pc(chunk(2, 0, 3, 110, 10), 1, 0, 0)}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var hs [2]*harness
		var states [2]string
		for r := range hs {
			h := newHarness(t)
			producerHistory(h)
			idx := h.index
			e := &raft.Log{Index: idx + 1, Type: raft.LogCommand, Data: b}
			h.f.ApplyBatch([]*raft.Log{e})
			_, before, _ := h.f.GetStream("default", "a")
			e2 := &raft.Log{Index: idx + 2, Type: raft.LogCommand, Data: b}
			h.f.ApplyBatch([]*raft.Log{e2})
			_, after, _ := h.f.GetStream("default", "a")
			if cmd, err := Decode(b); err == nil && cmd.GetCommitWal() != nil && !reflect.DeepEqual(before, after) {
				t.Fatalf("a retried commit moved partitions: %+v -> %+v", before, after)
			}
			checkRefs(t, h.f)
			checkTails(t, h.f)
			hs[r], states[r] = h, logicalState(t, h.f)
		}
		if states[0] != states[1] {
			t.Fatal("replicas differ")
		}
	})
}
