package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

func testMembers(nodes ...string) []meta.JournalMember {
	out := make([]meta.JournalMember, len(nodes))
	for i, n := range nodes {
		out[i] = meta.JournalMember{Node: n, Addr: "10.0.0." + string(rune('1'+i)) + ":7101", Zone: "az-" + string(rune('a'+i))}
	}
	return out
}

// Golden files of the placement commands and state (testdata/v4/; the journals buckets
// are optional, so the format is unchanged), written once with -golden.create when absent
// and never regenerated.
func TestGoldenPlacementCommands(t *testing.T) {
	cj := CreateJournal(meta.Journal{ID: "j1", Members: testMembers("node-1", "node-2", "node-3")})
	cj.StampMs = t0 + 1
	sm := SetJournalMembers("j1", 1, testMembers("node-1", "node-4", "node-3"))
	sm.StampMs = t0 + 2
	as := AssignJournalPartitions(7, []int32{0, 2}, "j2")
	as.StampMs = t0 + 3
	for _, c := range []struct {
		path string
		cmd  *metapb.Command
	}{{"testdata/v4/create_journal.cmd", cj}, {"testdata/v4/set_journal_members.cmd", sm}, {"testdata/v4/assign_journal_partitions.cmd", as},
		{"testdata/v4/seal_journal_move.cmd", goldenSealMove()}, {"testdata/v4/complete_journal_move.cmd", goldenCompleteMove()}} {
		b := golden(t, c.path, func() []byte { b, _ := Encode(c.cmd); return b })
		if enc, _ := Encode(c.cmd); !bytes.Equal(enc, b) {
			t.Fatalf("%s: encoding changed:\n got %x\nwant %x", c.path, enc, b)
		}
		got, err := Decode(b)
		if err != nil || got.String() != c.cmd.String() {
			t.Fatalf("%s: decoded as %v (%v), want %v", c.path, got, err, c.cmd)
		}
	}
}

func quorumStream(name string, parts int32) *metapb.Command {
	return CreateStream(meta.StreamConfig{Name: name, Partitions: parts, Class: meta.ClassQuorum})
}

func (h *harness) placement() meta.Placement {
	h.t.Helper()
	p, err := h.f.ListJournals()
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func assignedTo(p meta.Placement, stream uint64) map[int32]string {
	out := map[int32]string{}
	for _, a := range p.Assignments {
		if a.StreamID == stream {
			out[a.Partition] = a.Journal
		}
	}
	return out
}

func TestPlacement(t *testing.T) {
	h := newHarness(t)
	if p := h.placement(); len(p.Journals) != 0 || len(p.Assignments) != 0 {
		t.Fatalf("before any journal: %+v", p)
	}
	// A quorum stream created while there is no journal is not placed; a standard one never.
	early := h.apply(t0, quorumStream("early", 2)).Stream
	std := h.apply(t0, CreateStream(meta.StreamConfig{Name: "std", Partitions: 1})).Stream
	if p := h.placement(); len(p.Assignments) != 0 {
		t.Fatalf("placed without a journal: %+v", p.Assignments)
	}
	for _, c := range []struct {
		j    meta.Journal
		want string
	}{
		{meta.Journal{ID: "", Members: testMembers("a")}, "journal id"},
		{meta.Journal{ID: "_x", Members: testMembers("a")}, "journal id"},
		{meta.Journal{ID: "j/1", Members: testMembers("a")}, "is not a letter"},
		{meta.Journal{ID: "j1"}, "0 members"},
		{meta.Journal{ID: "j1", Members: []meta.JournalMember{{Node: "a", Addr: "nope"}}}, "want host:port"},
		{meta.Journal{ID: "j1", Members: []meta.JournalMember{{Node: "a", Addr: "h:1"}, {Node: "a", Addr: "h:2"}}}, "listed twice"},
	} {
		if r := h.apply(t0, CreateJournal(c.j)); !errors.Is(r.Err, meta.ErrInvalidArgument) || !bytes.Contains([]byte(r.Err.Error()), []byte(c.want)) {
			t.Errorf("create %+v: %v, want %q", c.j, r.Err, c.want)
		}
	}
	n := len(h.events)
	r := h.apply(t0+1, CreateJournal(meta.Journal{ID: "j1", Members: testMembers("n1", "n2", "n3")}))
	want := meta.Journal{ID: "j1", Members: testMembers("n1", "n2", "n3"), Epoch: 1, CreatedMs: t0 + 1, UpdatedMs: t0 + 1}
	if r.Err != nil || !reflect.DeepEqual(r.Journal, want) {
		t.Fatalf("create: %+v %v", r.Journal, r.Err)
	}
	if len(h.events) != n+1 || !h.events[n].JournalsChanged {
		t.Fatalf("create journal events: %+v", h.events[n:])
	}
	// The first journal placed the early stream.
	if got := assignedTo(h.placement(), early.ID); !reflect.DeepEqual(got, map[int32]string{0: "j1", 1: "j1"}) {
		t.Fatalf("early stream placed: %v", got)
	}
	if got := assignedTo(h.placement(), std.ID); len(got) != 0 {
		t.Fatalf("standard stream placed: %v", got)
	}
	// A retry answers the journal and changes nothing; other members under the id are refused.
	n = len(h.events)
	if r := h.apply(t0+2, CreateJournal(meta.Journal{ID: "j1", Members: testMembers("n1", "n2", "n3")})); r.Err != nil || !reflect.DeepEqual(r.Journal, want) {
		t.Fatalf("retry: %+v %v", r.Journal, r.Err)
	}
	if len(h.events) != n {
		t.Fatalf("a retry published %+v", h.events[n:])
	}
	if r := h.apply(t0+2, CreateJournal(meta.Journal{ID: "j1", Members: testMembers("n1", "n2", "n4")})); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("other members: %v", r.Err)
	}
	// Least loaded: j2 holds nothing, so the next stream goes there, and the one after to
	// the smaller id on a tie (j1: 2, j2: 2).
	h.apply(t0+3, CreateJournal(meta.Journal{ID: "j2", Members: testMembers("n4", "n5", "n6")}))
	s2 := h.apply(t0+4, quorumStream("s2", 2)).Stream
	s3 := h.apply(t0+4, quorumStream("s3", 1)).Stream
	if got := assignedTo(h.placement(), s2.ID); !reflect.DeepEqual(got, map[int32]string{0: "j2", 1: "j2"}) {
		t.Fatalf("s2: %v", got)
	}
	if got := assignedTo(h.placement(), s3.ID); !reflect.DeepEqual(got, map[int32]string{0: "j1"}) {
		t.Fatalf("s3: %v", got)
	}
	// Growing a stream places the new partitions with its partition 0.
	three := int32(3)
	if r := h.apply(t0+5, UpdateStream("default", "s3", meta.StreamPatch{Partitions: &three})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := assignedTo(h.placement(), s3.ID); !reflect.DeepEqual(got, map[int32]string{0: "j1", 1: "j1", 2: "j1"}) {
		t.Fatalf("s3 grown: %v", got)
	}
	// An explicit assignment of a placed partition requests its move (TestJournalMove);
	// its checks.
	if r := h.apply(t0+6, AssignJournalPartitions(s3.ID, []int32{2}, "j2")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := assignedTo(h.placement(), s3.ID); got[2] != "j1" || got[0] != "j1" {
		t.Fatalf("s3 partition 2 flipped before its move: %v", got)
	}
	if ms := h.placement().Moves; len(ms) != 1 || ms[0].StreamID != s3.ID || ms[0].Partition != 2 || ms[0].To != "j2" || ms[0].State != meta.MoveRequested {
		t.Fatalf("s3 partition 2 move: %+v", ms)
	}
	for _, c := range []struct {
		cmd  *metapb.Command
		want error
	}{
		{AssignJournalPartitions(999, []int32{0}, "j1"), meta.ErrStreamNotFound},
		{AssignJournalPartitions(s3.ID, []int32{3}, "j1"), meta.ErrPartitionNotFound},
		{AssignJournalPartitions(s3.ID, []int32{-1}, "j1"), meta.ErrPartitionNotFound},
		{AssignJournalPartitions(s3.ID, nil, "j1"), meta.ErrInvalidArgument},
		{AssignJournalPartitions(s3.ID, []int32{0}, "j9"), meta.ErrInvalidArgument},
		{AssignJournalPartitions(std.ID, []int32{0}, "j1"), meta.ErrInvalidArgument},
	} {
		if r := h.apply(t0+6, c.cmd); !errors.Is(r.Err, c.want) {
			t.Errorf("%v: %v, want %v", c.cmd, r.Err, c.want)
		}
	}
	// Membership changes are fenced by the epoch; a retry of the last one answers it.
	next := testMembers("n1", "n7", "n3")
	r = h.apply(t0+7, SetJournalMembers("j1", 1, next))
	if r.Err != nil || r.Journal.Epoch != 2 || !reflect.DeepEqual(r.Journal.Members, next) || r.Journal.UpdatedMs != t0+7 || r.Journal.CreatedMs != t0+1 {
		t.Fatalf("set members: %+v %v", r.Journal, r.Err)
	}
	if r := h.apply(t0+8, SetJournalMembers("j1", 1, next)); r.Err != nil || r.Journal.Epoch != 2 || r.Journal.UpdatedMs != t0+7 {
		t.Fatalf("retry of set members: %+v %v", r.Journal, r.Err)
	}
	if r := h.apply(t0+8, SetJournalMembers("j1", 1, testMembers("n1", "n8", "n3"))); !errors.Is(r.Err, meta.ErrJournalEpoch) {
		t.Fatalf("stale epoch: %v", r.Err)
	}
	if r := h.apply(t0+8, SetJournalMembers("j9", 1, next)); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("unknown journal: %v", r.Err)
	}
	if r := h.apply(t0+8, SetJournalMembers("j1", 2, nil)); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("no members: %v", r.Err)
	}
	// A deleted stream's assignments go with it.
	if r := h.apply(t0+9, DeleteStream("default", "s3")); r.Err != nil {
		t.Fatal(r.Err)
	}
	p := h.placement()
	if got := assignedTo(p, s3.ID); len(got) != 0 {
		t.Fatalf("deleted stream still placed: %v", got)
	}
	if len(p.Journals) != 2 || p.Journals[0].ID != "j1" || p.Journals[0].Epoch != 2 || p.Journals[1].ID != "j2" || len(p.Assignments) != 4 {
		t.Fatalf("placement at the end: %+v", p)
	}
}

// TestGoldenPlacementSnapshot: a snapshot holding journals and assignments restores them.
func TestGoldenPlacementSnapshot(t *testing.T) {
	golden(t, "testdata/v4/placement_state.snap", func() []byte {
		h := newHarness(t)
		h.apply(t0, quorumStream("orders", 2))
		h.apply(t0+1, CreateJournal(meta.Journal{ID: "j1", Members: testMembers("node-1", "node-2", "node-3")}))
		h.apply(t0+2, SetJournalMembers("j1", 1, testMembers("node-1", "node-4", "node-3")))
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
	f := restoreGolden(t, "testdata/v4/placement_state.snap")
	p, err := f.ListJournals()
	if err != nil {
		t.Fatal(err)
	}
	want := meta.Placement{
		Journals:    []meta.Journal{{ID: "j1", Members: testMembers("node-1", "node-4", "node-3"), Epoch: 2, CreatedMs: t0 + 1, UpdatedMs: t0 + 2}},
		Assignments: []meta.JournalAssignment{{StreamID: 1, Partition: 0, Journal: "j1"}, {StreamID: 1, Partition: 1, Journal: "j1"}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("restored %+v, want %+v", p, want)
	}
}

func goldenSealMove() *metapb.Command {
	c := SealJournalMove(meta.JournalMove{StreamID: 7, Partition: 2, From: "j1", To: "j2", End: 1234,
		Producers: []meta.ProducerCarry{{ID: 1000, Epoch: 3, First: []int32{0, 10}, Last: []int32{9, 19}, Base: []int64{1200, 1210}}}})
	c.StampMs = t0 + 4
	return c
}

func goldenCompleteMove() *metapb.Command {
	c := CompleteJournalMove(7, 2, "j2", 1234)
	c.StampMs = t0 + 5
	return c
}

func moveOf(p meta.Placement, stream uint64, part int32) (meta.JournalMove, bool) {
	for _, m := range p.Moves {
		if m.StreamID == stream && m.Partition == part {
			return m, true
		}
	}
	return meta.JournalMove{}, false
}

// TestJournalMove: the states of a partition's move between journals. A request keeps
// the owner and records the move; a repeat changes nothing; a third journal is refused;
// the seal needs the index's high watermark at the end it reports and releases the
// offload lease; completion flips the owner and drops the record; repeats of both
// answer nil; a requested move can be cancelled, a sealed one cannot; deleting the
// stream drops its moves.
func TestJournalMove(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"j1", "j2", "j3"} {
		if r := h.apply(t0, CreateJournal(meta.Journal{ID: id, Members: testMembers(id+"a", id+"b", id+"c")})); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	q := h.apply(t0+1, quorumStream("q", 2)).Stream
	if got := assignedTo(h.placement(), q.ID); got[0] != "j1" || got[1] != "j1" {
		t.Fatalf("placed: %v", got)
	}
	l := h.apply(t0+1, AcquireLease(q.ID, 1, meta.LeaseOffload, "journal-j1", 60_000)).Lease
	if r := h.apply(t0+2, AppendSegments(meta.SegmentAppend{Lease: l, Entries: []meta.IndexEntry{segEntry(0, 10, "seg/q1")}})); r.Err != nil {
		t.Fatal(r.Err)
	}
	carry := []meta.ProducerCarry{{ID: 5, Epoch: 1, First: []int32{0, 4}, Last: []int32{3, 6}, Base: []int64{8, 12}}}

	// Sealing or completing a move nobody requested.
	if r := h.apply(t0+3, SealJournalMove(meta.JournalMove{StreamID: q.ID, Partition: 1, From: "j1", To: "j2", End: 10})); !errors.Is(r.Err, meta.ErrJournalMove) {
		t.Fatalf("seal without a move: %v", r.Err)
	}
	if r := h.apply(t0+3, CompleteJournalMove(q.ID, 1, "j2", 10)); !errors.Is(r.Err, meta.ErrJournalMove) {
		t.Fatalf("complete without a move: %v", r.Err)
	}
	// The request.
	n := len(h.events)
	if r := h.apply(t0+3, AssignJournalPartitions(q.ID, []int32{1}, "j2")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(h.events) != n+1 || !h.events[n].JournalsChanged {
		t.Fatalf("request events: %+v", h.events[n:])
	}
	want := meta.JournalMove{StreamID: q.ID, Partition: 1, From: "j1", To: "j2", State: meta.MoveRequested, CreatedMs: t0 + 3}
	if m, ok := moveOf(h.placement(), q.ID, 1); !ok || !reflect.DeepEqual(m, want) {
		t.Fatalf("requested: %+v %v", m, ok)
	}
	n = len(h.events)
	if r := h.apply(t0+4, AssignJournalPartitions(q.ID, []int32{1}, "j2")); r.Err != nil || len(h.events) != n {
		t.Fatalf("repeat: %v, events %+v", r.Err, h.events[n:])
	}
	// A request naming a third journal, for partitions 0 and 1, changes neither.
	if r := h.apply(t0+4, AssignJournalPartitions(q.ID, []int32{0, 1}, "j3")); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("a third journal: %v", r.Err)
	}
	if _, ok := moveOf(h.placement(), q.ID, 0); ok {
		t.Fatal("a refused request moved partition 0")
	}
	// The seal: the wrong end, the wrong journals, a bad carry; then the seal and its repeat.
	for _, c := range []struct {
		m    meta.JournalMove
		want error
	}{
		{meta.JournalMove{StreamID: q.ID, Partition: 1, From: "j1", To: "j2", End: 7}, meta.ErrIndexChanged},
		{meta.JournalMove{StreamID: q.ID, Partition: 1, From: "j3", To: "j2", End: 10}, meta.ErrJournalMove},
		{meta.JournalMove{StreamID: q.ID, Partition: 1, From: "j1", To: "j2", End: 10, Producers: []meta.ProducerCarry{{ID: 5, First: []int32{1}}}}, meta.ErrInvalidArgument},
	} {
		if r := h.apply(t0+5, SealJournalMove(c.m)); !errors.Is(r.Err, c.want) {
			t.Errorf("seal %+v: %v, want %v", c.m, r.Err, c.want)
		}
	}
	if r := h.apply(t0+5, CompleteJournalMove(q.ID, 1, "j2", 10)); !errors.Is(r.Err, meta.ErrJournalMove) {
		t.Fatalf("complete before the seal: %v", r.Err)
	}
	seal := meta.JournalMove{StreamID: q.ID, Partition: 1, From: "j1", To: "j2", End: 10, Producers: carry}
	if r := h.apply(t0+6, SealJournalMove(seal)); r.Err != nil {
		t.Fatal(r.Err)
	}
	want.State, want.End, want.Producers = meta.MoveSealed, 10, carry
	if m, ok := moveOf(h.placement(), q.ID, 1); !ok || !reflect.DeepEqual(m, want) {
		t.Fatalf("sealed: %+v %v", m, ok)
	}
	n = len(h.events)
	if r := h.apply(t0+7, SealJournalMove(seal)); r.Err != nil || len(h.events) != n {
		t.Fatalf("seal repeat: %v", r.Err)
	}
	if r := h.apply(t0+7, SealJournalMove(meta.JournalMove{StreamID: q.ID, Partition: 1, From: "j1", To: "j2", End: 11})); !errors.Is(r.Err, meta.ErrJournalMove) {
		t.Fatalf("seal at another end: %v", r.Err)
	}
	// The old journal's offload lease is over: the new journal takes it at once.
	if r := h.apply(t0+8, AcquireLease(q.ID, 1, meta.LeaseOffload, "journal-j2", 60_000)); r.Err != nil || r.Lease.Epoch != l.Epoch+1 {
		t.Fatalf("the new journal's lease: %+v %v", r.Lease, r.Err)
	}
	// A sealed move is not cancelled.
	if r := h.apply(t0+8, AssignJournalPartitions(q.ID, []int32{1}, "j1")); !errors.Is(r.Err, meta.ErrInvalidArgument) {
		t.Fatalf("cancel a sealed move: %v", r.Err)
	}
	// Completion at the wrong end or journal; then completion and its repeat.
	if r := h.apply(t0+9, CompleteJournalMove(q.ID, 1, "j2", 9)); !errors.Is(r.Err, meta.ErrJournalMove) {
		t.Fatalf("complete at another end: %v", r.Err)
	}
	if r := h.apply(t0+9, CompleteJournalMove(q.ID, 1, "j3", 10)); !errors.Is(r.Err, meta.ErrJournalMove) {
		t.Fatalf("complete to another journal: %v", r.Err)
	}
	if r := h.apply(t0+9, CompleteJournalMove(q.ID, 1, "j2", 10)); r.Err != nil {
		t.Fatal(r.Err)
	}
	p := h.placement()
	if got := assignedTo(p, q.ID); got[0] != "j1" || got[1] != "j2" || len(p.Moves) != 0 {
		t.Fatalf("completed: %v, moves %+v", got, p.Moves)
	}
	n = len(h.events)
	if r := h.apply(t0+10, CompleteJournalMove(q.ID, 1, "j2", 10)); r.Err != nil || len(h.events) != n {
		t.Fatalf("complete repeat: %v", r.Err)
	}
	// A requested move is cancelled by naming the owner.
	if r := h.apply(t0+11, AssignJournalPartitions(q.ID, []int32{0}, "j3")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := h.apply(t0+12, AssignJournalPartitions(q.ID, []int32{0}, "j1")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if p := h.placement(); len(p.Moves) != 0 || assignedTo(p, q.ID)[0] != "j1" {
		t.Fatalf("cancelled: %+v", p)
	}
	// Deleting the stream drops its moves.
	if r := h.apply(t0+13, AssignJournalPartitions(q.ID, []int32{0}, "j3")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := h.apply(t0+14, DeleteStream("default", "q")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if p := h.placement(); len(p.Moves) != 0 || len(p.Assignments) != 0 {
		t.Fatalf("after delete: %+v", p)
	}
}
