package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/retention"
	"github.com/loamhq/loam/shared/segfmt"
)

// offloadRig is a three-member journal, a real in-process sequencer and a bucket.
type offloadRig struct {
	c      *cluster
	mc     meta.Client
	idx    *flakyIndex
	bucket *objstore.Mem
	st     meta.Stream
	p      Partition
}

// flakyIndex is the sequencer's index; failAppend makes the next AppendSegments apply
// and then answer an unknown outcome, as a broken connection would.
type flakyIndex struct {
	OffloadIndex
	failAppend atomic.Bool
	appends    atomic.Int64
}

func (f *flakyIndex) AppendSegments(ctx context.Context, a meta.SegmentAppend) error {
	f.appends.Add(1)
	err := f.OffloadIndex.AppendSegments(ctx, a)
	if err == nil && f.failAppend.CompareAndSwap(true, false) {
		return fmt.Errorf("append segments: connection reset: %w", meta.ErrUnavailable)
	}
	return err
}

func newOffloadRig(t *testing.T) *offloadRig {
	t.Helper()
	r := &offloadRig{c: newCluster(t, true), mc: servertest.Client(t), bucket: objstore.NewMem()}
	r.idx = &flakyIndex{OffloadIndex: r.mc.(OffloadIndex)}
	ctx := context.Background()
	st, err := r.mc.CreateStream(ctx, meta.StreamConfig{Namespace: meta.DefaultNS, Name: "q", Partitions: 1, Class: meta.ClassQuorum,
		RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete})
	if err != nil {
		t.Fatal(err)
	}
	r.st, r.p = st, Partition{Stream: st.ID, Partition: 0}
	return r
}

// configure sets every member's offload (whichever leads runs it).
func (r *offloadRig) configure(t *testing.T, segmentBytes int64) {
	t.Helper()
	for _, m := range r.c.members {
		if m == nil {
			continue
		}
		if err := m.setOffload(OffloadConfig{Bucket: r.bucket, Index: r.idx, SegmentBytes: segmentBytes, MaxAge: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
}

// ageOut makes every retained batch due by age: MaxAge 1 ns, and a first round that
// notes when the leader saw each partition's start (nothing is due in it).
func (r *offloadRig) ageOut(t *testing.T, m *Member) {
	t.Helper()
	for _, mm := range r.c.members {
		mm.off.cfg.MaxAge = time.Nanosecond
	}
	if st, err := m.Offload(context.Background()); err != nil || st != (OffloadStats{}) {
		t.Fatalf("first round: %+v %v", st, err)
	}
	time.Sleep(time.Millisecond)
}

// produce appends n appends of 5 records each, values "<prefix><i>-<j>".
func (r *offloadRig) produce(t *testing.T, prefix string, n int) []string {
	t.Helper()
	var want []string
	for i := 0; i < n; i++ {
		res, err := r.c.append(app(t, r.p, meta.ChunkProducer{ID: -1}, fmt.Sprintf("%s%d", prefix, i), 5))
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 5; j++ {
			want = append(want, fmt.Sprintf("%d:%s%d-%d", res.Base+int64(j), prefix, i, j))
		}
	}
	return want
}

// segmentValues reads every segment of the partition's index, in order.
func (r *offloadRig) segmentValues(t *testing.T) ([]string, []meta.IndexEntry) {
	t.Helper()
	ctx := context.Background()
	es, _, err := r.mc.Lookup(ctx, r.st.ID, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		obj, err := r.bucket.Get(ctx, e.Object)
		if err != nil {
			t.Fatal(err)
		}
		info, err := segfmt.ReadInfo(ctx, r.bucket, e.Object, int64(len(obj)))
		if err != nil {
			t.Fatal(err)
		}
		if info.Header.BaseOffset != e.BaseOffset || info.Header.EndOffset != e.End() || info.DataOffset != e.Offset || info.DataLength != e.Length {
			t.Fatalf("segment %s header %+v, entry %+v", e.Object, info.Header, e)
		}
		out = append(out, values(t, obj[e.Offset:e.Offset+e.Length])...)
	}
	return out, es
}

func waitTrimmed(t *testing.T, m *Member, p Partition, start int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if rr, _ := m.Read(p, m.Next(p), 1); rr.Start >= start {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	rr, _ := m.Read(p, m.Next(p), 1)
	t.Fatalf("member %s: journal starts at %d, want %d", m.ID(), rr.Start, start)
}

// TestOffloadSealsTrimsAndSnapshots: the leader seals whole appends into segments (the
// batches verbatim, offsets in), commits them to the sequencer's index, and trims every
// member's journal behind them; the Raft log is compacted; a member restarted from its
// snapshot has the trimmed state and the segment pointers.
func TestOffloadSealsTrimsAndSnapshots(t *testing.T) {
	r := newOffloadRig(t)
	want := r.produce(t, "a", 40) // 200 offsets
	one := int64(len(batch(t, "a10", 5)))
	r.configure(t, 10*one) // ten appends a segment
	l := r.c.leader()
	m := r.c.members[l]
	first, _ := m.store.FirstIndex()
	ctx := context.Background()
	st, err := m.Offload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Segments != 4 || st.Trimmed != 4 || st.Refused != 0 {
		t.Fatalf("round: %+v, want 4 segments", st)
	}
	got, es := r.segmentValues(t)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("segments hold %d records, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	if len(es) != 4 || es[0].BaseOffset != 0 || es[3].End() != 200 {
		t.Fatalf("index %+v", es)
	}
	if _, ps, _ := r.mc.Lookup(ctx, r.st.ID, 0, 0, 0); ps.HighWatermark != 200 || ps.LogStart != 0 {
		t.Fatalf("sequencer partition %+v", ps)
	}
	for _, mm := range r.c.members {
		waitTrimmed(t, mm, r.p, 200)
		if _, err := mm.Read(r.p, 199, 1<<20); !errors.Is(err, ErrOffloaded) {
			t.Fatalf("member %s: read below the start: %v", mm.ID(), err)
		}
		if segs := mm.Segments(r.p); len(segs) != 4 || segs[3].End != 200 || segs[3].Key != es[3].Object {
			t.Fatalf("member %s: segments %+v", mm.ID(), segs)
		}
		if s := mm.Stats(); s.Retained != 0 {
			t.Fatalf("member %s retains %d bytes", mm.ID(), s.Retained)
		}
	}
	// Nothing left to seal: a second round writes nothing.
	if st, err := m.Offload(ctx); err != nil || st.Segments != 0 {
		t.Fatalf("second round: %+v %v", st, err)
	}
	// The log was compacted behind the snapshot taken after the trims.
	if after, _ := m.store.FirstIndex(); after <= first {
		t.Fatalf("leader's log starts at %d after the trim, at %d before", after, first)
	}
	// New appends continue at 200 and are read from the journal.
	more := r.produce(t, "b", 3)
	if rr, err := m.Read(r.p, 200, 1<<20); err != nil || !reflect.DeepEqual(values(t, rr.Batches), more) || rr.Start != 200 {
		t.Fatalf("read after the trim: %v %v", rr, err)
	}
	// A follower restarted from its snapshot holds the trimmed state and the pointers.
	f := (l + 1) % 3
	if err := r.c.members[f].Snapshot(); err != nil {
		t.Fatal(err)
	}
	r.c.stop(f)
	r.c.start(f)
	waitNext(t, r.c.members[f], r.p, 215)
	fm := r.c.members[f]
	if rr, err := fm.Read(r.p, 200, 1<<20); err != nil || !reflect.DeepEqual(values(t, rr.Batches), more) || rr.Start != 200 {
		t.Fatalf("restarted follower: %+v %v", rr, err)
	}
	if segs := fm.Segments(r.p); len(segs) != 4 {
		t.Fatalf("restarted follower's segments %+v", segs)
	}
	// Retention trims the quorum partition's segments as any stream's: by bytes, the two
	// oldest segments go and are no longer referenced.
	ret, err := retention.New(retention.Config{Meta: r.mc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	keep := r.st
	keep.RetentionBytes = es[2].Length + es[3].Length
	if tr, ok, err := ret.Partition(ctx, keep, 0); err != nil || !ok || tr.To != es[2].BaseOffset {
		t.Fatalf("retention: %+v %v %v", tr, ok, err)
	}
	refd, err := r.mc.Referenced(ctx, []string{es[0].Object, es[1].Object, es[2].Object})
	if err != nil || refd[0] || refd[1] || !refd[2] {
		t.Fatalf("referenced after retention: %v %v", refd, err)
	}
	if _, ps, _ := r.mc.Lookup(ctx, r.st.ID, 0, 0, 0); ps.LogStart != es[2].BaseOffset || ps.HighWatermark != 200 {
		t.Fatalf("after retention: %+v", ps)
	}
}

// TestOffloadRetryAfterUnknownAppend: an append whose answer was lost (it applied) is
// not written again: the next round finds the index past the journal's start and trims
// to it, and the bucket holds one object per range.
func TestOffloadRetryAfterUnknownAppend(t *testing.T) {
	r := newOffloadRig(t)
	want := r.produce(t, "a", 4)
	r.configure(t, 1<<20)
	m := r.c.members[r.c.leader()]
	ctx := context.Background()
	r.ageOut(t, m)
	r.idx.failAppend.Store(true)
	if _, err := m.Offload(ctx); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("round with a lost answer: %v", err)
	}
	if rr, _ := m.Read(r.p, 0, 1); rr.Start != 0 {
		t.Fatalf("trimmed to %d after an unknown outcome", rr.Start)
	}
	appends := r.idx.appends.Load()
	st, err := m.Offload(ctx)
	if err != nil || st.Segments != 0 || st.Trimmed != 1 || r.idx.appends.Load() != appends {
		t.Fatalf("retry round: %+v %v (appends %d, before %d)", st, err, r.idx.appends.Load(), appends)
	}
	waitTrimmed(t, m, r.p, 20)
	got, _ := r.segmentValues(t)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	n := 0
	_ = r.bucket.List(ctx, "seg/", func(objstore.ObjectInfo) error { n++; return nil })
	if n != 1 {
		t.Fatalf("%d segment objects, want 1", n)
	}
}

// TestOffloadRaceLoserDeletesItsObject: two leaders (one deposed) sealing the same range
// commit one segment; the other's append is refused and its object deleted.
func TestOffloadRaceLoserDeletesItsObject(t *testing.T) {
	r := newOffloadRig(t)
	r.produce(t, "a", 4)
	r.configure(t, 1<<20)
	m := r.c.members[r.c.leader()]
	ctx := context.Background()
	// The "other leader" seals [0, 20) first, and its Trim has not landed.
	o := m.off
	view := m.sealView(r.p, 1<<20)
	theirs, err := o.write(ctx, r.p, view)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := o.lease(ctx, r.p)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.idx.AppendSegments(ctx, meta.SegmentAppend{Lease: lease, Entries: []meta.IndexEntry{theirs}}); err != nil {
		t.Fatal(err)
	}
	// Ours: the same range under another key is refused, and deleted.
	ours, err := o.write(ctx, r.p, view)
	if err != nil {
		t.Fatal(err)
	}
	err = r.idx.AppendSegments(ctx, meta.SegmentAppend{Lease: lease, Entries: []meta.IndexEntry{ours}})
	if !errors.Is(err, meta.ErrIndexChanged) {
		t.Fatalf("second append of the range: %v", err)
	}
	o.deleteUnreferenced(ctx, ours.Object)
	if _, err := r.bucket.Get(ctx, ours.Object); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the refused segment is still there: %v", err)
	}
	if _, err := r.bucket.Get(ctx, theirs.Object); err != nil {
		t.Fatalf("the committed segment: %v", err)
	}
	// The leader's next round trims to the committed segment.
	r.ageOut(t, m)
	if st, err := m.Offload(ctx); err != nil || st.Trimmed != 1 || st.Segments != 0 {
		t.Fatalf("round: %+v %v", st, err)
	}
	if segs := m.Segments(r.p); len(segs) != 1 || segs[0].Key != theirs.Object {
		t.Fatalf("segments %+v, want %s", segs, theirs.Object)
	}
}

// TestOffloadUnblocksAFullJournal: a journal bounded to a few appends takes a steady
// producer's appends as offload frees them.
func TestOffloadUnblocksAFullJournal(t *testing.T) {
	r := newOffloadRig(t)
	one := int64(len(batch(t, "a0", 5)))
	for _, m := range r.c.members {
		m.cfg.MaxRetainedBytes = 8 * one
	}
	r.configure(t, 4*one)
	for _, m := range r.c.members {
		m.off.cfg.Interval = 20 * time.Millisecond
	}
	l := r.c.leader()
	m := r.c.members[l]
	// No offload running: the journal fills up.
	r.produce(t, "a", 8)
	if _, err := m.Append(context.Background(), app(t, r.p, meta.ChunkProducer{ID: -1}, "x", 5)); !errors.Is(err, ErrJournalFull) {
		t.Fatalf("append to a full journal: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			_, _ = m.Offload(ctx)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < 40; {
		_, err := m.Append(context.Background(), app(t, r.p, meta.ChunkProducer{ID: -1}, fmt.Sprintf("s%d", i), 5))
		switch {
		case err == nil:
			i++
		case errors.Is(err, ErrJournalFull) && time.Now().Before(deadline):
			time.Sleep(5 * time.Millisecond)
		default:
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if next := m.Next(r.p); next != 48*5 {
		t.Fatalf("next %d, want %d", next, 48*5)
	}
}

// TestTrimKeepsTheLatestSegmentRefs: a partition's state keeps at most MaxSegmentRefs
// segment pointers, the latest, also through a snapshot.
func TestTrimKeepsTheLatestSegmentRefs(t *testing.T) {
	s := NewState(0)
	for i := 0; i < MaxSegmentRefs+6; i++ {
		if r := s.ApplyAppend(app(t, p0, meta.ChunkProducer{ID: -1}, "x", 1)); r.Err != nil {
			t.Fatal(r.Err)
		}
		if r := s.ApplyTrim(Trim{Partition: p0, ClockMs: 1000, Offset: int64(i + 1), Segment: SegmentRef{Key: fmt.Sprintf("seg/%d", i), Base: int64(i), End: int64(i + 1)}}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	segs := s.Segments(p0)
	if len(segs) != MaxSegmentRefs || segs[0].Key != "seg/6" || segs[len(segs)-1].Key != fmt.Sprintf("seg/%d", MaxSegmentRefs+5) {
		t.Fatalf("%d refs, first %+v", len(segs), segs[0])
	}
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	r, err := ReadSnapshot(buf.Bytes(), 0)
	if err != nil || !reflect.DeepEqual(r.Segments(p0), segs) {
		t.Fatalf("restored refs %v %v", r.Segments(p0), err)
	}
}
