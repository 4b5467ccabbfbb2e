package fault

import (
	"syscall"
	"testing"
	"time"

	"github.com/loamhq/loam/tests/cluster"
)

// TestZoneLoss: three voters and three log nodes in zones a, b and c; every process of the
// leader's zone is SIGKILLed at once under load and kept down for faultWindow, then brought
// back. Produce must resume within seconds through the surviving zones, and the checker
// stay clean (RPO 0).
func TestZoneLoss(t *testing.T) {
	e := start(t, 3, 3, "zone", 6, cluster.Options{DevArgs: []string{"--zones", "a,b,c"}})
	l := cluster.NewLedger()
	load := e.load(l)
	time.Sleep(2 * time.Second)
	leader := e.c.WaitLeader(10 * time.Second)
	cf := e.c.File()
	var ids []string
	for _, s := range cf.Sequencers {
		if s.Zone == leader.Zone {
			ids = append(ids, s.ID)
		}
	}
	for _, n := range cf.Nodes {
		if n.Zone == leader.Zone {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("zone %q holds %v, want one voter and one node", leader.Zone, ids)
	}
	pids := map[string]int{}
	for _, id := range ids {
		e.c.Hold(id)
	}
	for _, id := range ids {
		pids[id] = e.c.Signal(id, syscall.SIGKILL)
	}
	killed := time.Now()
	rec := recovery(t, l, killed, 30*time.Second)
	time.Sleep(faultWindow())
	for _, id := range ids {
		e.c.Release(id)
	}
	back := time.Now()
	for _, id := range ids {
		e.c.WaitRestarted(id, pids[id], 30*time.Second)
	}
	time.Sleep(2 * time.Second)
	during := countOutcomes(l, killed, back)
	rep := e.finish(load, l)
	t.Logf("FIGURE zone_loss zone=%s (%v, the leader's): during: %s; produce resumed %s after the kill; lost: none (%d acknowledged attempts all present)",
		leader.Zone, ids, during, rec.Round(time.Millisecond), rep.Acked)
	if during.Acked*2 < during.total() {
		t.Fatalf("%s acknowledged while the zone was down, want at least half", during)
	}
}
