package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	bolt "go.etcd.io/bbolt"
)

func segEntry(base, count int64, obj string) meta.IndexEntry {
	return meta.IndexEntry{BaseOffset: base, Count: count, Kind: meta.KindSegment, Object: obj, Offset: 64, Length: 100 * count, MaxTimestamp: t0 + base}
}

// TestAppendSegments: a quorum partition's index takes segments at its high watermark
// under the offload lease; a retry of an applied append changes nothing (also after the
// lease ran out); a stale lease, a gap, an overlap and a standard stream are refused
// with nothing changed; retention trims the appended entries as any other.
func TestAppendSegments(t *testing.T) {
	h := newHarness(t)
	q := h.apply(t0, CreateStream(meta.StreamConfig{Name: "q", Partitions: 2, Class: meta.ClassQuorum})).Stream
	std := h.stream("s", 1)
	l := h.apply(t0, AcquireLease(q.ID, 0, meta.LeaseOffload, "journal-j0", 30_000)).Lease
	if l.Epoch == 0 {
		t.Fatal("no lease")
	}
	first := meta.SegmentAppend{Lease: l, Entries: []meta.IndexEntry{segEntry(0, 10, "seg/a")}}
	h.events = nil
	if r := h.apply(t0+1, AppendSegments(first)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(h.events) != 1 || len(h.events[0].Partitions) != 1 || h.events[0].Partitions[0].HighWatermark != 10 ||
		len(h.events[0].Partitions[0].Added) != 1 || h.events[0].Partitions[0].Added[0].Object != "seg/a" {
		t.Fatalf("events %+v", h.events)
	}
	before := indexState(t, h.f)
	h.events = nil
	if r := h.apply(t0+2, AppendSegments(first)); r.Err != nil || len(h.events) != 0 || indexState(t, h.f) != before {
		t.Fatalf("retry: %v, events %+v, state changed %v", r.Err, h.events, indexState(t, h.f) != before)
	}
	// After the lease ran out, a retry still answers nil.
	if r := h.apply(t0+40_000, AppendSegments(first)); r.Err != nil {
		t.Fatalf("retry after the lease ran out: %v", r.Err)
	}
	if r := h.apply(t0+40_001, AppendSegments(meta.SegmentAppend{Lease: l, Entries: []meta.IndexEntry{segEntry(10, 5, "seg/b")}})); !errors.Is(r.Err, meta.ErrLeaseLost) {
		t.Fatalf("expired lease: %v", r.Err)
	}
	l2 := h.apply(t0+40_002, AcquireLease(q.ID, 0, meta.LeaseOffload, "journal-j0", 30_000)).Lease
	if l2.Epoch != l.Epoch+1 {
		t.Fatalf("new grant epoch %d after %d", l2.Epoch, l.Epoch)
	}
	for name, es := range map[string][]meta.IndexEntry{
		"gap":     {segEntry(11, 5, "seg/x")},
		"overlap": {segEntry(5, 10, "seg/x")},
		"other":   {segEntry(0, 10, "seg/other")}, // the range is in the index under another object
	} {
		if r := h.apply(t0+40_003, AppendSegments(meta.SegmentAppend{Lease: l2, Entries: es})); !errors.Is(r.Err, meta.ErrIndexChanged) {
			t.Fatalf("%s: %v", name, r.Err)
		}
	}
	if r := h.apply(t0+40_004, AppendSegments(meta.SegmentAppend{Lease: l2, Entries: []meta.IndexEntry{segEntry(10, 5, "seg/b"), segEntry(15, 5, "seg/c")}})); r.Err != nil {
		t.Fatal(r.Err)
	}
	es, st, err := h.f.Lookup(q.ID, 0, 12, 10)
	if err != nil || st.HighWatermark != 20 || len(es) != 2 || es[0].Object != "seg/b" || es[1].Object != "seg/c" || st.Bytes != 2000 {
		t.Fatalf("lookup: %+v %+v %v", es, st, err)
	}
	if _, st1, _ := h.f.Lookup(q.ID, 1, 0, 0); st1.HighWatermark != 0 {
		t.Fatalf("partition 1 moved: %+v", st1)
	}
	// A standard stream's index is the sequencer's own.
	ls := h.apply(t0+40_005, AcquireLease(std.ID, 0, meta.LeaseOffload, "journal-j0", 30_000)).Lease
	if r := h.apply(t0+40_006, AppendSegments(meta.SegmentAppend{Lease: ls, Entries: []meta.IndexEntry{segEntry(0, 1, "seg/s")}})); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("standard stream: %v", r.Err)
	}
	// Retention trims the segments; the objects are retired.
	if r := h.apply(t0+40_007, TrimPartition(q.ID, 0, 15)); r.Err != nil || r.Partition.LogStart != 15 {
		t.Fatalf("trim: %+v %v", r.Partition, r.Err)
	}
	refd, _ := h.f.Referenced([]string{"seg/a", "seg/b", "seg/c"})
	if refd[0] || refd[1] || !refd[2] {
		t.Fatalf("referenced after trim: %v", refd)
	}
	// A retry of the first append after its entries were trimmed changes nothing.
	before = indexState(t, h.f)
	if r := h.apply(t0+40_008, AppendSegments(meta.SegmentAppend{Lease: l2, Entries: []meta.IndexEntry{segEntry(10, 5, "seg/b"), segEntry(15, 5, "seg/c")}})); r.Err != nil {
		t.Fatalf("retry after a trim: %v", r.Err)
	}
	if indexState(t, h.f) != before {
		t.Fatal("a retry after a trim changed the state")
	}
}

// indexState dumps the buckets an append writes: index blocks, partition groups,
// references and the retired set.
func indexState(t *testing.T, f *FSM) string {
	t.Helper()
	var b strings.Builder
	err := f.view(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bBlocks, bGroups, bRefs, bRetired} {
			fmt.Fprintf(&b, "[%s]\n", name)
			if err := tx.Bucket(name).ForEach(func(k, v []byte) error {
				fmt.Fprintf(&b, "%x=%x\n", k, v)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestCheckSegmentAppend(t *testing.T) {
	l := meta.Lease{StreamID: 1, Kind: meta.LeaseOffload, Holder: "h", Epoch: 1}
	wal := segEntry(0, 1, "w")
	wal.Kind = meta.KindWAL
	seg := meta.LeaseSegment
	for name, tc := range map[string]struct {
		a  meta.SegmentAppend
		ok bool
	}{
		"ok":         {meta.SegmentAppend{Lease: l, Entries: []meta.IndexEntry{segEntry(0, 1, "a"), segEntry(1, 2, "b")}}, true},
		"none":       {meta.SegmentAppend{Lease: l}, false},
		"gap":        {meta.SegmentAppend{Lease: l, Entries: []meta.IndexEntry{segEntry(0, 1, "a"), segEntry(2, 2, "b")}}, false},
		"wal":        {meta.SegmentAppend{Lease: l, Entries: []meta.IndexEntry{wal}}, false},
		"no object":  {meta.SegmentAppend{Lease: l, Entries: []meta.IndexEntry{segEntry(0, 1, "")}}, false},
		"zero count": {meta.SegmentAppend{Lease: l, Entries: []meta.IndexEntry{segEntry(0, 0, "a")}}, false},
		"kind":       {meta.SegmentAppend{Lease: meta.Lease{StreamID: 1, Kind: seg, Holder: "h", Epoch: 1}, Entries: []meta.IndexEntry{segEntry(0, 1, "a")}}, false},
		"no epoch":   {meta.SegmentAppend{Lease: meta.Lease{StreamID: 1, Kind: meta.LeaseOffload, Holder: "h"}, Entries: []meta.IndexEntry{segEntry(0, 1, "a")}}, false},
	} {
		err := CheckSegmentAppend(tc.a)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, meta.ErrInvalidArgument)) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestGoldenAppendSegmentsCommand: the command's bytes (testdata/v4/append_segments.cmd,
// written once with -golden.create) decode to the same command and back.
func TestGoldenAppendSegmentsCommand(t *testing.T) {
	cmd := AppendSegments(meta.SegmentAppend{Lease: meta.Lease{StreamID: 7, Partition: 3, Kind: meta.LeaseOffload, Holder: "journal-j0", Epoch: 2},
		Entries: []meta.IndexEntry{segEntry(100, 50, "seg/7/3/100-01J00000000000000000000000.seg"), segEntry(150, 5, "seg/7/3/150-01J00000000000000000000001.seg")}})
	cmd.StampMs = t0 + 5
	path := "testdata/v4/append_segments.cmd"
	b := golden(t, path, func() []byte { b, _ := Encode(cmd); return b })
	got, err := Decode(b)
	if err != nil || got.String() != cmd.String() {
		t.Fatalf("%s: %v: %v", path, err, got)
	}
	if enc, _ := Encode(cmd); !bytes.Equal(enc, b) {
		t.Fatalf("%s: encoding changed:\n got %x\nwant %x", path, enc, b)
	}
	a := SegmentAppendOf(got.GetAppendSegments())
	if a.Lease.Holder != "journal-j0" || a.Lease.Epoch != 2 || len(a.Entries) != 2 || a.Entries[1].BaseOffset != 150 || a.Entries[0].Kind != meta.KindSegment {
		t.Fatalf("decoded %+v", a)
	}
}
