package metapb

import (
	"encoding/hex"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/meta"
)

// TestLeaderZoneWire: golden bytes of the fields the leader zone hint added (written by
// hand from the proto's field numbers), and the round trip of their Go types.
func TestLeaderZoneWire(t *testing.T) {
	zone := "az-b"
	p := meta.Placement{
		Journals:    []meta.Journal{{ID: "j1", Members: []meta.JournalMember{{Node: "n1", Addr: "h:1", Zone: "az-a"}}, Epoch: 1}},
		Assignments: []meta.JournalAssignment{{StreamID: 7, Partition: 0, Journal: "j1"}},
		LeaderZones: []meta.StreamLeaderZone{{StreamID: 7, Zone: "az-a"}},
	}
	for _, c := range []struct {
		name string
		msg  proto.Message
		want string
	}{
		// field 4 (leader_zones), 8 bytes: stream_id 7, zone "az-a"
		{"ListJournalsResponse.leader_zones", &ListJournalsResponse{LeaderZones: []*StreamLeaderZone{{StreamId: 7, Zone: "az-a"}}}, "220808071204617a2d61"},
		// field 4 (class) "quorum", field 11 (leader_zone) "az-a"
		{"StreamConfig.leader_zone", &StreamConfig{Class: "quorum", LeaderZone: "az-a"}, "220671756f72756d5a04617a2d61"},
		// field 7 (leader_zone) "az-b"
		{"StreamPatch.leader_zone", &StreamPatch{LeaderZone: &zone}, "3a04617a2d62"},
	} {
		b, err := proto.Marshal(c.msg)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if back := ToPlacement(FromPlacement(p)); !reflect.DeepEqual(back, p) {
		t.Fatalf("placement round trip:\n got %+v\nwant %+v", back, p)
	}
	cfg := meta.StreamConfig{Namespace: "default", Name: "orders", Partitions: 3, Class: meta.ClassQuorum, LeaderZone: "az-a"}
	if back := ToStreamConfig(FromStreamConfig(cfg)); back != cfg {
		t.Fatalf("config round trip: %+v", back)
	}
	if back := ToStreamPatch(FromStreamPatch(meta.StreamPatch{LeaderZone: &zone})); back.LeaderZone == nil || *back.LeaderZone != zone {
		t.Fatalf("patch round trip: %+v", back)
	}
}
