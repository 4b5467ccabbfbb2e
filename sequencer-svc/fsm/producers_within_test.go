package fsm

import (
	"math"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

// TestProducerRetryWithinCommittedChunk: a log node commits a producer's consecutive
// requests to a partition as one chunk (sequences 0..9 here, at offsets 4..13 after a plain
// chunk of 4), and the producer may retry them one by one: a retry of a range within the
// chunk is a duplicate answered with the offset of its own first sequence, in a later
// commit and in the same commit as the chunk; a range that overlaps the chunk and goes past
// it is out of order, and nothing is written for it.
func TestProducerRetryWithinCommittedChunk(t *testing.T) {
	h := newHarness(t)
	a := h.stream("a", 1)
	h.apply(t0, InitProducer("default", "", 0, -1, 0))
	pc := func(c meta.Chunk, seq int32) meta.Chunk {
		c.Producer = meta.ChunkProducer{ID: 1, Epoch: 0, BaseSequence: seq}
		return c
	}
	res, err := h.commit(t0+1000, meta.CommitWal{Object: "wal/1", CreatedMs: t0, Chunks: []meta.Chunk{chunk(a.ID, 0, 4, 0, 40)}})
	if err != nil {
		t.Fatal(err)
	}
	res, err = h.commit(t0+2000, meta.CommitWal{Object: "wal/2", CreatedMs: t0, Chunks: []meta.Chunk{pc(chunk(a.ID, 0, 10, 0, 100), 0)}})
	if err != nil || res.BaseOffsets[0] != 4 {
		t.Fatalf("%+v %v", res, err)
	}
	// Retries of parts, and a range overlapping the end: then the next sequences, and
	// within the same commit a retry of part of that new chunk.
	res, err = h.commit(t0+3000, meta.CommitWal{Object: "wal/3", CreatedMs: t0, Chunks: []meta.Chunk{
		pc(chunk(a.ID, 0, 3, 0, 30), 0), pc(chunk(a.ID, 0, 4, 30, 40), 6), pc(chunk(a.ID, 0, 3, 70, 30), 9)}})
	if err != nil {
		t.Fatal(err)
	}
	want := []meta.ChunkStatus{meta.ChunkDuplicate, meta.ChunkDuplicate, meta.ChunkOutOfOrderSequence}
	if !reflect.DeepEqual(res.Status, want) || res.BaseOffsets[0] != 4 || res.BaseOffsets[1] != 10 {
		t.Fatalf("%+v", res)
	}
	res, err = h.commit(t0+4000, meta.CommitWal{Object: "wal/4", CreatedMs: t0, Chunks: []meta.Chunk{
		pc(chunk(a.ID, 0, 6, 0, 60), 10), pc(chunk(a.ID, 0, 2, 60, 20), 12)}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Status, []meta.ChunkStatus{0, meta.ChunkDuplicate}) || !reflect.DeepEqual(res.BaseOffsets, []int64{14, 16}) {
		t.Fatalf("%+v", res)
	}
	if _, s, err := h.f.Lookup(a.ID, 0, 0, 0); err != nil || s.HighWatermark != 20 {
		t.Fatalf("high watermark %d, want 20 (nothing written by the duplicates): %v", s.HighWatermark, err)
	}
	checkRefs(t, h.f)
	checkTails(t, h.f)
}

func TestSequencesWithin(t *testing.T) {
	const top = math.MaxInt32
	for _, c := range []struct {
		from, to, first, last int32
		in                    int64
		ok                    bool
	}{
		{0, 9, 0, 9, 0, true},
		{0, 9, 3, 5, 3, true},
		{0, 9, 9, 9, 9, true},
		{0, 9, 8, 10, 8, false},
		{5, 9, 0, 4, 0, false},
		{top - 2, 3, top, 1, 2, true}, // wrapping
		{top - 2, 3, 2, 3, 5, true},
		{top - 2, 3, 3, 4, 6, false},
		{top - 2, 3, top - 3, top - 2, 0, false},
	} {
		in, ok := meta.SequencesWithin(c.from, c.to, c.first, c.last)
		if ok != c.ok || (ok && in != c.in) {
			t.Errorf("SequencesWithin(%d, %d, %d, %d) = %d, %v; want %d, %v", c.from, c.to, c.first, c.last, in, ok, c.in, c.ok)
		}
	}
}
