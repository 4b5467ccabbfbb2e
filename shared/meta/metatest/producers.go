package metatest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// testProducers: InitProducer allocates ids at epoch 0, fences a name's previous holder,
// bumps an (id, epoch), answers a repeat of the last bump the same, and refuses an older
// epoch; a producer of an unknown namespace is refused.
func testProducers(t *testing.T, s *suite) {
	a, err := s.c.InitProducer(s.ctx, meta.DefaultNS, "", 0, 0)
	if err != nil || a.ID <= 0 || a.Epoch != 0 {
		t.Fatalf("InitProducer anonymous = %+v, %v", a, err)
	}
	b, err := s.c.InitProducer(s.ctx, meta.DefaultNS, "", 0, 0)
	if err != nil || b.ID == a.ID {
		t.Fatalf("a second anonymous producer = %+v, %v (first %+v)", b, err, a)
	}
	name := "mt-" + s.prefix[len("wal/standard/"):len(s.prefix)-1]
	n1, err := s.c.InitProducer(s.ctx, meta.DefaultNS, name, 0, 0)
	if err != nil || n1.Epoch != 0 {
		t.Fatalf("InitProducer %s = %+v, %v", name, n1, err)
	}
	n2, err := s.c.InitProducer(s.ctx, meta.DefaultNS, name, 0, 0)
	if err != nil || n2.ID != n1.ID || n2.Epoch != 1 {
		t.Fatalf("InitProducer %s again = %+v, %v; want id %d at epoch 1", name, n2, err, n1.ID)
	}
	bumped, err := s.c.InitProducer(s.ctx, meta.DefaultNS, "", a.ID, 0)
	if err != nil || bumped != (meta.Producer{ID: a.ID, Epoch: 1}) {
		t.Fatalf("bump of %d at epoch 0 = %+v, %v", a.ID, bumped, err)
	}
	if again, err := s.c.InitProducer(s.ctx, meta.DefaultNS, "", a.ID, 0); err != nil || again != bumped {
		t.Fatalf("a repeat of the bump = %+v, %v; want %+v", again, err, bumped)
	}
	if _, err := s.c.InitProducer(s.ctx, meta.DefaultNS, "", a.ID, 1); err != nil {
		t.Fatalf("bump at the current epoch: %v", err)
	}
	_, err = s.c.InitProducer(s.ctx, meta.DefaultNS, "", a.ID, 0)
	wantErr(t, "InitProducer at an older epoch", err, meta.ErrProducerFenced)
	_, err = s.c.InitProducer(s.ctx, meta.DefaultNS, "", a.ID, 7)
	wantErr(t, "InitProducer at an epoch never issued", err, meta.ErrUnknownProducer)
	_, err = s.c.InitProducer(s.ctx, "mt-no-such-namespace", "", 0, 0)
	wantErr(t, "InitProducer in a missing namespace", err, meta.ErrNamespaceNotFound)
}

// producerCommit commits one chunk of records records to partition 0 carrying p.
func (s *suite) producerCommit(t *testing.T, id uint64, object string, records int64, p meta.ChunkProducer) meta.CommitResult {
	t.Helper()
	c := s.commitReq(id, object, [3]int64{0, records, 10 * records})
	c.Chunks[0].Producer = p
	res, err := s.c.CommitWal(s.ctx, c)
	if err != nil || len(res.BaseOffsets) != 1 {
		t.Fatalf("CommitWal %s with producer %+v = %+v, %v", object, p, res, err)
	}
	return res
}

// testProducerChunks: producer chunks commit in sequence, a retry of one of the last
// meta.ProducerBatches (in a new object) is a duplicate at its original offset, a gap is
// out of order, an old epoch fenced, an unknown producer refused; refused chunks write
// nothing.
func testProducerChunks(t *testing.T, s *suite) {
	st := s.stream(t, 1)
	p, err := s.c.InitProducer(s.ctx, meta.DefaultNS, "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cp := func(seq int32) meta.ChunkProducer {
		return meta.ChunkProducer{ID: p.ID, Epoch: p.Epoch, BaseSequence: seq}
	}
	if r := s.producerCommit(t, st.ID, s.key("p1"), 3, cp(0)); r.ChunkErr(0) != nil || r.BaseOffsets[0] != 0 {
		t.Fatalf("first chunk: %+v", r)
	}
	if r := s.producerCommit(t, st.ID, s.key("p2"), 2, cp(3)); r.ChunkErr(0) != nil || r.BaseOffsets[0] != 3 {
		t.Fatalf("second chunk: %+v", r)
	}
	if r := s.producerCommit(t, st.ID, s.key("p1-retry"), 3, cp(0)); !r.IsDuplicate(0) || r.BaseOffsets[0] != 0 {
		t.Fatalf("a retry of the first chunk: %+v", r)
	}
	for _, tc := range []struct {
		name string
		p    meta.ChunkProducer
		want error
	}{
		{"a sequence gap", cp(9), meta.ErrOutOfOrderSequence},
		{"an unknown producer", meta.ChunkProducer{ID: p.ID + 1_000_000, BaseSequence: 0}, meta.ErrUnknownProducer},
		{"an epoch never issued", meta.ChunkProducer{ID: p.ID, Epoch: p.Epoch + 1, BaseSequence: 5}, meta.ErrUnknownProducer},
	} {
		r := s.producerCommit(t, st.ID, s.key("bad-"+tc.name), 1, tc.p)
		if err := r.ChunkErr(0); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %+v (%v), want %v", tc.name, r, err, tc.want)
		}
	}
	bumped, err := s.c.InitProducer(s.ctx, meta.DefaultNS, "", p.ID, p.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	r := s.producerCommit(t, st.ID, s.key("old-epoch"), 1, cp(5))
	wantErr(t, "a chunk of the fenced epoch", r.ChunkErr(0), meta.ErrProducerFenced)
	r = s.producerCommit(t, st.ID, s.key("new-epoch"), 1, meta.ChunkProducer{ID: bumped.ID, Epoch: bumped.Epoch, BaseSequence: 0})
	if r.ChunkErr(0) != nil || r.BaseOffsets[0] != 5 {
		t.Fatalf("the new epoch's first chunk: %+v", r)
	}
	if _, ps := s.lookup(t, st.ID, 0, 0, 0); ps.HighWatermark != 6 {
		t.Fatalf("high watermark %d after 6 records committed, the rest refused or duplicate", ps.HighWatermark)
	}
}

// testConsumers: heartbeats lease the partitions and balance them between members, commits
// are fenced by the live lease epoch (all or none), describe and list answer them.
func testConsumers(t *testing.T, s *suite) {
	st := s.stream(t, 3)
	s.commit(t, st.ID, s.key("c"), [3]int64{0, 10, 100})
	name := "c-" + s.prefix[len("wal/standard/"):len(s.prefix)-1]
	beat := func(member string, leave bool) meta.ConsumerAssignment {
		t.Helper()
		a, err := s.c.ConsumerHeartbeat(s.ctx, meta.ConsumerHeartbeat{Namespace: meta.DefaultNS, Consumer: name, Stream: st.Name,
			Member: member, Session: 30 * time.Second, Leave: leave})
		if err != nil {
			t.Fatalf("heartbeat of %s: %v", member, err)
		}
		return a
	}
	parts := func(a meta.ConsumerAssignment) []int32 {
		var out []int32
		for _, l := range a.Leases {
			out = append(out, l.Partition)
		}
		return out
	}
	if a := beat("m1", false); !slices.Equal(parts(a), []int32{0, 1, 2}) || a.Members != 1 || a.StreamID != st.ID {
		t.Fatalf("m1 alone: %+v", a)
	}
	if a := beat("m2", false); len(a.Leases) != 0 || a.Members != 2 {
		t.Fatalf("m2 joining (m1 holds everything): %+v", a)
	}
	if a := beat("m1", false); !slices.Equal(parts(a), []int32{0, 1}) {
		t.Fatalf("m1 releasing its extra: %+v", a)
	}
	b := beat("m2", false)
	if !slices.Equal(parts(b), []int32{2}) || b.Leases[0].Epoch != 2 {
		t.Fatalf("m2 claiming partition 2 at epoch 2: %+v", b)
	}
	commit := func(member string, os ...meta.ConsumerOffset) error {
		return s.c.CommitConsumerOffsets(s.ctx, meta.ConsumerCommit{Namespace: meta.DefaultNS, Consumer: name, Stream: st.Name, Member: member, Offsets: os})
	}
	wantErr(t, "m1 committing m2's partition", commit("m1", meta.ConsumerOffset{Partition: 0, Offset: 4, Epoch: 1}, meta.ConsumerOffset{Partition: 2, Offset: 0, Epoch: 1}), meta.ErrStaleConsumerEpoch)
	wantErr(t, "a commit without a member on a held partition", commit("", meta.ConsumerOffset{Partition: 0, Offset: 4}), meta.ErrStaleConsumerEpoch)
	wantErr(t, "a commit past the high watermark", commit("m1", meta.ConsumerOffset{Partition: 0, Offset: 11, Epoch: 1}), meta.ErrOffsetOutOfRange)
	if err := commit("m1", meta.ConsumerOffset{Partition: 0, Offset: 4, Metadata: "x", Epoch: 1}); err != nil {
		t.Fatalf("m1's commit: %v", err)
	}
	d, err := s.c.DescribeConsumer(s.ctx, meta.DefaultNS, name)
	if err != nil || len(d.Partitions) != 3 || d.Partitions[0].Committed != 4 || d.Partitions[0].Metadata != "x" || d.Partitions[0].Holder != "m1" ||
		d.Partitions[1].Committed != -1 || d.Partitions[2].Holder != "m2" || d.Partitions[2].Epoch != 2 || len(d.Members) != 2 {
		t.Fatalf("describe: %+v, %v", d, err)
	}
	beat("m1", true)
	if err := commit("m1", meta.ConsumerOffset{Partition: 0, Offset: 5, Epoch: 1}); !errors.Is(err, meta.ErrStaleConsumerEpoch) {
		t.Fatalf("a commit after leaving: %v", err)
	}
	if err := commit("", meta.ConsumerOffset{Partition: 1, Offset: 0}); err != nil {
		t.Fatalf("a commit without a member on a free partition: %v", err)
	}
	names, err := s.c.ListConsumers(s.ctx, meta.DefaultNS)
	if err != nil || !slices.Contains(names, name) || !slices.IsSorted(names) {
		t.Fatalf("list: %v, %v", names, err)
	}
	_, err = s.c.DescribeConsumer(s.ctx, meta.DefaultNS, name+"-never")
	wantErr(t, "describe an unknown consumer", err, meta.ErrConsumerNotFound)
	_, err = s.c.ConsumerHeartbeat(s.ctx, meta.ConsumerHeartbeat{Namespace: meta.DefaultNS, Consumer: name, Stream: st.Name, Member: "m3", Session: time.Millisecond})
	wantErr(t, "a heartbeat with a session too short", err, meta.ErrInvalidArgument)
	_, err = s.c.ConsumerHeartbeat(s.ctx, meta.ConsumerHeartbeat{Namespace: meta.DefaultNS, Consumer: name, Stream: "mt-no-such-stream", Member: "m3", Session: time.Second})
	wantErr(t, "a heartbeat on a missing stream", err, meta.ErrStreamNotFound)
}

// testConsumerDeleteReset: delete and reset are refused while a member is live unless
// forced; resets set earliest, latest, a clamped offset or a timestamp's chunk; a deleted
// consumer is gone.
func testConsumerDeleteReset(t *testing.T, s *suite) {
	st := s.stream(t, 2)
	for i, ch := range [][3]int64{{0, 4, 40}, {0, 6, 60}} { // max timestamps 1000 and 2000
		c := s.commitReq(st.ID, s.key(string(rune('a'+i))), ch)
		c.Chunks[0].MaxTimestamp = int64(1000 * (i + 1))
		if _, err := s.c.CommitWal(s.ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	name := "r-" + s.prefix[len("wal/standard/"):len(s.prefix)-1]
	reset := func(r meta.ConsumerReset) ([]meta.ConsumerOffset, error) {
		r.Namespace, r.Consumer, r.Stream = meta.DefaultNS, name, st.Name
		return s.c.ResetConsumerOffsets(s.ctx, r)
	}
	offs := func(kv ...int64) []meta.ConsumerOffset {
		var out []meta.ConsumerOffset
		for i := 0; i < len(kv); i += 2 {
			out = append(out, meta.ConsumerOffset{Partition: int32(kv[i]), Offset: kv[i+1]})
		}
		return out
	}
	if _, err := s.c.ConsumerHeartbeat(s.ctx, meta.ConsumerHeartbeat{Namespace: meta.DefaultNS, Consumer: name, Stream: st.Name, Member: "m1", Session: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	_, err := reset(meta.ConsumerReset{To: meta.ResetLatest})
	wantErr(t, "reset with a live member", err, meta.ErrConsumerActive)
	wantErr(t, "delete with a live member", s.c.DeleteConsumer(s.ctx, meta.DefaultNS, name, false), meta.ErrConsumerActive)
	got, err := reset(meta.ConsumerReset{To: meta.ResetOffset, Offset: 2, Partitions: []int32{0}, Force: true})
	if err != nil || !slices.Equal(got, offs(0, 2)) {
		t.Fatalf("forced reset: %v, %v", got, err)
	}
	if d, err := s.c.DescribeConsumer(s.ctx, meta.DefaultNS, name); err != nil || len(d.Members) != 0 || d.Partitions[0].Holder != "" {
		t.Fatalf("after a forced reset: %+v, %v", d, err)
	}
	for _, tc := range []struct {
		name string
		r    meta.ConsumerReset
		want []meta.ConsumerOffset
	}{
		{"latest", meta.ConsumerReset{To: meta.ResetLatest}, offs(0, 10, 1, 0)},
		{"earliest", meta.ConsumerReset{To: meta.ResetEarliest, Partitions: []int32{0}}, offs(0, 0)},
		{"an offset past the end", meta.ConsumerReset{To: meta.ResetOffset, Offset: 99}, offs(0, 10, 1, 0)},
		{"a timestamp inside the second chunk", meta.ConsumerReset{To: meta.ResetTimestamp, TimestampMs: 1500}, offs(0, 4, 1, 0)},
		{"a timestamp before everything", meta.ConsumerReset{To: meta.ResetTimestamp, TimestampMs: 0}, offs(0, 0, 1, 0)},
		{"a timestamp after everything", meta.ConsumerReset{To: meta.ResetTimestamp, TimestampMs: 2001}, offs(0, 10, 1, 0)},
	} {
		got, err := reset(tc.r)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Fatalf("reset to %s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	_, err = reset(meta.ConsumerReset{To: meta.ResetLatest, Partitions: []int32{5}})
	wantErr(t, "reset of a missing partition", err, meta.ErrPartitionNotFound)
	_, err = reset(meta.ConsumerReset{To: "start"})
	wantErr(t, "reset to an unknown target", err, meta.ErrInvalidArgument)
	if err := s.c.DeleteConsumer(s.ctx, meta.DefaultNS, name, false); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = s.c.DescribeConsumer(s.ctx, meta.DefaultNS, name)
	wantErr(t, "describe after delete", err, meta.ErrConsumerNotFound)
	wantErr(t, "delete twice", s.c.DeleteConsumer(s.ctx, meta.DefaultNS, name, true), meta.ErrConsumerNotFound)
}
