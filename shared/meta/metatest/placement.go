package metatest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

// Quorum placement: journals, the placement of quorum streams (with and without a leader
// zone hint) and the steps of a partition's move (docs/quorum.md, "Moving a partition"),
// each checked for its repeats and refusals. The suite's journals and zones are named
// after the run, so a shared sequencer's other journals do not count: the streams here
// are placed by hints only this subtest's journals match.

func testPlacement(t *testing.T, s *suite) {
	run := strings.Trim(s.prefix[len("wal/standard/"):], "/")
	zone := func(n string) string { return "mt-" + run[:8] + "-" + n }
	journal := func(n string, zones ...string) meta.Journal {
		j := meta.Journal{ID: "mt" + run[:8] + "-" + n}
		for i, z := range zones {
			j.Members = append(j.Members, meta.JournalMember{Node: j.ID + "-m" + fmt.Sprint(i), Addr: fmt.Sprintf("10.9.0.%d:7101", i+1), Zone: z})
		}
		return j
	}
	ja, jb, jc := journal("a", zone("x"), zone("y")), journal("b", zone("z")), journal("c", zone("w"))
	for _, j := range []meta.Journal{ja, jb, jc} {
		got, err := s.c.CreateJournal(s.ctx, j)
		if err != nil || got.Epoch != 1 || !reflect.DeepEqual(got.Members, j.Members) {
			t.Fatalf("CreateJournal %s: %+v %v", j.ID, got, err)
		}
		if again, err := s.c.CreateJournal(s.ctx, j); err != nil || again.Epoch != 1 {
			t.Fatalf("CreateJournal %s again (a retry): %+v %v", j.ID, again, err)
		}
	}
	// A leader zone hint places the stream in the journal with a member in the zone.
	s.n++
	name := fmt.Sprintf("mt-%s-%d", run, s.n)
	if _, err := s.c.CreateStream(s.ctx, meta.StreamConfig{Namespace: meta.DefaultNS, Name: name, Partitions: 1, LeaderZone: zone("z")}); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("CreateStream of class standard with a leader zone: %v, want ErrInvalidArgument", err)
	}
	st, err := s.c.CreateStream(s.ctx, meta.StreamConfig{Namespace: meta.DefaultNS, Name: name, Partitions: 2, Class: meta.ClassQuorum, LeaderZone: zone("z")})
	if err != nil || st.LeaderZone != zone("z") {
		t.Fatalf("CreateStream with a leader zone: %+v %v", st, err)
	}
	p := s.placement(t)
	if got := s.owners(p, st.ID); !reflect.DeepEqual(got, map[int32]string{0: jb.ID, 1: jb.ID}) {
		t.Fatalf("hinted stream placed %v, want both partitions in %s (the only journal in %s)", got, jb.ID, zone("z"))
	}
	if !slices.Contains(p.LeaderZones, meta.StreamLeaderZone{StreamID: st.ID, Zone: zone("z")}) {
		t.Fatalf("ListJournals leader zones %+v: want stream %d in %s", p.LeaderZones, st.ID, zone("z"))
	}

	// A move: requested (owner unchanged), repeated, refused to a third journal.
	if err := s.c.AssignJournalPartitions(s.ctx, st.ID, []int32{1}, ja.ID); err != nil {
		t.Fatalf("AssignJournalPartitions (a move): %v", err)
	}
	if err := s.c.AssignJournalPartitions(s.ctx, st.ID, []int32{1}, ja.ID); err != nil {
		t.Fatalf("AssignJournalPartitions (the move again): %v", err)
	}
	mv, ok := s.move(t, st.ID, 1)
	if !ok || mv.From != jb.ID || mv.To != ja.ID || mv.State != meta.MoveRequested || s.owners(s.placement(t), st.ID)[1] != jb.ID {
		t.Fatalf("after the request: move %+v %v, owners %v", mv, ok, s.owners(s.placement(t), st.ID))
	}
	if err := s.c.AssignJournalPartitions(s.ctx, st.ID, []int32{1}, jc.ID); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("a move to a third journal during a move: %v, want ErrInvalidArgument", err)
	}
	for _, bad := range []struct {
		what string
		err  error
		want error
	}{
		{"AssignJournalPartitions to no such journal", s.c.AssignJournalPartitions(s.ctx, st.ID, []int32{0}, "mt-none"), meta.ErrInvalidArgument},
		{"AssignJournalPartitions of a missing partition", s.c.AssignJournalPartitions(s.ctx, st.ID, []int32{2}, ja.ID), meta.ErrPartitionNotFound},
		{"CompleteJournalMove before the seal", s.c.CompleteJournalMove(s.ctx, st.ID, 1, ja.ID, 0), meta.ErrJournalMove},
		{"SealJournalMove from another journal", s.c.SealJournalMove(s.ctx, meta.JournalMove{StreamID: st.ID, Partition: 1, From: jc.ID, To: ja.ID, End: 0}), meta.ErrJournalMove},
		{"SealJournalMove at an end the index does not have", s.c.SealJournalMove(s.ctx, meta.JournalMove{StreamID: st.ID, Partition: 1, From: jb.ID, To: ja.ID, End: 5}), meta.ErrIndexChanged},
		{"SealJournalMove of a partition not moving", s.c.SealJournalMove(s.ctx, meta.JournalMove{StreamID: st.ID, Partition: 0, From: jb.ID, To: ja.ID}), meta.ErrJournalMove},
	} {
		if !errors.Is(bad.err, bad.want) {
			t.Errorf("%s: %v, want %v", bad.what, bad.err, bad.want)
		}
	}
	// Sealed, with the producer states it carries; a repeat changes nothing.
	carry := []meta.ProducerCarry{{ID: 7, Epoch: 2, First: []int32{0, 5}, Last: []int32{4, 9}, Base: []int64{0, 5}}}
	seal := meta.JournalMove{StreamID: st.ID, Partition: 1, From: jb.ID, To: ja.ID, End: 0, Producers: carry}
	for i := 0; i < 2; i++ {
		if err := s.c.SealJournalMove(s.ctx, seal); err != nil {
			t.Fatalf("SealJournalMove (attempt %d): %v", i+1, err)
		}
	}
	if mv, ok := s.move(t, st.ID, 1); !ok || mv.State != meta.MoveSealed || mv.End != 0 || !reflect.DeepEqual(mv.Producers, carry) {
		t.Fatalf("after the seal: %+v %v", mv, ok)
	}
	if err := s.c.AssignJournalPartitions(s.ctx, st.ID, []int32{1}, jb.ID); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("cancelling a sealed move: %v, want ErrInvalidArgument", err)
	}
	if err := s.c.CompleteJournalMove(s.ctx, st.ID, 1, ja.ID, 3); !errors.Is(err, meta.ErrJournalMove) {
		t.Fatalf("CompleteJournalMove at another end: %v, want ErrJournalMove", err)
	}
	// Completed: the owner flips and the record goes; a repeat answers success.
	for i := 0; i < 2; i++ {
		if err := s.c.CompleteJournalMove(s.ctx, st.ID, 1, ja.ID, 0); err != nil {
			t.Fatalf("CompleteJournalMove (attempt %d): %v", i+1, err)
		}
	}
	if _, ok := s.move(t, st.ID, 1); ok || s.owners(s.placement(t), st.ID)[1] != ja.ID {
		t.Fatalf("after the completion: a move left (%v) or owners %v", ok, s.owners(s.placement(t), st.ID))
	}
	// A requested move is cancelled by assigning the partition to its owner again.
	if err := s.c.AssignJournalPartitions(s.ctx, st.ID, []int32{0}, jc.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.c.AssignJournalPartitions(s.ctx, st.ID, []int32{0}, jb.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, ok := s.move(t, st.ID, 0); ok || s.owners(s.placement(t), st.ID)[0] != jb.ID {
		t.Fatalf("after the cancellation: a move left (%v) or owners %v", ok, s.owners(s.placement(t), st.ID))
	}
}

func (s *suite) placement(t *testing.T) meta.Placement {
	t.Helper()
	p, err := s.c.ListJournals(s.ctx)
	if err != nil {
		t.Fatalf("ListJournals: %v", err)
	}
	return p
}

func (s *suite) owners(p meta.Placement, stream uint64) map[int32]string {
	out := map[int32]string{}
	for _, a := range p.Assignments {
		if a.StreamID == stream {
			out[a.Partition] = a.Journal
		}
	}
	return out
}

func (s *suite) move(t *testing.T, stream uint64, part int32) (meta.JournalMove, bool) {
	t.Helper()
	for _, m := range s.placement(t).Moves {
		if m.StreamID == stream && m.Partition == part {
			return m, true
		}
	}
	return meta.JournalMove{}, false
}
