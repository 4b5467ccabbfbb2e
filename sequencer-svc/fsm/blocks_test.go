package fsm

import (
	"bytes"
	"fmt"
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
