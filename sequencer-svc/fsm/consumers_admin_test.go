package fsm

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// TestConsumerDeleteAndReset: a reset or delete is refused while a member is live unless
// forced; forced, the members are dropped and their leases end, so a dropped member's
// commit is refused and its next claim is at a newer epoch; offsets go to the log start,
// the high watermark, an offset clamped to both, or the first chunk at or after a
// timestamp; a deleted consumer is gone from every answer.
func TestConsumerDeleteAndReset(t *testing.T) {
	h := newHarness(t)
	s := h.stream("s", 2)
	// Partition 0: offsets 0..4 (max timestamp t0+0) and 5..9 (t0+100); partition 1 empty.
	for i, c := range []meta.Chunk{chunk(s.ID, 0, 5, 0, 100), chunk(s.ID, 0, 5, 100, 100)} {
		if _, err := h.commit(t0, meta.CommitWal{Object: "wal/standard/n1/" + string(rune('a'+i)) + ".wal", CreatedMs: t0, Chunks: []meta.Chunk{c}}); err != nil {
			t.Fatal(err)
		}
	}
	const session = 10 * time.Second
	beat := func(stamp int64, leave bool) meta.ConsumerAssignment {
		t.Helper()
		r := h.apply(stamp, ConsumerHeartbeat(meta.ConsumerHeartbeat{Namespace: "default", Consumer: "c", Stream: "s", Member: "m1", Session: session, Leave: leave}))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.Consumer
	}
	reset := func(stamp int64, r meta.ConsumerReset) ([]meta.ConsumerOffset, error) {
		t.Helper()
		r.Namespace, r.Consumer, r.Stream = "default", "c", "s"
		var resolved []meta.ConsumerOffset
		if r.To == meta.ResetTimestamp {
			for p := range s.Partitions {
				off, err := h.f.ResolveTimestamp(s.ID, p, r.TimestampMs)
				if err != nil {
					t.Fatal(err)
				}
				resolved = append(resolved, meta.ConsumerOffset{Partition: p, Offset: off})
			}
		}
		res := h.apply(stamp, ResetConsumerOffsets(r, resolved))
		return res.ConsumerOffsets, res.Err
	}
	committed := func() map[int32]int64 {
		t.Helper()
		st, err := h.f.DescribeConsumer("default", "c")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		for _, p := range st.Partitions {
			out[p.Partition] = p.Committed
		}
		return out
	}
	offs := func(kv ...int64) []meta.ConsumerOffset {
		var out []meta.ConsumerOffset
		for i := 0; i < len(kv); i += 2 {
			out = append(out, meta.ConsumerOffset{Partition: int32(kv[i]), Offset: kv[i+1]})
		}
		return out
	}

	a := beat(t0, false)
	if len(a.Leases) != 2 || a.Leases[0].Epoch != 1 {
		t.Fatalf("first heartbeat: %+v", a)
	}
	if _, err := reset(t0+1, meta.ConsumerReset{To: meta.ResetEarliest}); !errors.Is(err, meta.ErrConsumerActive) {
		t.Fatalf("reset with a live member: %v", err)
	}
	if r := h.apply(t0+1, DeleteConsumer("default", "c", false)); !errors.Is(r.Err, meta.ErrConsumerActive) {
		t.Fatalf("delete with a live member: %v", r.Err)
	}
	if got := committed(); got[0] != -1 || got[1] != -1 {
		t.Fatalf("refused commands changed offsets: %v", got)
	}

	// Forced over the live member, on partition 0 only.
	got, err := reset(t0+2, meta.ConsumerReset{To: meta.ResetOffset, Offset: 3, Partitions: []int32{0}, Force: true})
	if err != nil || !reflect.DeepEqual(got, offs(0, 3)) {
		t.Fatalf("forced reset: %v %v", got, err)
	}
	if st, _ := h.f.DescribeConsumer("default", "c"); len(st.Members) != 0 || st.Partitions[0].Holder != "" {
		t.Fatalf("after a forced reset: %+v", st)
	}
	stale := h.apply(t0+3, CommitConsumerOffsets(meta.ConsumerCommit{Namespace: "default", Consumer: "c", Stream: "s", Member: "m1",
		Offsets: []meta.ConsumerOffset{{Partition: 0, Offset: 9, Epoch: a.Leases[0].Epoch}}}))
	if !errors.Is(stale.Err, meta.ErrStaleConsumerEpoch) {
		t.Fatalf("the dropped member's commit: %v", stale.Err)
	}
	if a := beat(t0+4, false); len(a.Leases) != 2 || a.Leases[0].Epoch != 2 {
		t.Fatalf("the dropped member's next heartbeat: %+v", a)
	}
	beat(t0+5, true)

	for _, tc := range []struct {
		name string
		r    meta.ConsumerReset
		want []meta.ConsumerOffset
	}{
		{"latest", meta.ConsumerReset{To: meta.ResetLatest}, offs(0, 10, 1, 0)},
		{"earliest", meta.ConsumerReset{To: meta.ResetEarliest}, offs(0, 0, 1, 0)},
		{"offset past the end", meta.ConsumerReset{To: meta.ResetOffset, Offset: 999, Partitions: []int32{1, 0}}, offs(0, 10, 1, 0)},
		{"timestamp inside the second chunk", meta.ConsumerReset{To: meta.ResetTimestamp, TimestampMs: t0 + 50}, offs(0, 5, 1, 0)},
		{"timestamp before everything", meta.ConsumerReset{To: meta.ResetTimestamp, TimestampMs: 0}, offs(0, 0, 1, 0)},
		{"timestamp after everything", meta.ConsumerReset{To: meta.ResetTimestamp, TimestampMs: t0 + 1000}, offs(0, 10, 1, 0)},
	} {
		got, err := reset(t0+6, tc.r)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
		if c := committed(); c[0] != tc.want[0].Offset || c[1] != tc.want[1].Offset {
			t.Fatalf("%s: committed %v", tc.name, c)
		}
	}
	for _, tc := range []struct {
		r    meta.ConsumerReset
		want error
	}{
		{meta.ConsumerReset{To: meta.ResetEarliest, Partitions: []int32{2}}, meta.ErrPartitionNotFound},
		{meta.ConsumerReset{To: "start"}, meta.ErrInvalidArgument},
		{meta.ConsumerReset{To: meta.ResetOffset, Offset: -1}, meta.ErrInvalidArgument},
		{meta.ConsumerReset{To: meta.ResetEarliest, Partitions: []int32{0, 0}}, meta.ErrInvalidArgument},
	} {
		if _, err := reset(t0+7, tc.r); !errors.Is(err, tc.want) {
			t.Fatalf("%+v: %v, want %v", tc.r, err, tc.want)
		}
	}

	// A member whose session ended does not hold a delete back.
	beat(t0+8, false)
	if r := h.apply(t0+8+session.Milliseconds(), DeleteConsumer("default", "c", false)); r.Err != nil {
		t.Fatalf("delete after the member's session ended: %v", r.Err)
	}
	if _, err := h.f.DescribeConsumer("default", "c"); !errors.Is(err, meta.ErrConsumerNotFound) {
		t.Fatalf("describe after delete: %v", err)
	}
	if names, _ := h.f.ListConsumers("default"); len(names) != 0 {
		t.Fatalf("list after delete: %v", names)
	}
	if r := h.apply(t0+9+session.Milliseconds(), DeleteConsumer("default", "c", true)); !errors.Is(r.Err, meta.ErrConsumerNotFound) {
		t.Fatalf("delete twice: %v", r.Err)
	}
	// Recreated under the name, it starts with nothing committed.
	beat(t0+10+session.Milliseconds(), false)
	if c := committed(); c[0] != -1 {
		t.Fatalf("a recreated consumer has offsets %v", c)
	}
}
