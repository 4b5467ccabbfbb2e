package meta

import (
	"errors"
	"math"
	"testing"
)

func TestSequences(t *testing.T) {
	for _, c := range []struct {
		base int32
		n    int64
		last int32
	}{
		{0, 1, 0},
		{0, 5, 4},
		{math.MaxInt32, 1, math.MaxInt32},
		{math.MaxInt32 - 2, 3, math.MaxInt32},
		{math.MaxInt32 - 2, 4, 0},
		{math.MaxInt32 - 2, 5, 1},
		{math.MaxInt32, 2, 0},
		{5, int64(math.MaxInt32) + 1, 4}, // a whole cycle plus one ends before where it began
	} {
		if got := LastSequence(c.base, c.n); got != c.last {
			t.Errorf("LastSequence(%d, %d) = %d, want %d", c.base, c.n, got, c.last)
		}
	}
	for _, c := range []struct {
		last, next int32
		ok         bool
	}{{4, 5, true}, {4, 6, false}, {4, 4, false}, {math.MaxInt32, 0, true}, {math.MaxInt32, 1, false}, {-1, 0, true}} {
		if got := NextSequence(c.last, c.next); got != c.ok {
			t.Errorf("NextSequence(%d, %d) = %v", c.last, c.next, got)
		}
	}
}

func TestChunkStatusProducers(t *testing.T) {
	r := CommitResult{BaseOffsets: []int64{7, -1, -1, -1, 3}, Status: []ChunkStatus{ChunkDuplicate, ChunkOutOfOrderSequence,
		ChunkProducerFenced, ChunkUnknownProducer, ChunkCommitted}}
	if r.ChunkErr(0) != nil || !r.IsDuplicate(0) || r.ChunkErr(4) != nil || r.Committed() != 1 {
		t.Fatalf("%v %v %d", r.ChunkErr(0), r.ChunkErr(4), r.Committed())
	}
	for i, want := range []error{nil, ErrOutOfOrderSequence, ErrProducerFenced, ErrUnknownProducer} {
		if want == nil {
			continue
		}
		err := r.ChunkErr(i)
		if !errors.Is(err, want) || !errors.Is(err, ErrChunkRefused) {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if st, ok := ChunkStatusOf(err); !ok || st != r.Status[i] {
			t.Fatalf("chunk %d: status of %v: %v %v", i, err, st, ok)
		}
	}
}
