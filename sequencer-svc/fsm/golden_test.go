package fsm

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Golden files in testdata/v1 were written once by this version and are never
// regenerated: every later version must still read them.

// goldenCommand is testdata/v1/commit_wal.cmd, written before per-chunk answers: all or
// nothing.
func goldenCommand() *metapb.Command {
	cmd := CommitWal(meta.CommitWal{NodeID: "node-1", Object: "wal/standard/node-1/01JDQ8ZK3M4N5P6Q7R8S9T0V1W.wal",
		Class: meta.ClassStandard, CreatedMs: t0, AllOrNothing: true, Chunks: []meta.Chunk{
			{StreamID: 1, Partition: 0, Records: 10, Offset: 64, Length: 1000, MaxTimestamp: t0 - 3},
			{StreamID: 1, Partition: 2, Records: 1, Offset: 1100, Length: 90, MaxTimestamp: t0 - 1},
			{StreamID: 4, Partition: 1, Records: 7, Offset: 1230, Length: 300, MaxTimestamp: t0},
		}})
	cmd.StampMs = t0 + 5
	return cmd
}

// goldenHistory builds the state saved in testdata/v1/state.snap.
func goldenHistory(h *harness) {
	h.apply(t0, CreateNamespace("team-a"))
	s := h.stream("orders", 3)
	h.apply(t0, CreateStream(meta.StreamConfig{Namespace: "team-a", Name: "logs", Partitions: 1, CleanupPolicy: "compact"}))
	h.apply(t0, RegisterNode("seq-1", "127.0.0.1:7070"))
	for i, obj := range []string{"wal/a", "wal/b", "wal/c"} {
		h.apply(t0+int64(i)*1000, CommitWal(meta.CommitWal{Object: obj, CreatedMs: t0,
			Chunks: []meta.Chunk{chunk(s.ID, int32(i%3), 5, 0, 100), chunk(s.ID, 0, 2, 100, 10)}}))
	}
}

func TestGoldenCommand(t *testing.T) {
	b, err := os.ReadFile("testdata/v1/commit_wal.cmd")
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommitWal(cmd.GetCommitWal())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := DecodeCommitWal(goldenCommand().GetCommitWal())
	if cmd.GetStampMs() != t0+5 || !reflect.DeepEqual(got, want) {
		t.Fatalf("golden command decodes to %+v stamp %d", got, cmd.GetStampMs())
	}
	if enc, _ := Encode(goldenCommand()); !bytes.Equal(enc, b) {
		t.Fatalf("encoding changed:\n got %x\nwant %x", enc, b)
	}
}

func TestGoldenSnapshot(t *testing.T) {
	b, err := os.ReadFile("testdata/v1/state.snap")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Restore(nopCloser{bytes.NewReader(b)}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	goldenHistory(h)
	if logicalState(t, f) != logicalState(t, h.f) {
		t.Fatalf("golden snapshot state differs from the history that made it:\n%s\nwant\n%s", logicalState(t, f), logicalState(t, h.f))
	}
	es, st, err := f.Lookup(1, 0, 0, MaxLookup)
	if err != nil || st.HighWatermark != 11 || len(es) != 4 || es[1].BaseOffset != 5 || es[1].Object != "wal/a" {
		t.Fatalf("%+v %+v %v", es, st, err)
	}
	if f.NodeAddr("seq-1") != "127.0.0.1:7070" || f.ClockMs() != t0+2000 {
		t.Fatal("meta of golden state")
	}
}
