package journal

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

func TestAppendEntryGolden(t *testing.T) {
	a := Append{Partition: Partition{Stream: 0x0102030405060708, Partition: 7},
		Producer: meta.ChunkProducer{ID: 42, Epoch: 3, BaseSequence: 9}, ClockMs: 1700000000123, RequestID: 0x1122334455667788, Batches: []byte{0xaa, 0xbb}}
	got := hex.EncodeToString(AppendEntry(nil, a))
	want := "0101" + "0102030405060708" + "00000007" + "000000000000002a" + "0003" + "00000009" + "0000018bcfe5687b" + "1122334455667788" + "00000002" + "aabb"
	if got != want {
		t.Fatalf("append entry\n got %s\nwant %s", got, want)
	}
	b, _ := hex.DecodeString(want)
	back, err := DecodeAppend(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, a) {
		t.Fatalf("round trip: %+v, want %+v", back, a)
	}
}

func TestTrimEntryGolden(t *testing.T) {
	tr := Trim{Partition: Partition{Stream: 5, Partition: 1}, ClockMs: 1700000000123, Offset: 100,
		Segment: SegmentRef{Key: "seg/a", Base: 0, End: 100}}
	got := hex.EncodeToString(TrimEntry(nil, tr))
	want := "0102" + "0000000000000005" + "00000001" + "0000018bcfe5687b" + "0000000000000064" + "0000000000000000" + "0000000000000064" + "0005" + hex.EncodeToString([]byte("seg/a"))
	if got != want {
		t.Fatalf("trim entry\n got %s\nwant %s", got, want)
	}
	b, _ := hex.DecodeString(want)
	back, err := DecodeTrim(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, tr) {
		t.Fatalf("round trip: %+v, want %+v", back, tr)
	}
}

func TestDecodeEntryErrors(t *testing.T) {
	good := AppendEntry(nil, Append{Partition: Partition{Stream: 1}, Batches: []byte{1}})
	cases := map[string][]byte{
		"empty":        nil,
		"version":      append([]byte{9}, good[1:]...),
		"kind":         append([]byte{1, 7}, good[2:]...),
		"short header": good[:20],
		"length":       good[:len(good)-1],
		"no batches":   AppendEntry(nil, Append{}),
	}
	for name, b := range cases {
		if _, err := DecodeAppend(b); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: %v, want ErrBadEntry", name, err)
		}
	}
	trim := TrimEntry(nil, Trim{Offset: 10, Segment: SegmentRef{Key: "k", End: 9}})
	if _, err := DecodeTrim(trim); !errors.Is(err, ErrBadEntry) {
		t.Errorf("trim whose segment does not end at its offset: %v", err)
	}
	if _, err := DecodeTrim(good); !errors.Is(err, ErrBadEntry) {
		t.Errorf("append decoded as trim: %v", err)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(AppendEntry(nil, Append{Partition: Partition{Stream: 3, Partition: 1}, Producer: meta.ChunkProducer{ID: 1}, ClockMs: 5, Batches: batch(f, "x", 2)}))
	f.Add(TrimEntry(nil, Trim{Partition: Partition{Stream: 3}, Offset: 4, Segment: SegmentRef{Key: "s", End: 4}}))
	f.Add(AssignEntry(nil, Assign{Stream: 2, Partitions: 4, ClockMs: 1}))
	f.Add(SealEntry(nil, Seal{Partition: Partition{Stream: 2}, ClockMs: 1, Sealed: true}))
	adopt, _ := AdoptEntry(nil, Adopt{Partition: Partition{Stream: 2}, Start: 9, Producers: []meta.ProducerCarry{{ID: 4, First: []int32{0}, Last: []int32{1}, Base: []int64{7}}}})
	f.Add(adopt)
	f.Add([]byte{1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, err := EntryKind(b)
		if err != nil {
			return
		}
		st := NewState(4)
		switch kind {
		case KindAppend:
			a, err := DecodeAppend(b)
			if err != nil {
				return
			}
			if got := AppendEntry(nil, a); string(got) != string(b) {
				t.Fatalf("re-encoding differs")
			}
			r := st.ApplyAppend(a)
			if r.Err == nil {
				rr, err := st.Read(a.Partition, 0, 1<<20)
				if err != nil || rr.Next != r.Count {
					t.Fatalf("read back: %+v %v, want next %d", rr, err, r.Count)
				}
			}
		case KindTrim:
			tr, err := DecodeTrim(b)
			if err != nil {
				return
			}
			if got := TrimEntry(nil, tr); string(got) != string(b) {
				t.Fatalf("re-encoding differs")
			}
			st.ApplyTrim(tr)
		case KindAssign:
			a, err := DecodeAssign(b)
			if err != nil {
				return
			}
			if got := AssignEntry(nil, a); string(got) != string(b) {
				t.Fatalf("re-encoding differs")
			}
			st.ApplyAssign(a)
		case KindSeal:
			e, err := DecodeSeal(b)
			if err != nil {
				return
			}
			if got := SealEntry(nil, e); string(got) != string(b) {
				t.Fatalf("re-encoding differs")
			}
			st.ApplySeal(e)
		case KindAdopt:
			a, err := DecodeAdopt(b)
			if err != nil {
				return
			}
			if got, err := AdoptEntry(nil, a); err != nil || string(got) != string(b) {
				t.Fatalf("re-encoding differs (%v)", err)
			}
			if r := st.ApplyAdopt(a); r.Err != nil || st.Next(a.Partition) != a.Start {
				t.Fatalf("adopt into an empty state: %+v next %d", r, st.Next(a.Partition))
			}
		}
	})
}

func TestAssignEntryGolden(t *testing.T) {
	a := Assign{Stream: 9, Partitions: 3, ClockMs: 1700000000123}
	got := hex.EncodeToString(AssignEntry(nil, a))
	want := "0103" + "0000000000000009" + "00000003" + "0000018bcfe5687b"
	if got != want {
		t.Fatalf("assign entry\n got %s\nwant %s", got, want)
	}
	b, _ := hex.DecodeString(want)
	if back, err := DecodeAssign(b); err != nil || back != a {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	if _, err := DecodeAssign(AssignEntry(nil, Assign{Partitions: meta.MaxPartitions + 1})); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("too many partitions: %v", err)
	}
}
