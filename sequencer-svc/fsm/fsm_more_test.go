package fsm

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	bolt "go.etcd.io/bbolt"
)

func TestClockNeverMovesBackward(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ stamp, want int64 }{{t0, t0}, {t0 - 5000, t0}, {t0 + 7, t0 + 7}, {0, t0 + 7}} {
		h.apply(tc.stamp, CreateNamespace("ns"))
		if got := h.f.ClockMs(); got != tc.want {
			t.Fatalf("stamp %d: clock %d, want %d", tc.stamp, got, tc.want)
		}
	}
	// A stream created under a late stamp takes the fsm clock, not the stamp.
	r := h.apply(t0-60_000, CreateStream(meta.StreamConfig{Name: "x", Partitions: 1}))
	if r.Err != nil || r.Stream.CreatedAtMs != t0+7 {
		t.Fatalf("%+v", r)
	}
}

// TestCommitToDeletedStreamChangesNothing: an all-or-nothing commit (a client that
// predates per-chunk answers) with a chunk of a deleted stream or missing partition
// fails whole.
func TestCommitToDeletedStreamChangesNothing(t *testing.T) {
	h := newHarness(t)
	a := h.stream("a", 2)
	b := h.stream("b", 1)
	if r := h.apply(t0, DeleteStream("default", "b")); r.Err != nil {
		t.Fatal(r.Err)
	}
	_, err := h.commit(t0, meta.CommitWal{Object: "o1", CreatedMs: t0, AllOrNothing: true, Chunks: []meta.Chunk{chunk(a.ID, 0, 1, 0, 1), chunk(b.ID, 0, 1, 1, 1)}})
	if !errors.Is(err, meta.ErrStreamNotFound) {
		t.Fatalf("deleted stream: %v", err)
	}
	_, err = h.commit(t0, meta.CommitWal{Object: "o2", CreatedMs: t0, AllOrNothing: true, Chunks: []meta.Chunk{chunk(a.ID, 0, 1, 0, 1), chunk(a.ID, 2, 1, 1, 1)}})
	if !errors.Is(err, meta.ErrPartitionNotFound) {
		t.Fatalf("missing partition: %v", err)
	}
	_, parts, _ := h.f.GetStream("default", "a")
	if parts[0].HighWatermark != 0 || countEntries(t, h.f) != 0 || countBucket(t, h.f, bDedupe) != 0 {
		t.Fatalf("a failed commit left state behind: %+v", parts)
	}
	// The failed object can still be committed once fixed.
	if res, err := h.commit(t0, meta.CommitWal{Object: "o1", CreatedMs: t0, Chunks: []meta.Chunk{chunk(a.ID, 0, 1, 0, 1)}}); err != nil || res.Duplicate {
		t.Fatalf("%+v %v", res, err)
	}
	// Deleting a stream drops its partitions and index entries; the name can be reused
	// with a new id.
	if r := h.apply(t0, DeleteStream("default", "a")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if countEntries(t, h.f) != 0 || countBucket(t, h.f, bGroups) != 0 {
		t.Fatal("delete left partitions or index entries")
	}
	if a2 := h.stream("a", 1); a2.ID <= b.ID {
		t.Fatalf("reused id %d", a2.ID)
	}
}

func TestStreamAdminErrors(t *testing.T) {
	h := newHarness(t)
	h.stream("s", 2)
	p := func(v int32) *int32 { return &v }
	i64 := func(v int64) *int64 { return &v }
	str := func(v string) *string { return &v }
	long := string(bytes.Repeat([]byte("a"), 250))
	for _, tc := range []struct {
		name string
		cmd  func() *Result
		err  error
	}{
		{"bad name", func() *Result { return h.apply(t0, CreateStream(meta.StreamConfig{Name: "a/b", Partitions: 1})) }, meta.ErrInvalidArgument},
		{"dot", func() *Result { return h.apply(t0, CreateStream(meta.StreamConfig{Name: "..", Partitions: 1})) }, meta.ErrInvalidArgument},
		{"long name", func() *Result { return h.apply(t0, CreateStream(meta.StreamConfig{Name: long, Partitions: 1})) }, meta.ErrInvalidArgument},
		{"no partitions", func() *Result { return h.apply(t0, CreateStream(meta.StreamConfig{Name: "x"})) }, meta.ErrInvalidArgument},
		{"too many partitions", func() *Result {
			return h.apply(t0, CreateStream(meta.StreamConfig{Name: "x", Partitions: meta.MaxPartitions + 1}))
		}, meta.ErrInvalidArgument},
		{"class", func() *Result {
			return h.apply(t0, CreateStream(meta.StreamConfig{Name: "x", Partitions: 1, Class: "gold"}))
		}, meta.ErrInvalidArgument},
		{"arrow", func() *Result {
			return h.apply(t0, CreateStream(meta.StreamConfig{Name: "x", Partitions: 1, Encoding: meta.EncodingArrow}))
		}, meta.ErrInvalidArgument},
		{"cleanup", func() *Result {
			return h.apply(t0, CreateStream(meta.StreamConfig{Name: "x", Partitions: 1, CleanupPolicy: "forever"}))
		}, meta.ErrInvalidArgument},
		{"retention", func() *Result {
			return h.apply(t0, CreateStream(meta.StreamConfig{Name: "x", Partitions: 1, RetentionMs: -2}))
		}, meta.ErrInvalidArgument},
		{"no namespace", func() *Result {
			return h.apply(t0, CreateStream(meta.StreamConfig{Namespace: "nope", Name: "x", Partitions: 1}))
		}, meta.ErrNamespaceNotFound},
		{"exists", func() *Result { return h.apply(t0, CreateStream(meta.StreamConfig{Name: "s", Partitions: 1})) }, meta.ErrStreamExists},
		{"shrink", func() *Result { return h.apply(t0, UpdateStream("default", "s", meta.StreamPatch{Partitions: p(1)})) }, meta.ErrInvalidArgument},
		{"patch retention", func() *Result {
			return h.apply(t0, UpdateStream("default", "s", meta.StreamPatch{RetentionBytes: i64(-3)}))
		}, meta.ErrInvalidArgument},
		{"patch cleanup", func() *Result {
			return h.apply(t0, UpdateStream("default", "s", meta.StreamPatch{CleanupPolicy: str("x")}))
		}, meta.ErrInvalidArgument},
		{"update missing", func() *Result { return h.apply(t0, UpdateStream("default", "zz", meta.StreamPatch{})) }, meta.ErrStreamNotFound},
		{"delete missing", func() *Result { return h.apply(t0, DeleteStream("default", "zz")) }, meta.ErrStreamNotFound},
		{"delete no ns", func() *Result { return h.apply(t0, DeleteStream("nope", "s")) }, meta.ErrNamespaceNotFound},
		{"bad namespace", func() *Result { return h.apply(t0, CreateNamespace("")) }, meta.ErrInvalidArgument},
		{"empty commit", func() *Result { return h.apply(t0, CommitWal(meta.CommitWal{Object: "o", CreatedMs: t0})) }, meta.ErrInvalidArgument},
		{"zero records", func() *Result {
			return h.apply(t0, CommitWal(meta.CommitWal{Object: "o", CreatedMs: t0, Chunks: []meta.Chunk{{StreamID: 1, Length: 1}}}))
		}, meta.ErrInvalidArgument},
		{"garbage entry", func() *Result {
			h.index++
			r, _ := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: []byte{0xff, 0xff}}).(*Result)
			return r
		}, ErrBadCommand},
	} {
		r := tc.cmd()
		if !errors.Is(r.Err, tc.err) {
			t.Errorf("%s: err %v, want %v", tc.name, r.Err, tc.err)
		}
	}
	// Defaults and a valid update.
	s, parts, err := h.f.GetStream("default", "s")
	if err != nil || len(parts) != 2 || s.Class != meta.ClassStandard || s.Encoding != meta.EncodingKafka ||
		s.CleanupPolicy != meta.CleanupDelete || s.RetentionMs != DefaultRetentionMs || s.RetentionBytes != -1 {
		t.Fatalf("%+v %v", s, err)
	}
	r := h.apply(t0, UpdateStream("default", "s", meta.StreamPatch{Partitions: p(4), CleanupPolicy: str("compact")}))
	if r.Err != nil || r.Stream.Partitions != 4 || r.Stream.CleanupPolicy != "compact" {
		t.Fatalf("%+v", r)
	}
	if _, parts, _ = h.f.GetStream("default", "s"); len(parts) != 4 {
		t.Fatalf("%d partitions", len(parts))
	}
	// Namespaces: idempotent create, "default" always there.
	h.apply(t0, CreateNamespace("team-a"))
	h.apply(t0, CreateNamespace("team-a"))
	ns, _ := h.f.ListNamespaces()
	if !reflect.DeepEqual(ns, []string{"default", "team-a"}) {
		t.Fatalf("namespaces %v", ns)
	}
	if _, err := h.f.ListStreams("nope"); !errors.Is(err, meta.ErrNamespaceNotFound) {
		t.Fatal(err)
	}
}

func TestReplayIsSkipped(t *testing.T) {
	h := newHarness(t)
	s := h.stream("s", 1)
	e := h.entry(t0, CommitWal(meta.CommitWal{Object: "o", CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 5, 0, 1)}}))
	e2 := h.entry(t0, CommitWal(meta.CommitWal{Object: "o2", CreatedMs: t0, Chunks: []meta.Chunk{chunk(s.ID, 0, 5, 0, 1)}}))
	out := h.f.ApplyBatch([]*raft.Log{e, e2})
	if out[0].(*Result).Commit.BaseOffsets[0] != 0 || out[1].(*Result).Commit.BaseOffsets[0] != 5 {
		t.Fatalf("%+v %+v", out[0], out[1])
	}
	// Replaying the same entries (a restart before the snapshot) changes nothing.
	out = h.f.ApplyBatch([]*raft.Log{e, e2})
	if out[0] != nil || out[1] != nil {
		t.Fatal("replayed entries were applied")
	}
	if _, parts, _ := h.f.GetStream("default", "s"); parts[0].HighWatermark != 10 || h.f.AppliedIndex() != e2.Index {
		t.Fatalf("%+v applied %d", parts, h.f.AppliedIndex())
	}
}

func TestSnapshotRestore(t *testing.T) {
	h := newHarness(t)
	s := h.stream("s", 3)
	for i := range 20 {
		if _, err := h.commit(t0+int64(i), meta.CommitWal{Object: "o" + string(rune('a'+i)), CreatedMs: t0,
			Chunks: []meta.Chunk{chunk(s.ID, int32(i%3), int64(i+1), 0, 10)}}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	sink := &memSink{Buffer: &buf}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	var resets []meta.Event
	g, err := Open(filepath.Join(t.TempDir(), "other.db"), Options{NoSync: true, Publish: func(e []meta.Event) { resets = append(resets, e...) }})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Restore(nopCloser{bytes.NewReader(buf.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if len(resets) != 1 || !resets[0].Reset || resets[0].AppliedIndex != h.index {
		t.Fatalf("restore events %+v", resets)
	}
	if dumpState(t, g) != dumpState(t, h.f) {
		t.Fatalf("restored state differs:\n%s\nwant:\n%s", dumpState(t, g), dumpState(t, h.f))
	}
	// A damaged snapshot is refused and the state stays.
	bad := bytes.Clone(buf.Bytes())
	bad[len(bad)/2] ^= 1
	if err := g.Restore(nopCloser{bytes.NewReader(bad)}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged snapshot: %v", err)
	}
	if err := g.Restore(nopCloser{bytes.NewReader(buf.Bytes()[:100])}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short snapshot: %v", err)
	}
	if dumpState(t, g) != dumpState(t, h.f) {
		t.Fatal("a refused snapshot changed the state")
	}
}

func TestRestoreRefusesForeignDatabase(t *testing.T) {
	h := newHarness(t)
	h.stream("s", 1)
	before := dumpState(t, h.f)
	other, err := bolt.Open(filepath.Join(t.TempDir(), "foreign.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("x")); return err }); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := other.View(func(tx *bolt.Tx) error { return WriteSnapshot(&buf, tx) }); err != nil {
		t.Fatal(err)
	}
	if err := h.f.Restore(nopCloser{bytes.NewReader(buf.Bytes())}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("foreign database: %v", err)
	}
	if dumpState(t, h.f) != before {
		t.Fatal("a refused snapshot changed the state")
	}
}

// TestNamespaceAndStreamInOneBatch: a namespace created earlier in the same ApplyBatch is
// seen by the commands after it. (bbolt answers Get of a key put with a nil value in the
// same transaction with nil; followers batch entries differently from the leader, so a
// Get-based check would make replicas diverge.) The outcome must not depend on batching.
func TestNamespaceAndStreamInOneBatch(t *testing.T) {
	cmds := func(h *harness) []*raft.Log {
		return []*raft.Log{
			h.entry(t0, CreateNamespace("bgrpc")),
			h.entry(t0, CreateStream(meta.StreamConfig{Namespace: "bgrpc", Name: "bg", Partitions: 1})),
			h.entry(t0, CreateNamespace("bgrpc")), // idempotent inside the batch too
		}
	}
	batched := newHarness(t)
	out := batched.f.ApplyBatch(cmds(batched))
	for i, o := range out {
		if r, _ := o.(*Result); r == nil || r.Err != nil {
			t.Fatalf("entry %d in one batch: %+v", i, o)
		}
	}
	single := newHarness(t)
	for _, e := range cmds(single) {
		single.f.Apply(e)
	}
	for _, h := range []*harness{batched, single} {
		if _, _, err := h.f.GetStream("bgrpc", "bg"); err != nil {
			t.Fatalf("stream missing: %v", err)
		}
	}
	if a, b := logicalState(t, batched.f), logicalState(t, single.f); a != b {
		t.Fatalf("state depends on batching:\n%s\nvs\n%s", a, b)
	}
}
