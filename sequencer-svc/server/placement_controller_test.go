package server

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
)

type fakeNodes struct {
	mu    sync.Mutex
	nodes map[string]LiveNode
}

func (f *fakeNodes) set(ns ...LiveNode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = map[string]LiveNode{}
	for _, n := range ns {
		f.nodes[n.ID] = n
	}
}

func (f *fakeNodes) drop(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nodes, id)
}

func (f *fakeNodes) list(context.Context) ([]LiveNode, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []LiveNode
	for _, n := range f.nodes {
		out = append(out, n)
	}
	return out, nil
}

func ln(id, zone string) LiveNode { return LiveNode{ID: id, Zone: zone, JournalAddr: id + ":7101"} }

func jm(id, zone string) meta.JournalMember {
	return meta.JournalMember{Node: id, Addr: id + ":7101", Zone: zone}
}

type ctlHarness struct {
	t     *testing.T
	nodes *fakeNodes
	mf    *metafake.Meta
	c     *placementController
	now   time.Time
}

func newCtl(t *testing.T) *ctlHarness {
	h := &ctlHarness{t: t, nodes: &fakeNodes{}, mf: metafake.New(), now: time.Unix(1_800_000_000, 0)}
	h.c = newPlacementController(PlacementConfig{Nodes: h.nodes.list, ReplaceAfter: time.Minute}, h.mf, func() time.Time { return h.now },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	return h
}

func (h *ctlHarness) pass() meta.Placement {
	h.t.Helper()
	if err := h.c.pass(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	p, err := h.mf.ListJournals(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func TestPlacementControllerCreatesJournalsInThreeZones(t *testing.T) {
	h := newCtl(t)
	// Two capable nodes and one without a journal listener: no journal.
	h.nodes.set(ln("a1", "a"), ln("a2", "a"), LiveNode{ID: "x", Zone: "c"})
	if p := h.pass(); len(p.Journals) != 0 {
		t.Fatalf("journal made of too few nodes: %+v", p.Journals)
	}
	// Three zones among five nodes: one member per zone, then by id.
	h.nodes.set(ln("a1", "a"), ln("a2", "a"), ln("b1", "b"), ln("c1", "c"), ln("c2", "c"))
	p := h.pass()
	if len(p.Journals) != 1 {
		t.Fatalf("journals: %+v", p.Journals)
	}
	if want := []meta.JournalMember{jm("a1", "a"), jm("b1", "b"), jm("c1", "c")}; p.Journals[0].ID != "j1" || !reflect.DeepEqual(p.Journals[0].Members, want) {
		t.Fatalf("journal %+v, want j1 of %+v", p.Journals[0], want)
	}
	// Two spares are not enough for another; a third makes j2 (two zones: a, c, then by id).
	if p := h.pass(); len(p.Journals) != 1 {
		t.Fatalf("a journal of spares: %+v", p.Journals)
	}
	h.nodes.set(ln("a1", "a"), ln("a2", "a"), ln("b1", "b"), ln("c1", "c"), ln("c2", "c"), ln("c3", "c"))
	p = h.pass()
	if want := []meta.JournalMember{jm("a2", "a"), jm("c2", "c"), jm("c3", "c")}; len(p.Journals) != 2 || p.Journals[1].ID != "j2" || !reflect.DeepEqual(p.Journals[1].Members, want) {
		t.Fatalf("second journal: %+v, want j2 of %+v", p.Journals, want)
	}
	// A quorum stream goes to the least loaded journal at create.
	st, err := h.mf.CreateStream(context.Background(), meta.StreamConfig{Name: "q", Partitions: 2, Class: meta.ClassQuorum})
	if err != nil {
		t.Fatal(err)
	}
	p = h.pass()
	if want := []meta.JournalAssignment{{StreamID: st.ID, Partition: 0, Journal: "j1"}, {StreamID: st.ID, Partition: 1, Journal: "j1"}}; !reflect.DeepEqual(p.Assignments, want) {
		t.Fatalf("assignments %+v, want %+v", p.Assignments, want)
	}
}

func TestPlacementControllerReplacesAGoneMember(t *testing.T) {
	h := newCtl(t)
	h.nodes.set(ln("a1", "a"), ln("b1", "b"), ln("c1", "c"))
	j := h.pass().Journals[0]
	// A spare in b and one in c: b1 goes, so the spare in b (the zone the others are not
	// in) takes its place, after ReplaceAfter and not before.
	h.nodes.set(ln("a1", "a"), ln("b1", "b"), ln("c1", "c"), ln("c9", "c"), ln("b9", "b"))
	h.pass()
	h.nodes.drop("b1")
	h.now = h.now.Add(30 * time.Second)
	if p := h.pass(); p.Journals[0].Epoch != 1 {
		t.Fatalf("replaced before ReplaceAfter: %+v", p.Journals[0])
	}
	h.now = h.now.Add(31 * time.Second)
	p := h.pass()
	want := []meta.JournalMember{jm("a1", "a"), jm("b9", "b"), jm("c1", "c")}
	if got := p.Journals[0]; got.Epoch != j.Epoch+1 || !reflect.DeepEqual(got.Members, want) {
		t.Fatalf("after the replacement: %+v, want epoch %d and %+v", got, j.Epoch+1, want)
	}
	// b1 coming back changes nothing: it is no member any more (its node stops its member).
	h.nodes.set(ln("a1", "a"), ln("b1", "b"), ln("c1", "c"), ln("c9", "c"), ln("b9", "b"))
	if p := h.pass(); p.Journals[0].Epoch != 2 || len(p.Journals) != 1 {
		t.Fatalf("after b1 came back: %+v", p.Journals)
	}
}

func TestPlacementControllerWaitsForACandidateAndForgetsOnLeadershipLoss(t *testing.T) {
	h := newCtl(t)
	h.nodes.set(ln("a1", "a"), ln("b1", "b"), ln("c1", "c"))
	h.pass()
	// c1 gone, no spare: nothing changes, however long.
	h.nodes.drop("c1")
	h.now = h.now.Add(time.Hour)
	if p := h.pass(); p.Journals[0].Epoch != 1 {
		t.Fatalf("replaced without a candidate: %+v", p.Journals[0])
	}
	// A controller that starts leading counts a member it never saw live from then on.
	h.c.reset()
	h.nodes.set(ln("a1", "a"), ln("b1", "b"), ln("d1", "c"))
	h.pass()
	h.now = h.now.Add(59 * time.Second)
	if p := h.pass(); p.Journals[0].Epoch != 1 {
		t.Fatalf("replaced within ReplaceAfter of leading: %+v", p.Journals[0])
	}
	h.now = h.now.Add(2 * time.Second)
	if p := h.pass(); p.Journals[0].Epoch != 2 || p.Journals[0].Members[2].Node != "d1" {
		t.Fatalf("not replaced after ReplaceAfter of leading: %+v", p.Journals[0])
	}
	// A stale epoch (another change came first) is refused and nothing is lost: the next
	// pass reads the journal again.
	if _, err := h.mf.SetJournalMembers(context.Background(), "j1", 1, []meta.JournalMember{jm("a1", "a")}); err == nil {
		t.Fatal("stale epoch accepted")
	}
}
