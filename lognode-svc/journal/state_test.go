package journal

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
)

var p0, p1 = Partition{Stream: 1, Partition: 0}, Partition{Stream: 1, Partition: 1}

func app(t testing.TB, p Partition, prod meta.ChunkProducer, prefix string, n int) Append {
	return Append{Partition: p, Producer: prod, ClockMs: 1000, Batches: batch(t, prefix, n)}
}

func TestStateAssignsDenseOffsetsPerPartition(t *testing.T) {
	s := NewState(0)
	noP := meta.ChunkProducer{ID: -1}
	for i, c := range []struct {
		p    Partition
		n    int
		base int64
	}{{p0, 3, 0}, {p1, 2, 0}, {p0, 1, 3}, {p0, 4, 4}, {p1, 1, 2}} {
		in := app(t, c.p, noP, "v", c.n)
		orig := append([]byte(nil), in.Batches...)
		r := s.ApplyAppend(in)
		if r.Err != nil || r.Base != c.base || r.Count != int64(c.n) {
			t.Fatalf("append %d: %+v, want base %d count %d", i, r, c.base, c.n)
		}
		if !bytes.Equal(in.Batches, orig) {
			t.Fatalf("append %d changed the entry's bytes", i)
		}
	}
	rr, err := s.Read(p0, 0, 1<<20)
	if err != nil || rr.Next != 8 || rr.HighWatermark != 8 {
		t.Fatalf("read p0: %+v %v", rr, err)
	}
	want := []string{"0:v-0", "1:v-1", "2:v-2", "3:v-0", "4:v-0", "5:v-1", "6:v-2", "7:v-3"}
	if got := values(t, rr.Batches); !reflect.DeepEqual(got, want) {
		t.Fatalf("p0 records %v, want %v", got, want)
	}
	// The stored batches still pass full validation (the base offset is outside the CRC).
	if _, err := recordbatch.Validate(rr.Batches); err != nil {
		t.Fatal(err)
	}
	// A read inside a batch starts at that batch; max bytes stops after the first batch.
	rr, err = s.Read(p0, 5, 1)
	if err != nil || rr.Next != 8 || values(t, rr.Batches)[0] != "4:v-0" {
		t.Fatalf("read p0 from 5: %+v %v", rr, err)
	}
	rr, err = s.Read(p0, 1, 1)
	if err != nil || rr.Next != 3 {
		t.Fatalf("read p0 from 1 with 1 byte: next %d %v, want 3", rr.Next, err)
	}
	if rr, err = s.Read(p0, 8, 100); err != nil || len(rr.Batches) != 0 || rr.Next != 8 {
		t.Fatalf("read at the high watermark: %+v %v", rr, err)
	}
	if _, err = s.Read(p0, 9, 100); !errors.Is(err, meta.ErrOffsetOutOfRange) {
		t.Fatalf("read past the high watermark: %v", err)
	}
}

func TestStateRefusesBadBatches(t *testing.T) {
	s := NewState(0)
	b := batch(t, "v", 2)
	b[len(b)-1] ^= 1 // CRC mismatch
	if r := s.ApplyAppend(Append{Partition: p0, Batches: b}); !errors.Is(r.Err, ErrBadBatches) {
		t.Fatalf("corrupt batch: %+v", r)
	}
	if r := s.ApplyAppend(Append{Partition: p0, Batches: []byte{1, 2, 3}}); !errors.Is(r.Err, ErrBadBatches) {
		t.Fatalf("short batch: %+v", r)
	}
	if s.Next(p0) != 0 || s.Retained() != 0 {
		t.Fatalf("a refused append wrote: next %d retained %d", s.Next(p0), s.Retained())
	}
}

func TestStateIdempotentProducers(t *testing.T) {
	s := NewState(0)
	pr := func(epoch int16, seq int32) meta.ChunkProducer {
		return meta.ChunkProducer{ID: 7, Epoch: epoch, BaseSequence: seq}
	}
	must := func(r Result, base int64, dup bool) {
		t.Helper()
		if r.Err != nil || r.Base != base || r.Duplicate != dup {
			t.Fatalf("%+v, want base %d duplicate %v", r, base, dup)
		}
	}
	refused := func(r Result, want error) {
		t.Helper()
		if !errors.Is(r.Err, want) {
			t.Fatalf("%+v, want %v", r, want)
		}
	}
	refused(s.ApplyAppend(app(t, p0, pr(0, 1), "a", 1)), meta.ErrOutOfOrderSequence) // a first chunk starts at 0
	must(s.ApplyAppend(app(t, p0, pr(0, 0), "a", 2)), 0, false)                      // seq 0-1
	must(s.ApplyAppend(app(t, p0, meta.ChunkProducer{ID: -1}, "x", 1)), 2, false)    // another writer
	must(s.ApplyAppend(app(t, p0, pr(0, 2), "b", 3)), 3, false)                      // seq 2-4
	must(s.ApplyAppend(app(t, p0, pr(0, 0), "a", 2)), 0, true)                       // retry: original offsets
	must(s.ApplyAppend(app(t, p0, pr(0, 2), "b", 3)), 3, true)
	refused(s.ApplyAppend(app(t, p0, pr(0, 9), "c", 1)), meta.ErrOutOfOrderSequence) // a gap
	refused(s.ApplyAppend(app(t, p0, pr(0, 3), "c", 1)), meta.ErrOutOfOrderSequence) // overlaps, no duplicate
	// The same producer on another partition has its own sequences.
	must(s.ApplyAppend(app(t, p1, pr(0, 0), "p1", 1)), 0, false)
	// A new epoch restarts at 0; the old epoch is fenced.
	refused(s.ApplyAppend(app(t, p0, pr(1, 5), "d", 1)), meta.ErrOutOfOrderSequence)
	must(s.ApplyAppend(app(t, p0, pr(1, 0), "d", 1)), 6, false)
	refused(s.ApplyAppend(app(t, p0, pr(0, 5), "e", 1)), meta.ErrProducerFenced)
	refused(s.ApplyAppend(app(t, p0, pr(0, 0), "a", 2)), meta.ErrProducerFenced) // no duplicate across epochs
	// Only the last meta.ProducerBatches chunks are remembered.
	for i := int32(1); i <= meta.ProducerBatches; i++ {
		must(s.ApplyAppend(app(t, p0, pr(1, i), "f", 1)), 6+int64(i), false)
	}
	must(s.ApplyAppend(app(t, p0, pr(1, 1), "f", 1)), 7, true)
	refused(s.ApplyAppend(app(t, p0, pr(1, 0), "d", 1)), meta.ErrOutOfOrderSequence) // fell out of the window
	if s.Next(p0) != 12 {
		t.Fatalf("next %d, want 12", s.Next(p0))
	}
}

func TestStateProducerBoundAndExpiry(t *testing.T) {
	s := NewState(2)
	for id := int64(1); id <= 3; id++ {
		if r := s.ApplyAppend(app(t, p0, meta.ChunkProducer{ID: id}, "v", 1)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if s.Producers() != 2 {
		t.Fatalf("%d producer states, bound 2", s.Producers())
	}
	// Producer 1 was evicted: its retry is no duplicate and must restart at sequence 0.
	if r := s.ApplyAppend(app(t, p0, meta.ChunkProducer{ID: 1, BaseSequence: 1}, "v", 1)); !errors.Is(r.Err, meta.ErrOutOfOrderSequence) {
		t.Fatalf("evicted producer: %+v", r)
	}
	// Idle past the expiry on the journal clock: forgotten.
	late := app(t, p1, meta.ChunkProducer{ID: -1}, "v", 1)
	late.ClockMs = 1000 + meta.ProducerIdleExpiry.Milliseconds() + 1
	s.ApplyAppend(late)
	if s.Producers() != 0 {
		t.Fatalf("%d producer states after the idle expiry", s.Producers())
	}
}

func TestStateTrim(t *testing.T) {
	s := NewState(0)
	for i := 0; i < 4; i++ {
		s.ApplyAppend(app(t, p0, meta.ChunkProducer{ID: -1}, "v", 2)) // [0,2) [2,4) [4,6) [6,8)
	}
	before := s.Retained()
	seg := SegmentRef{Key: "segments/a", Base: 0, End: 5}
	if r := s.ApplyTrim(Trim{Partition: p0, Offset: 5, Segment: seg}); r.Err != nil || r.Base != 4 {
		t.Fatalf("trim to 5: %+v (the batch [4,6) stays)", r)
	}
	if s.Retained() >= before {
		t.Fatalf("retained %d after trim, %d before", s.Retained(), before)
	}
	if _, err := s.Read(p0, 3, 100); !errors.Is(err, ErrOffloaded) {
		t.Fatalf("read below the journal: %v", err)
	}
	if rr, err := s.Read(p0, 4, 1<<20); err != nil || values(t, rr.Batches)[0] != "4:v-0" {
		t.Fatalf("read at the journal start: %+v %v", rr, err)
	}
	if got := s.Segments(p0); !reflect.DeepEqual(got, []SegmentRef{seg}) {
		t.Fatalf("segments %v", got)
	}
	if r := s.ApplyTrim(Trim{Partition: p0, Offset: 9, Segment: SegmentRef{Key: "x", End: 9}}); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("trim past the next offset: %+v", r)
	}
}

func TestStateAssign(t *testing.T) {
	s := NewState(0)
	s.ApplyAssign(Assign{Stream: 1, Partitions: 2})
	if !s.Has(p0) || !s.Has(p1) || s.Has(Partition{Stream: 1, Partition: 2}) {
		t.Fatal("assign of 2 partitions")
	}
	s.ApplyAppend(app(t, p1, meta.ChunkProducer{ID: -1}, "v", 3))
	s.ApplyAssign(Assign{Stream: 1, Partitions: 1})
	if s.Has(p1) || s.Retained() != 0 {
		t.Fatalf("partition 1 kept after the stream shrank to 1: retained %d", s.Retained())
	}
}

func TestStateRequestIDs(t *testing.T) {
	s := NewState(0)
	a := app(t, p0, meta.ChunkProducer{ID: -1}, "v", 2)
	a.RequestID = 42
	first := s.ApplyAppend(a)
	s.ApplyAppend(app(t, p0, meta.ChunkProducer{ID: -1}, "w", 1))
	again := s.ApplyAppend(a) // the retry of a node that did not hear the first answer
	if again != first || s.Next(p0) != 3 {
		t.Fatalf("retry %+v, first %+v, next %d: want the first answer and nothing written", again, first, s.Next(p0))
	}
	// Past the window on the journal clock, the id is forgotten.
	late := app(t, p1, meta.ChunkProducer{ID: -1}, "x", 1)
	late.ClockMs = a.ClockMs + RequestIDWindow.Milliseconds() + 1
	s.ApplyAppend(late)
	a.ClockMs = late.ClockMs
	if r := s.ApplyAppend(a); r.Base != 3 || s.Requests() != 1 {
		t.Fatalf("after the window: %+v, %d ids remembered", r, s.Requests())
	}
	// The count bound holds.
	for i := 0; i < MaxRequestIDs+10; i++ {
		s.remember(uint64(1000+i), Result{})
	}
	if s.Requests() > MaxRequestIDs {
		t.Fatalf("%d request ids, bound %d", s.Requests(), MaxRequestIDs)
	}
}
