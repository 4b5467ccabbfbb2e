package lognodecmd

import (
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/node"
)

// Without --journal-voters the node runs the quorum class in placement mode: no static
// journal, and its members' logs need --journal-dir.
func TestJournalFlagsPlacementMode(t *testing.T) {
	f := journalFlags{addr: "127.0.0.1:7101", id: "j0"}
	if err := f.apply(&node.Config{}); err == nil || !strings.Contains(err.Error(), "needs --journal-dir") {
		t.Fatalf("placement mode without a directory: %v", err)
	}
	f.dir = "/data/journal"
	var cfg node.Config
	if err := f.apply(&cfg); err != nil {
		t.Fatal(err)
	}
	if q := cfg.Quorum; q.Addr != "127.0.0.1:7101" || q.Dir != "/data/journal" || len(q.Voters) != 0 {
		t.Fatalf("placement mode: %+v", q)
	}
	f.voters = "a=h:1"
	if err := f.apply(&cfg); err != nil || len(cfg.Quorum.Voters) != 1 {
		t.Fatalf("static mode: %+v %v", cfg.Quorum, err)
	}
}
