package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func kafkaState(t *testing.T, f *FSM, group string) string {
	t.Helper()
	st, err := f.DescribeKafkaGroup("default", group)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%+v", st)
}

func advance(t *testing.T, h *harness, ms int64, group string, epoch uint64) (meta.KafkaGroupGeneration, error) {
	t.Helper()
	r := h.apply(ms, AdvanceKafkaGroup("default", group, epoch, "consumer"))
	return r.KafkaGroup, r.Err
}

func commitKafka(h *harness, ms int64, group string, g meta.KafkaGroupGeneration, offs ...meta.KafkaOffset) error {
	r := h.apply(ms, CommitKafkaOffsets(meta.KafkaOffsetCommit{Namespace: "default", Group: group, Generation: g.Generation, Epoch: g.Epoch, Offsets: offs}))
	return r.Err
}

// A coordinator that claims a group fences the previous one: its commits, advances and
// deletions under the old generation are refused and change nothing; the new one's pass.
func TestKafkaGroupStaleGenerationRefused(t *testing.T) {
	h := newHarness(t)
	h.stream("orders", 2)
	a, err := advance(t, h, t0+1, "g1", 0)
	if err != nil || a.Generation != 1 || a.Epoch != h.index {
		t.Fatalf("claim: %+v %v (index %d)", a, err, h.index)
	}
	if err := commitKafka(h, t0+2, "g1", a, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 5, LeaderEpoch: -1, Metadata: "m"}); err != nil {
		t.Fatal(err)
	}
	// Coordinator B takes over.
	b, err := advance(t, h, t0+3, "g1", 0)
	if err != nil || b.Generation != 2 || b.Epoch == a.Epoch {
		t.Fatalf("second claim: %+v %v", b, err)
	}
	before := kafkaState(t, h.f, "g1")
	for name, err := range map[string]error{
		"commit":         commitKafka(h, t0+4, "g1", a, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 9}),
		"commit old gen": commitKafka(h, t0+4, "g1", meta.KafkaGroupGeneration{Generation: 1, Epoch: b.Epoch}, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 9}),
		"advance":        h.apply(t0+4, AdvanceKafkaGroup("default", "g1", a.Epoch, "consumer")).Err,
		"delete offsets": h.apply(t0+4, DeleteKafkaOffsets("default", "g1", a.Epoch, []meta.KafkaTopicPartition{{Topic: "orders", Partition: 0}})).Err,
		"delete group":   h.apply(t0+4, DeleteKafkaGroup("default", "g1", a.Epoch)).Err,
	} {
		if !errors.Is(err, meta.ErrStaleGroupGeneration) {
			t.Errorf("%s under the old generation: %v, want ErrStaleGroupGeneration", name, err)
		}
	}
	if got := kafkaState(t, h.f, "g1"); got != before {
		t.Fatalf("refused writes changed the group:\n%s\nwas\n%s", got, before)
	}
	if err := commitKafka(h, t0+5, "g1", b, meta.KafkaOffset{Topic: "orders", Partition: 1, Offset: 3, LeaderEpoch: 4}); err != nil {
		t.Fatal(err)
	}
	c, err := advance(t, h, t0+6, "g1", b.Epoch)
	if err != nil || c.Generation != 3 {
		t.Fatalf("advance: %+v %v", c, err)
	}
	st, err := h.f.DescribeKafkaGroup("default", "g1")
	if err != nil {
		t.Fatal(err)
	}
	want := []meta.KafkaOffset{{Topic: "orders", Partition: 0, Offset: 5, LeaderEpoch: -1, Metadata: "m", CommittedMs: t0 + 2},
		{Topic: "orders", Partition: 1, Offset: 3, LeaderEpoch: 4, CommittedMs: t0 + 5}}
	if st.Generation != 3 || st.Epoch != c.Epoch || st.ProtocolType != "consumer" || fmt.Sprint(st.Offsets) != fmt.Sprint(want) {
		t.Fatalf("state %+v", st)
	}
	// Deleting drops the offsets; a group created again gets a new epoch, so a coordinator
	// of the deleted one stays fenced even at the same generation.
	if err := h.apply(t0+7, DeleteKafkaOffsets("default", "g1", c.Epoch, []meta.KafkaTopicPartition{{Topic: "orders", Partition: 1}})).Err; err != nil {
		t.Fatal(err)
	}
	if st, _ := h.f.DescribeKafkaGroup("default", "g1"); len(st.Offsets) != 1 {
		t.Fatalf("after offset delete: %+v", st)
	}
	if err := h.apply(t0+8, DeleteKafkaGroup("default", "g1", c.Epoch)).Err; err != nil {
		t.Fatal(err)
	}
	if _, err := h.f.DescribeKafkaGroup("default", "g1"); !errors.Is(err, meta.ErrKafkaGroupNotFound) {
		t.Fatalf("describe deleted: %v", err)
	}
	if err := commitKafka(h, t0+9, "g1", c, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 1}); !errors.Is(err, meta.ErrStaleGroupGeneration) ||
		!errors.Is(err, meta.ErrKafkaGroupNotFound) {
		t.Fatalf("commit to a deleted group: %v", err)
	}
	d, err := advance(t, h, t0+10, "g1", 0)
	if err != nil || d.Generation != 1 || d.Epoch <= c.Epoch {
		t.Fatalf("recreate: %+v %v", d, err)
	}
}

func TestKafkaGroupCommitRefusals(t *testing.T) {
	h := newHarness(t)
	h.stream("orders", 2)
	g, _ := advance(t, h, t0, "g", 0)
	for _, c := range []struct {
		name string
		o    meta.KafkaOffset
		want error
	}{
		{"unknown topic", meta.KafkaOffset{Topic: "nope", Partition: 0, Offset: 1}, meta.ErrStreamNotFound},
		{"partition past the end", meta.KafkaOffset{Topic: "orders", Partition: 2, Offset: 1}, meta.ErrPartitionNotFound},
		{"negative offset", meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: -1}, meta.ErrInvalidArgument},
		{"metadata too long", meta.KafkaOffset{Topic: "orders", Partition: 0, Metadata: string(make([]byte, meta.MaxKafkaOffsetMetadata+1))}, meta.ErrInvalidArgument},
	} {
		if err := commitKafka(h, t0+1, "g", g, c.o); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := h.apply(t0, AdvanceKafkaGroup("default", "bad\x00id", 0, "")).Err; !errors.Is(err, meta.ErrInvalidArgument) {
		t.Errorf("NUL in a group id: %v", err)
	}
	if err := h.apply(t0, AdvanceKafkaGroup("nons", "g", 0, "")).Err; !errors.Is(err, meta.ErrNamespaceNotFound) {
		t.Errorf("missing namespace: %v", err)
	}
	if st, _ := h.f.DescribeKafkaGroup("default", "g"); len(st.Offsets) != 0 {
		t.Fatalf("refused commits wrote %+v", st.Offsets)
	}
}

// A group's generation, epoch and offsets survive a restart of the state machine, and the
// fence holds after it.
func TestKafkaGroupRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, f: f}
	h.stream("orders", 1)
	a, _ := advance(t, h, t0, "g", 0)
	b, _ := advance(t, h, t0+1, "g", a.Epoch)
	if err := commitKafka(h, t0+2, "g", b, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 0}); err != nil {
		t.Fatal(err)
	}
	before := kafkaState(t, f, "g")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h = &harness{t: t, f: f, index: f.AppliedIndex()}
	if got := kafkaState(t, f, "g"); got != before {
		t.Fatalf("after restart:\n%s\nwant\n%s", got, before)
	}
	if err := commitKafka(h, t0+3, "g", a, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 0}); !errors.Is(err, meta.ErrStaleGroupGeneration) {
		t.Fatalf("stale commit after restart: %v", err)
	}
	if err := commitKafka(h, t0+3, "g", b, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 0}); err != nil {
		t.Fatal(err)
	}
	if gs, err := f.ListKafkaGroups("default"); err != nil || len(gs) != 1 || gs[0].Group != "g" || gs[0].Generation != 2 {
		t.Fatalf("list: %+v %v", gs, err)
	}
}

// Golden files of Kafka groups (testdata/v4/), written once with -golden.create when absent
// and never regenerated.
func goldenKafkaGroupCommands() []struct {
	path string
	cmd  *metapb.Command
} {
	adv := AdvanceKafkaGroup("default", "billing-kafka", 0, "consumer")
	adv.StampMs = t0 + 5
	cm := CommitKafkaOffsets(meta.KafkaOffsetCommit{Namespace: "default", Group: "billing-kafka", Generation: 3, Epoch: 17,
		Offsets: []meta.KafkaOffset{{Topic: "orders", Partition: 0, Offset: 120, LeaderEpoch: -1, Metadata: "batch 7"}, {Topic: "orders", Partition: 1}}})
	cm.StampMs = t0 + 6
	return []struct {
		path string
		cmd  *metapb.Command
	}{{"testdata/v4/kafka_group_advance.cmd", adv}, {"testdata/v4/kafka_group_commit.cmd", cm}}
}

func TestGoldenKafkaGroupCommands(t *testing.T) {
	for _, c := range goldenKafkaGroupCommands() {
		b := golden(t, c.path, func() []byte { b, _ := Encode(c.cmd); return b })
		if enc, _ := Encode(c.cmd); !bytes.Equal(enc, b) {
			t.Fatalf("%s: encoding changed:\n got %x\nwant %x", c.path, enc, b)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.GetStampMs() != c.cmd.GetStampMs() || !proto.Equal(got.GetKafkaGroup(), c.cmd.GetKafkaGroup()) {
			t.Fatalf("%s: decoded as %v, want %v", c.path, got, c.cmd)
		}
	}
}

// kafkaGroupHistory builds the state of testdata/v4/kafka_group_state.snap: stream orders of
// 2 partitions, group billing-kafka claimed, advanced, claimed again (generation 3) with
// offsets 7 ("x", leader epoch 2) on partition 0 and 0 on partition 1, and group idle claimed
// once.
func kafkaGroupHistory(t *testing.T, h *harness) meta.KafkaGroupGeneration {
	h.stream("orders", 2)
	a, err := advance(t, h, t0+1000, "billing-kafka", 0)
	if err != nil {
		t.Fatal(err)
	}
	a, _ = advance(t, h, t0+2000, "billing-kafka", a.Epoch)
	a, _ = advance(t, h, t0+3000, "billing-kafka", 0)
	if err := commitKafka(h, t0+4000, "billing-kafka", a, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 7, LeaderEpoch: 2, Metadata: "x"},
		meta.KafkaOffset{Topic: "orders", Partition: 1, Offset: 0, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := advance(t, h, t0+5000, "idle", 0); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestGoldenKafkaGroupSnapshot(t *testing.T) {
	golden(t, "testdata/v4/kafka_group_state.snap", func() []byte {
		h := newHarness(t)
		kafkaGroupHistory(t, h)
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
	f := restoreGolden(t, "testdata/v4/kafka_group_state.snap")
	h := newHarness(t)
	cur := kafkaGroupHistory(t, h)
	for _, g := range []string{"billing-kafka", "idle"} {
		if got, want := kafkaState(t, f, g), kafkaState(t, h.f, g); got != want {
			t.Fatalf("golden snapshot state of %s differs from the history that made it:\n%s\nwant\n%s", g, got, want)
		}
	}
	// The restored state fences as the original.
	g := &harness{t: t, f: f, index: f.AppliedIndex()}
	old := meta.KafkaGroupGeneration{Generation: 2, Epoch: cur.Epoch - 1}
	if err := commitKafka(g, t0+6000, "billing-kafka", old, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 8}); !errors.Is(err, meta.ErrStaleGroupGeneration) {
		t.Fatalf("stale commit: %v", err)
	}
	if err := commitKafka(g, t0+6000, "billing-kafka", cur, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 8}); err != nil {
		t.Fatal(err)
	}
}

// FuzzKafkaGroupCommand applies arbitrary group operations (field 60 of a Command) to a
// state with a stream and a claimed group: no panic, no corrupt state, and a refused
// command changes nothing.
func FuzzKafkaGroupCommand(f *testing.F) {
	for _, c := range goldenKafkaGroupCommands() {
		b, _ := proto.Marshal(c.cmd.GetKafkaGroup())
		f.Add(b)
	}
	for _, c := range []*metapb.Command{DeleteKafkaGroup("default", "g", 3), DeleteKafkaOffsets("default", "g", 3, []meta.KafkaTopicPartition{{Topic: "orders"}})} {
		b, _ := proto.Marshal(c.GetKafkaGroup())
		f.Add(b)
	}
	f.Add([]byte{0x12, 0x02, 0x18, 0x03})
	f.Fuzz(func(t *testing.T, b []byte) {
		h := newHarness(t)
		h.stream("orders", 2)
		advance(t, h, t0, "g", 0)
		before := kafkaState(t, h.f, "g") + kafkaState(t, h.f, "billing-kafka")
		cmd, err := Decode(append(protowire.AppendVarint(protowire.AppendTag(nil, 60, protowire.BytesType), uint64(len(b))), b...))
		if err != nil {
			return
		}
		r := h.apply(t0+1000, cmd)
		if r.Err != nil && kafkaState(t, h.f, "g")+kafkaState(t, h.f, "billing-kafka") != before {
			t.Fatalf("refused (%v) but changed", r.Err)
		}
		if _, err := h.f.ListKafkaGroups("default"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.f.DescribeKafkaGroup("default", "g"); err != nil && !errors.Is(err, meta.ErrKafkaGroupNotFound) {
			t.Fatal(err)
		}
	})
}

// Offsets committed on a topic that was deleted are not the offsets of a topic created
// again under its name: the group answers none for it (Kafka drops a deleted topic's
// offsets), and a commit on the new topic counts.
func TestKafkaGroupOffsetsOfARecreatedTopic(t *testing.T) {
	h := newHarness(t)
	h.stream("orders", 2)
	g, _ := advance(t, h, t0, "g", 0)
	if err := commitKafka(h, t0+1, "g", g, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 500}); err != nil {
		t.Fatal(err)
	}
	if r := h.apply(t0+2, DeleteStream("default", "orders")); r.Err != nil {
		t.Fatal(r.Err)
	}
	h.stream("orders", 2)
	st, err := h.f.DescribeKafkaGroup("default", "g")
	if err != nil || len(st.Offsets) != 0 {
		t.Fatalf("offsets after the topic was created again: %+v %v", st.Offsets, err)
	}
	if err := commitKafka(h, t0+3, "g", g, meta.KafkaOffset{Topic: "orders", Partition: 0, Offset: 3}); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.f.DescribeKafkaGroup("default", "g"); len(st.Offsets) != 1 || st.Offsets[0].Offset != 3 {
		t.Fatalf("a commit on the new topic: %+v", st.Offsets)
	}
}
