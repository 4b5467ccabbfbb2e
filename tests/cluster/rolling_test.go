package cluster

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRollingRestart restarts every voter and then every log node one at a time with
// SIGTERM, as a deployment rolls a new version (the supervisor starts each again, like ECS
// or systemd), under steady produce and tail load: each voter is restarted only once the
// others caught up with the leader, each log node drains before it exits. Nothing
// acknowledged is lost or duplicated, and the load keeps being acknowledged throughout.
func TestRollingRestart(t *testing.T) {
	const stream, parts = "rolling", int32(4)
	c := setup(t, Options{Sequencers: 3, Nodes: 2}, stream, parts)
	l := NewLedger()
	load, err := StartLoad(LoadConfig{Nodes: c.NodeURLs(), Stream: stream, Partitions: parts, Writers: 4, PerRequest: 20, Tailers: true}, l)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	for _, id := range []string{"seq-1", "seq-2", "seq-3", "node-1", "node-2"} {
		if strings.HasPrefix(id, "seq-") {
			waitAllVotersCaughtUp(t, c)
		}
		before := l.Acked()
		old := c.Signal(id, syscall.SIGTERM)
		c.WaitRestarted(id, old, 60*time.Second)
		// The load goes on: records are acknowledged again within a few seconds of the restart.
		deadline := time.Now().Add(15 * time.Second)
		for l.Acked() <= before {
			if time.Now().After(deadline) {
				t.Fatalf("no record acknowledged within 15 s of restarting %s", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%s restarted; %d records acknowledged so far", id, l.Acked())
		time.Sleep(500 * time.Millisecond)
	}
	waitAllVotersCaughtUp(t, c)
	rep := finish(t, c, load, l, stream, parts)
	if n := rep.Acked; n == 0 {
		t.Fatal("nothing acknowledged")
	}
	compareVoters(t, c, stream, parts)
}
