package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Golden files of named consumers (testdata/v4/), written once with -golden.create when
// absent and never regenerated: a heartbeat and an offset commit command, and a snapshot
// holding consumer state.

func goldenConsumerCommands() []struct {
	path string
	cmd  *metapb.Command
} {
	hb := ConsumerHeartbeat(meta.ConsumerHeartbeat{Namespace: "default", Consumer: "billing", Stream: "orders", Member: "host-1/4242",
		Session: 10 * time.Second})
	hb.StampMs = t0 + 5
	cm := CommitConsumerOffsets(meta.ConsumerCommit{Namespace: "default", Consumer: "billing", Stream: "orders", Member: "host-1/4242",
		Offsets: []meta.ConsumerOffset{{Partition: 0, Offset: 120, Metadata: "batch 7", Epoch: 3}, {Partition: 1, Offset: 0, Epoch: 1}}})
	cm.StampMs = t0 + 6
	return []struct {
		path string
		cmd  *metapb.Command
	}{{"testdata/v4/consumer_heartbeat.cmd", hb}, {"testdata/v4/consumer_commit.cmd", cm}}
}

func TestGoldenConsumerCommands(t *testing.T) {
	for _, c := range goldenConsumerCommands() {
		b := golden(t, c.path, func() []byte { b, _ := Encode(c.cmd); return b })
		if enc, _ := Encode(c.cmd); !bytes.Equal(enc, b) {
			t.Fatalf("%s: encoding changed:\n got %x\nwant %x", c.path, enc, b)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.GetStampMs() != c.cmd.GetStampMs() || got.GetConsumer().String() != c.cmd.GetConsumer().String() {
			t.Fatalf("%s: decoded as %v, want %v", c.path, got, c.cmd)
		}
	}
}

// consumerHistory builds the state of testdata/v4/consumer_state.snap: stream orders of 3
// partitions with 10 records on partition 0, members m1 and m2 of consumer billing (m1
// holding 0 and 1, m2 holding 2 at epoch 2 after m1 released it), and offsets 7 ("x") on
// partition 0 and 0 on partition 2.
func consumerHistory(t *testing.T, h *harness) {
	a := h.stream("orders", 3)
	h.apply(t0, CommitWal(meta.CommitWal{Object: "wal/1", CreatedMs: t0, Chunks: []meta.Chunk{chunk(a.ID, 0, 10, 0, 100)}}))
	beat := func(ms int64, m string) meta.ConsumerAssignment {
		r := h.apply(ms, ConsumerHeartbeat(meta.ConsumerHeartbeat{Namespace: "default", Consumer: "billing", Stream: "orders", Member: m, Session: 30 * time.Second}))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.Consumer
	}
	beat(t0+1000, "m1")
	beat(t0+2000, "m2")
	beat(t0+3000, "m1")
	beat(t0+4000, "m2")
	for _, c := range []meta.ConsumerCommit{
		{Member: "m1", Offsets: []meta.ConsumerOffset{{Partition: 0, Offset: 7, Metadata: "x", Epoch: 1}}},
		{Member: "m2", Offsets: []meta.ConsumerOffset{{Partition: 2, Offset: 0, Epoch: 2}}},
	} {
		c.Namespace, c.Consumer, c.Stream = "default", "billing", "orders"
		if r := h.apply(t0+5000, CommitConsumerOffsets(c)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

func describeString(t *testing.T, f *FSM) string {
	t.Helper()
	st, err := f.DescribeConsumer("default", "billing")
	if err != nil {
		t.Fatal(err)
	}
	st.ClockMs = 0
	return fmt.Sprintf("%+v", st)
}

func TestGoldenConsumerSnapshot(t *testing.T) {
	golden(t, "testdata/v4/consumer_state.snap", func() []byte {
		h := newHarness(t)
		consumerHistory(t, h)
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
	f := restoreGolden(t, "testdata/v4/consumer_state.snap")
	h := newHarness(t)
	consumerHistory(t, h)
	if got, want := describeString(t, f), describeString(t, h.f); got != want {
		t.Fatalf("golden snapshot state differs from the history that made it:\n%s\nwant\n%s", got, want)
	}
	if names, err := f.ListConsumers("default"); err != nil || len(names) != 1 || names[0] != "billing" {
		t.Fatalf("consumers %v %v", names, err)
	}
	// The restored state fences as the original: m1's old epoch on partition 2 is refused,
	// m2's current one accepted.
	g := &harness{t: t, f: f, index: f.AppliedIndex()}
	c := meta.ConsumerCommit{Namespace: "default", Consumer: "billing", Stream: "orders", Member: "m1",
		Offsets: []meta.ConsumerOffset{{Partition: 2, Offset: 0, Epoch: 1}}}
	if r := g.apply(t0+6000, CommitConsumerOffsets(c)); !errors.Is(r.Err, meta.ErrStaleConsumerEpoch) {
		t.Fatalf("stale commit: %v", r.Err)
	}
	c.Member, c.Offsets[0].Epoch = "m2", 2
	if r := g.apply(t0+6000, CommitConsumerOffsets(c)); r.Err != nil {
		t.Fatal(r.Err)
	}
}

// FuzzConsumerCommand applies arbitrary consumer operations (field 100 of a Command) to a
// state with a stream and a member: no panic, no corrupt state, and a refused command
// changes nothing.
func FuzzConsumerCommand(f *testing.F) {
	for _, c := range goldenConsumerCommands() {
		b, _ := protoMarshal(c.cmd.GetConsumer())
		f.Add(b)
	}
	leave := ConsumerHeartbeat(meta.ConsumerHeartbeat{Namespace: "default", Consumer: "billing", Stream: "orders", Member: "m1", Leave: true})
	b, _ := protoMarshal(leave.GetConsumer())
	f.Add(b)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		h := newHarness(t)
		a := h.stream("orders", 2)
		h.apply(t0, CommitWal(meta.CommitWal{Object: "wal/1", CreatedMs: t0, Chunks: []meta.Chunk{chunk(a.ID, 0, 10, 0, 100)}}))
		h.apply(t0, ConsumerHeartbeat(meta.ConsumerHeartbeat{Namespace: "default", Consumer: "billing", Stream: "orders", Member: "m1", Session: time.Minute}))
		before := describeString(t, h.f)
		// A Command whose field 100 holds b: the decoder refuses what is not a ConsumerCmd.
		cmd, err := Decode(append(protowireTag100(len(b)), b...))
		if err != nil {
			return
		}
		r := h.apply(t0+1000, cmd)
		if r.Err != nil && describeString(t, h.f) != before {
			t.Fatalf("refused (%v) but changed:\n%s\nwas\n%s", r.Err, describeString(t, h.f), before)
		}
		if _, err := h.f.DescribeConsumer("default", "billing"); err != nil {
			t.Fatal(err)
		}
	})
}

func protoMarshal(m *metapb.ConsumerCmd) ([]byte, error) { return proto.Marshal(m) }

func protowireTag100(n int) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, 100, protowire.BytesType), uint64(n))
}
