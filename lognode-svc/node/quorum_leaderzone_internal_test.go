package node

import (
	"testing"

	"github.com/loamhq/loam/lognode-svc/journal"
	"github.com/loamhq/loam/shared/meta"
)

// TestHintedZone: the zone hinted by most of a journal's partitions wins; partitions of
// other journals and of streams without a hint do not count; a tie or no hint is "".
func TestHintedZone(t *testing.T) {
	part := func(s uint64, p uint32) journal.Partition { return journal.Partition{Stream: s, Partition: p} }
	view := func(parts map[journal.Partition]string, zones map[uint64]string) *placementView {
		return &placementView{parts: parts, zones: zones}
	}
	for _, c := range []struct {
		what  string
		parts map[journal.Partition]string
		zones map[uint64]string
		want  string
	}{
		{"no hints", map[journal.Partition]string{part(1, 0): "j1"}, nil, ""},
		{"one hinted stream", map[journal.Partition]string{part(1, 0): "j1", part(1, 1): "j1", part(2, 0): "j1"}, map[uint64]string{1: "az-b"}, "az-b"},
		{"most partitions win", map[journal.Partition]string{part(1, 0): "j1", part(2, 0): "j1", part(2, 1): "j1"},
			map[uint64]string{1: "az-a", 2: "az-c"}, "az-c"},
		{"a tie keeps the leader", map[journal.Partition]string{part(1, 0): "j1", part(2, 0): "j1"}, map[uint64]string{1: "az-a", 2: "az-c"}, ""},
		{"other journals do not count", map[journal.Partition]string{part(1, 0): "j1", part(2, 0): "j2", part(2, 1): "j2"},
			map[uint64]string{1: "az-a", 2: "az-c"}, "az-a"},
		{"hint of a stream not here", map[journal.Partition]string{part(1, 0): "j2"}, map[uint64]string{1: "az-a"}, ""},
	} {
		if got := hintedZone("j1", view(c.parts, c.zones)); got != c.want {
			t.Errorf("%s: %q, want %q", c.what, got, c.want)
		}
	}
}

// TestZoneTarget: the member in the hinted zone is the target (the smallest node id of
// several); none when the leader is in the zone already, no zone is hinted, or no member
// is in it (reported as missing).
func TestZoneTarget(t *testing.T) {
	j := meta.Journal{ID: "j1", Members: []meta.JournalMember{
		{Node: "n1", Addr: "h1:1", Zone: "az-a"}, {Node: "n3", Addr: "h3:1", Zone: "az-b"}, {Node: "n2", Addr: "h2:1", Zone: "az-b"}}}
	for _, c := range []struct {
		self, zone    string
		want          string
		ok, isMissing bool
	}{
		{"n1", "az-b", "n2", true, false},
		{"n2", "az-a", "n1", true, false},
		{"n1", "az-a", "", false, false},
		{"n2", "az-b", "", false, false}, // n3 is in az-b too, but so is the leader
		{"n1", "", "", false, false},
		{"n1", "az-z", "", false, true},
	} {
		got, ok, missing := zoneTarget(j, c.self, c.zone)
		if got.Node != c.want || ok != c.ok || missing != c.isMissing {
			t.Errorf("from %s to %q: %+v %v %v, want %s %v %v", c.self, c.zone, got, ok, missing, c.want, c.ok, c.isMissing)
		}
	}
}
