package fsm

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Golden files of format v2 (testdata/v2), written once with -golden.create when absent
// and never regenerated.
var createGolden = flag.Bool("golden.create", false, "write golden files that do not exist yet")

func golden(t *testing.T, path string, make func() []byte) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) && *createGolden {
		b = make()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return b
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func goldenSwapCommand() *metapb.Command {
	cmd := SwapIndex(meta.IndexSwap{
		Lease: meta.Lease{StreamID: 4, Partition: 2, Kind: meta.LeaseSegment, Holder: "segmenter-01JDQ8ZK", Epoch: 7, ExpiresMs: t0 + 60_000},
		Old: []meta.IndexEntry{
			{BaseOffset: 100, Count: 10, Kind: meta.KindWAL, Object: "wal/standard/node-1/01JDQ8ZK3M4N5P6Q7R8S9T0V1W.wal", Offset: 64, Length: 1000, MaxTimestamp: t0 - 3},
			{BaseOffset: 110, Count: 5, Kind: meta.KindWAL, Object: "wal/standard/node-2/01JDQ8ZM3M4N5P6Q7R8S9T0V1W.wal", Offset: 2048, Length: 500, MaxTimestamp: t0},
		},
		New: []meta.IndexEntry{{BaseOffset: 100, Count: 15, Kind: meta.KindSegment, Object: "seg/4/2/100-01JDQ8ZP.seg", Offset: 64, Length: 1400, MaxTimestamp: t0}},
	})
	cmd.StampMs = t0 + 5
	return cmd
}

func TestGoldenV2Commands(t *testing.T) {
	cmds := map[string]*metapb.Command{
		"swap_index.cmd":     goldenSwapCommand(),
		"acquire_lease.cmd":  AcquireLease(4, 2, meta.LeaseCompact, "compactor-1", 30_000),
		"trim_partition.cmd": TrimPartition(4, 2, 1234),
		"forget_retired.cmd": ForgetRetired([]string{"wal/a", "seg/4/2/100-01JDQ8ZP.seg"}),
		"release_lease.cmd":  ReleaseLease(meta.Lease{StreamID: 4, Partition: 2, Kind: meta.LeaseSegment, Holder: "h", Epoch: 3}),
	}
	for name, want := range cmds {
		b := golden(t, "testdata/v2/"+name, func() []byte { b, _ := Encode(want); return b })
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.String(), want.String()) {
			t.Fatalf("%s decodes to %v, want %v", name, got, want)
		}
		if enc, _ := Encode(want); !bytes.Equal(enc, b) {
			t.Fatalf("%s: encoding changed:\n got %x\nwant %x", name, enc, b)
		}
	}
}

func TestGoldenSnapshotV2(t *testing.T) {
	golden(t, "testdata/v2/state.snap", func() []byte {
		h := newHarness(t)
		v2History(h)
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
	f := restoreGolden(t, "testdata/v2/state.snap")
	h := newHarness(t)
	v2History(h)
	if logicalState(t, f) != logicalState(t, h.f) {
		t.Fatalf("golden snapshot state differs from the history that made it:\n%s\nwant\n%s", logicalState(t, f), logicalState(t, h.f))
	}
	checkV2State(t, f)
}
