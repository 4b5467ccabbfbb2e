package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// TestGoldenLeaderZone: a quorum stream's leader zone hint is a field of the create and
// update commands whose bytes are fixed (testdata/v4/create_stream_leader_zone.cmd,
// update_stream_leader_zone.cmd) and survives a round trip.
func TestGoldenLeaderZone(t *testing.T) {
	z := "use1-az2"
	for path, cmd := range map[string]*metapb.Command{
		"testdata/v4/create_stream_leader_zone.cmd": CreateStream(meta.StreamConfig{Namespace: meta.DefaultNS, Name: "orders", Partitions: 3,
			Class: meta.ClassQuorum, LeaderZone: "use1-az1"}),
		"testdata/v4/update_stream_leader_zone.cmd": UpdateStream(meta.DefaultNS, "orders", meta.StreamPatch{LeaderZone: &z}),
	} {
		cmd.StampMs = t0 + 7
		b := golden(t, path, func() []byte { b, _ := Encode(cmd); return b })
		got, err := Decode(b)
		if err != nil || got.String() != cmd.String() {
			t.Fatalf("%s: %v: %v", path, err, got)
		}
		if enc, _ := Encode(cmd); !bytes.Equal(enc, b) {
			t.Fatalf("%s: encoding changed:\n got %x\nwant %x", path, enc, b)
		}
	}
}

// TestLeaderZoneValidation: only a quorum stream takes a leader zone, on create and on
// update; the zone is printable ASCII of at most MaxLeaderZoneLength bytes; a zone no
// journal has is accepted; "" clears it.
func TestLeaderZoneValidation(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		cfg  meta.StreamConfig
		want string
	}{
		{meta.StreamConfig{Name: "std", Partitions: 1, LeaderZone: "az-a"}, "only a stream of class quorum"},
		{meta.StreamConfig{Name: "exp", Partitions: 1, Class: meta.ClassExpress, LeaderZone: "az-a"}, "only a stream of class quorum"},
		{meta.StreamConfig{Name: "q1", Partitions: 1, Class: meta.ClassQuorum, LeaderZone: "az a"}, "not printable ASCII"},
		{meta.StreamConfig{Name: "q2", Partitions: 1, Class: meta.ClassQuorum, LeaderZone: strings.Repeat("z", meta.MaxLeaderZoneLength+1)}, "want 1..64"},
	} {
		r := h.apply(t0, CreateStream(c.cfg))
		if !errors.Is(r.Err, meta.ErrInvalidArgument) || !strings.Contains(r.Err.Error(), "leader_zone") || !strings.Contains(r.Err.Error(), c.want) {
			t.Errorf("create %+v: %v, want %q naming leader_zone", c.cfg, r.Err, c.want)
		}
	}
	q := h.apply(t0, CreateStream(meta.StreamConfig{Name: "q", Partitions: 1, Class: meta.ClassQuorum, LeaderZone: "zone-nobody-is-in"}))
	if q.Err != nil || q.Stream.LeaderZone != "zone-nobody-is-in" {
		t.Fatalf("create with an unknown zone: %v %q", q.Err, q.Stream.LeaderZone)
	}
	std := h.apply(t0, CreateStream(meta.StreamConfig{Name: "std", Partitions: 1}))
	if std.Err != nil {
		t.Fatal(std.Err)
	}
	z := "az-b"
	if r := h.apply(t0, UpdateStream(meta.DefaultNS, "std", meta.StreamPatch{LeaderZone: &z})); !errors.Is(r.Err, meta.ErrInvalidArgument) || !strings.Contains(r.Err.Error(), "leader_zone") {
		t.Fatalf("update a standard stream's leader zone: %v", r.Err)
	}
	if r := h.apply(t0, UpdateStream(meta.DefaultNS, "q", meta.StreamPatch{LeaderZone: &z})); r.Err != nil || r.Stream.LeaderZone != "az-b" {
		t.Fatalf("update: %v %q", r.Err, r.Stream.LeaderZone)
	}
	empty := ""
	if r := h.apply(t0, UpdateStream(meta.DefaultNS, "q", meta.StreamPatch{LeaderZone: &empty})); r.Err != nil || r.Stream.LeaderZone != "" {
		t.Fatalf("clear: %v %q", r.Err, r.Stream.LeaderZone)
	}
}

func zonedMembers(prefix string, zones ...string) []meta.JournalMember {
	out := make([]meta.JournalMember, len(zones))
	for i, z := range zones {
		out[i] = meta.JournalMember{Node: prefix + "-" + z, Addr: "10.0.1." + string(rune('1'+i)) + ":7101", Zone: z}
	}
	return out
}

// TestLeaderZonePlacement: a hinted stream goes to the least loaded journal with a member
// in its zone, however loaded it is against the others; with no such journal, to the
// least loaded of all; partitions added later follow partition 0; ListJournals answers
// the hints of the placed streams.
func TestLeaderZonePlacement(t *testing.T) {
	h := newHarness(t)
	// A hinted stream created before any journal is placed by the first journals' creation.
	early := h.apply(t0, CreateStream(meta.StreamConfig{Name: "early", Partitions: 1, Class: meta.ClassQuorum, LeaderZone: "az-y"})).Stream
	for _, j := range []meta.Journal{
		{ID: "j1", Members: zonedMembers("a", "az-a", "az-b", "az-c")},
		{ID: "j2", Members: zonedMembers("x", "az-x", "az-y", "az-z")},
		{ID: "j3", Members: zonedMembers("b", "az-a", "az-b", "az-c")},
	} {
		if r := h.apply(t0, CreateJournal(j)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	// "early" was placed by j1's creation, the only journal then: no member in az-y, so the
	// least loaded of all.
	if got := assignedTo(h.placement(), early.ID); !reflect.DeepEqual(got, map[int32]string{0: "j1"}) {
		t.Fatalf("early: %v", got)
	}
	create := func(name string, parts int32, zone string) meta.Stream {
		t.Helper()
		r := h.apply(t0, CreateStream(meta.StreamConfig{Name: name, Partitions: parts, Class: meta.ClassQuorum, LeaderZone: zone}))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.Stream
	}
	plain := create("plain", 4, "")                 // j2 and j3 at 0: j2
	y := create("y", 2, "az-y")                     // only j2 has az-y: j2 (4) over j3 (0)
	a := create("a", 1, "az-a")                     // j1 (1) and j3 (0) have az-a: j3
	nowhere := create("nowhere", 1, "az-elsewhere") // no journal has it: least loaded, j3 (1) beside j1 (1): j1
	for _, c := range []struct {
		st   meta.Stream
		want string
	}{{plain, "j2"}, {y, "j2"}, {a, "j3"}, {nowhere, "j1"}} {
		got := assignedTo(h.placement(), c.st.ID)
		for p := range c.st.Partitions {
			if got[p] != c.want {
				t.Errorf("stream %s: placed %v, want all in %s", c.st.Name, got, c.want)
				break
			}
		}
	}
	// Partitions added later join partition 0's journal, whatever the hint says.
	parts := int32(4)
	if r := h.apply(t0, UpdateStream(meta.DefaultNS, "y", meta.StreamPatch{Partitions: &parts})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := assignedTo(h.placement(), y.ID); !reflect.DeepEqual(got, map[int32]string{0: "j2", 1: "j2", 2: "j2", 3: "j2"}) {
		t.Fatalf("y after growing: %v", got)
	}
	want := []meta.StreamLeaderZone{{StreamID: early.ID, Zone: "az-y"}, {StreamID: y.ID, Zone: "az-y"}, {StreamID: a.ID, Zone: "az-a"},
		{StreamID: nowhere.ID, Zone: "az-elsewhere"}}
	if got := h.placement().LeaderZones; !reflect.DeepEqual(got, want) {
		t.Fatalf("leader zones: %+v, want %+v", got, want)
	}
	// A changed hint shows in ListJournals; the partitions stay.
	z := "az-b"
	if r := h.apply(t0, UpdateStream(meta.DefaultNS, "y", meta.StreamPatch{LeaderZone: &z})); r.Err != nil {
		t.Fatal(r.Err)
	}
	p := h.placement()
	if got := assignedTo(p, y.ID); got[0] != "j2" || p.LeaderZones[1] != (meta.StreamLeaderZone{StreamID: y.ID, Zone: "az-b"}) {
		t.Fatalf("after the hint changed: %v %+v", got, p.LeaderZones)
	}
}
