package journal

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

func TestSealEntryGolden(t *testing.T) {
	for _, c := range []struct {
		s    Seal
		want string
	}{
		{Seal{Partition: Partition{Stream: 0x0102030405060708, Partition: 7}, ClockMs: 1700000000123, Sealed: true},
			"0104" + "0102030405060708" + "00000007" + "0000018bcfe5687b" + "01"},
		{Seal{Partition: Partition{Stream: 9, Partition: 0}, ClockMs: 5, Sealed: false},
			"0104" + "0000000000000009" + "00000000" + "0000000000000005" + "00"},
	} {
		if got := hex.EncodeToString(SealEntry(nil, c.s)); got != c.want {
			t.Fatalf("seal entry\n got %s\nwant %s", got, c.want)
		}
		b, _ := hex.DecodeString(c.want)
		back, err := DecodeSeal(b)
		if err != nil || !reflect.DeepEqual(back, c.s) {
			t.Fatalf("round trip: %+v %v, want %+v", back, err, c.s)
		}
	}
	bad, _ := hex.DecodeString("0104" + "0000000000000009" + "00000000" + "0000000000000005" + "02")
	if _, err := DecodeSeal(bad); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("flag 2: %v", err)
	}
	if _, err := DecodeSeal(bad[:20]); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestAdoptEntryGolden(t *testing.T) {
	a := Adopt{Partition: Partition{Stream: 3, Partition: 1}, ClockMs: 1700000000123, Start: 0x1234,
		Producers: []meta.ProducerCarry{{ID: 42, Epoch: 2, First: []int32{0, 5}, Last: []int32{4, 9}, Base: []int64{0x1220, 0x1225}}, {ID: 7, Epoch: 0}}}
	b, err := AdoptEntry(nil, a)
	if err != nil {
		t.Fatal(err)
	}
	want := "0105" + "0000000000000003" + "00000001" + "0000018bcfe5687b" + "0000000000001234" + "0002" +
		"000000000000002a" + "0002" + "02" + "00000000" + "00000004" + "0000000000001220" + "00000005" + "00000009" + "0000000000001225" +
		"0000000000000007" + "0000" + "00"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("adopt entry\n got %s\nwant %s", got, want)
	}
	back, err := DecodeAdopt(b)
	if err != nil {
		t.Fatal(err)
	}
	a.Producers[1].First, a.Producers[1].Last, a.Producers[1].Base = nil, nil, nil
	if !reflect.DeepEqual(back, a) {
		t.Fatalf("round trip: %+v, want %+v", back, a)
	}
	for _, n := range []int{len(b) - 1, adoptHeader + 5, adoptHeader - 1} {
		if _, err := DecodeAdopt(b[:n]); !errors.Is(err, ErrBadEntry) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	if _, err := DecodeAdopt(append(append([]byte(nil), b...), 0)); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := AdoptEntry(nil, Adopt{Producers: []meta.ProducerCarry{{ID: 1}, {ID: 1}}}); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("a producer twice: %v", err)
	}
}

// TestStateMove: a sealed partition refuses appends (ErrMoved) and reopens; adopting
// starts a partition at the old journal's end with the carried producers, so a retry of
// a chunk acknowledged before the move is a duplicate with its original offset and the
// next chunk follows its sequence; adopting over retained batches is refused, a repeat
// after writes changes nothing.
func TestStateMove(t *testing.T) {
	old, moved := NewState(0), NewState(0)
	p := Partition{Stream: 1, Partition: 0}
	prod := meta.ChunkProducer{ID: 11, Epoch: 1}
	for i := 0; i < 3; i++ {
		prod.BaseSequence = int32(2 * i)
		if r := old.ApplyAppend(app(t, p, prod, "a", 2)); r.Err != nil || r.Base != int64(2*i) {
			t.Fatalf("append %d: %+v", i, r)
		}
	}
	old.ApplySeal(Seal{Partition: p, Sealed: true})
	if r := old.ApplyAppend(app(t, p, meta.ChunkProducer{}, "x", 1)); !errors.Is(r.Err, ErrMoved) || old.Next(p) != 6 {
		t.Fatalf("append to a sealed partition: %+v", r)
	}
	old.ApplySeal(Seal{Partition: p, Sealed: false})
	if r := old.ApplyAppend(app(t, p, meta.ChunkProducer{}, "x", 1)); r.Err != nil || r.Base != 6 {
		t.Fatalf("append after reopening: %+v", r)
	}
	old.ApplySeal(Seal{Partition: p, Sealed: true})
	carry := old.ProducersOf(p)
	if len(carry) != 1 || carry[0].ID != 11 || !reflect.DeepEqual(carry[0].Base, []int64{0, 2, 4}) {
		t.Fatalf("carry: %+v", carry)
	}
	// The new journal had the partition created empty by an Assign: the adopt replaces it.
	moved.ApplyAssign(Assign{Stream: 1, Partitions: 1})
	if r := moved.ApplyAdopt(Adopt{Partition: p, Start: 7, Producers: carry}); r.Err != nil || moved.Next(p) != 7 {
		t.Fatalf("adopt: %+v next %d", r, moved.Next(p))
	}
	if _, err := moved.Read(p, 3, 1<<20); !errors.Is(err, ErrOffloaded) {
		t.Fatalf("read below the start: %v", err)
	}
	prod.BaseSequence = 4 // the last chunk before the move, retried
	if r := moved.ApplyAppend(app(t, p, prod, "a", 2)); !r.Duplicate || r.Base != 4 {
		t.Fatalf("retry across the move: %+v", r)
	}
	prod.BaseSequence = 8 // a gap
	if r := moved.ApplyAppend(app(t, p, prod, "a", 1)); !errors.Is(r.Err, meta.ErrOutOfOrderSequence) {
		t.Fatalf("gap across the move: %+v", r)
	}
	prod.BaseSequence = 6
	if r := moved.ApplyAppend(app(t, p, prod, "a", 1)); r.Err != nil || r.Base != 7 {
		t.Fatalf("next chunk: %+v", r)
	}
	// A repeat of the adopt after writes changes nothing; one over retained batches is refused.
	if r := moved.ApplyAdopt(Adopt{Partition: p, Start: 7, Producers: carry}); r.Err != nil || moved.Next(p) != 8 {
		t.Fatalf("repeat: %+v next %d", r, moved.Next(p))
	}
	if r := moved.ApplyAdopt(Adopt{Partition: p, Start: 9}); !errors.Is(r.Err, meta.ErrInvalidArgument) || moved.Next(p) != 8 {
		t.Fatalf("adopt over batches: %+v", r)
	}
	// Moving back: the old journal's sealed, emptied partition is adopted at the new end.
	old.ApplyTrim(Trim{Partition: p, Offset: 7, Segment: SegmentRef{Key: "seg/x", Base: 0, End: 7}})
	if r := old.ApplyAdopt(Adopt{Partition: p, Start: 8}); r.Err != nil || old.Next(p) != 8 || old.Sealed(p) || old.Producers() != 0 {
		t.Fatalf("move back: %+v next %d sealed %v producers %d", r, old.Next(p), old.Sealed(p), old.Producers())
	}
}
