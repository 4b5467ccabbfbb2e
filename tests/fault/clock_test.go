package fault

import (
	"context"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/objstore"
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
				// The skewed node names its WAL objects by its own clock.
				fired = skewedObjects(t, e, tc.child, 90*time.Second)
			}
			t.Logf("FIGURE skew=%s %s %s: fired=%d during: %s; produce resumed %s after the leader (%s) was killed; lost: none (%d acknowledged attempts all present)",
				tc.name, tc.child, tc.offset, fired, during, rec.Round(time.Millisecond), leader.ID, rep.Acked)
			if fired == 0 {
				t.Logf("%s log:\n%s", tc.child, e.c.LogTail(tc.child, 40))
				t.Fatalf("no sign of the skew (%s)", tc.name)
			}
			// Through a skewed node every other request fails over to the healthy one.
			// (A node 2 minutes fast has its commits refused as stamped ahead: the load
			// goes on through the healthy node; 2 minutes slow is inside the commit
			// window, 15 minutes.)
			want := 2
			if tc.name == "node_fast" {
				want = 3
			}
			if during.Acked*want < during.total() {
				t.Fatalf("%s acknowledged, want at least 1/%d", during, want)
			}
		})
	}
}

// skewedObjects counts the WAL objects of log node id whose ULID time is more than off away
// from the real clock.
func skewedObjects(t *testing.T, e *env, id string, off time.Duration) int {
	t.Helper()
	b, err := objstore.NewFS(filepath.Join(e.c.Dir, "bucket"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = b.List(context.Background(), "wal/standard/"+id+"/", func(info objstore.ObjectInfo) error {
		u, err := ulid.ParseStrict(strings.TrimSuffix(path.Base(info.Key), ".wal"))
		if err != nil {
			return err
		}
		if d := time.Since(ulid.Time(u.Time())); d > off || d < -off {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
