package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// journalLeader is the log node (index) whose member leads the quorum journal, by the
// nodes' loam_journal_leader gauge; -1 while there is none.
func journalLeader(c *Cluster) int {
	for i, u := range c.NodeURLs() {
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), `loam_journal_leader{journal="j0"} 1`) {
			return i
		}
	}
	return -1
}

func waitJournalLeader(t *testing.T, c *Cluster, timeout time.Duration) int {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if i := journalLeader(c); i >= 0 {
			return i
		}
	}
	t.Fatalf("no journal leader within %s", timeout)
	return -1
}

// TestQuorumJournalKills is the quorum class's gate on real processes: loam dev
// --sequencers 3 --nodes 3 --journal-port P (node-1..node-3 are the journal's members),
// a quorum stream under load from several writers through every node, then SIGKILL of the
// journal leader's node, then of a follower's, then of the whole cluster and a restart.
// The checker finds nothing acknowledged lost or doubled and every partition's offsets
// dense and in order, and produce resumes within 3 s of each node kill.
func TestQuorumJournalKills(t *testing.T) {
	const stream, parts = "journaled", int32(4)
	port, _ := freePortRanges(t, 3, 1)
	c := Start(t, bins, Options{Sequencers: 3, Nodes: 3, DevArgs: []string{"--journal-port", strconv.Itoa(port)}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Client(0).CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: stream, Partitions: ptr(parts), Class: "quorum"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		for {
			if _, err := c.Client(i).GetStream(ctx, ns, stream); err == nil {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("node %d never saw the stream: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	l := NewLedger()
	load, err := StartLoad(LoadConfig{Nodes: c.NodeURLs(), Stream: stream, Partitions: parts, Writers: 4, PerRequest: 20,
		ProbeEvery: 20 * time.Millisecond, Tailers: true}, l)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	var gaps []time.Duration
	kill := func(what string, i int) {
		t.Helper()
		id := fmt.Sprintf("node-%d", i+1)
		at := time.Now()
		old := c.Kill(id)
		for {
			if d, ok := l.Resumption(at); ok {
				gaps = append(gaps, d)
				t.Logf("%s %s SIGKILLed: produce resumed after %s", what, id, d.Round(time.Millisecond))
				break
			}
			if time.Since(at) > 20*time.Second {
				t.Fatalf("produce did not resume within 20 s of killing %s %s", what, id)
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.WaitRestarted(id, old, 15*time.Second)
		time.Sleep(2 * time.Second)
	}
	leader := waitJournalLeader(t, c, 10*time.Second)
	kill("journal leader", leader)
	next := waitJournalLeader(t, c, 10*time.Second)
	kill("journal follower", (next+1)%3)

	c.KillAll()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	c.Restart()
	for {
		if d, ok := l.Resumption(start); ok {
			t.Logf("whole cluster SIGKILLed and restarted: produce resumed %s after the restart began", d.Round(time.Millisecond))
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("no produce succeeded within 30 s of restarting the cluster")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	finish(t, c, load, l, stream, parts)
	if worst := slices.Max(gaps); worst >= 3*time.Second {
		t.Fatalf("produce took %s to resume after a node kill: limit 3 s", worst)
	}
}
