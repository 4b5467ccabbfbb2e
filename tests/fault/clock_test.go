package fault

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loamhq/loam/tests/cluster"
)

// TestClockSkew runs one voter, or one log node, two minutes off (--clock-offset) under
// load, and kills the leader halfway so that an election runs with the skewed voter.
// A voter's skew must not stop the group (the clock guard hands leadership away from a
// fast leader; a slow one stamps the majority's time); a skewed log node's commits are
// refused (stamped ahead, or outside the commit window), cleanly: the load goes on
// through the other node.
func TestClockSkew(t *testing.T) {
	for _, tc := range []struct {
		name, child, offset string
	}{
		{"voter_fast", "seq-2", "2m"},
		{"voter_slow", "seq-2", "-2m"},
		{"node_fast", "node-1", "2m"},
		{"node_slow", "node-1", "-2m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, 3, 2, "clk", 4, cluster.Options{DevArgs: []string{"--child-args", tc.child + "=--clock-offset " + tc.offset}})
			l := cluster.NewLedger()
			load := e.load(l)
			from := time.Now()
			time.Sleep(faultWindow() / 2)
			leader := e.c.WaitLeader(10 * time.Second)
			old := e.c.Signal(leader.ID, syscall.SIGKILL)
			killed := time.Now()
			e.c.WaitRestarted(leader.ID, old, 30*time.Second)
			rec := recovery(t, l, killed, 30*time.Second)
			time.Sleep(faultWindow() / 2)
			end := time.Now()
			during := countOutcomes(l, from, end)
			rep := e.finish(load, l)
			var fired int
			if strings.HasPrefix(tc.child, "seq") {
				// The skewed voter warns of the leader's clock, or a leader hands over.
				fired = e.c.CountInLogs("seq", "max_skew")
			} else {
				for _, r := range l.Requests() {
					if r.Outcome == cluster.Failed && strings.Contains(r.Node, nodeURL(e, 0)) {
						fired++
					}
				}
			}
			t.Logf("FIGURE skew=%s %s %s: fired=%d during: %s; produce resumed %s after the leader (%s) was killed; lost: none (%d acknowledged attempts all present)",
				tc.name, tc.child, tc.offset, fired, during, rec.Round(time.Millisecond), leader.ID, rep.Acked)
			if fired == 0 {
				t.Fatalf("no sign of the skew (%s)", tc.name)
			}
			// Through a skewed node every other request fails over to the healthy one.
			want := 2
			if strings.HasPrefix(tc.child, "node") {
				want = 3
			}
			if during.Acked*want < during.total() {
				t.Fatalf("%s acknowledged, want at least 1/%d", during, want)
			}
		})
	}
}

// nodeURL is log node i's base URL.
func nodeURL(e *env, i int) string { return e.c.NodeURLs()[i] }
