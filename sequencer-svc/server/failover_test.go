package server

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// TestLeaderKillFailover kills (crash) the leader of a three-voter group five times, each
// time while committers write through every voter, and measures how long after the kill
// a commit through each remaining voter succeeds again (routed to the new leader, no
// operator). The killed voter restarts before the next round. With 300 ms Raft timeouts
// every voter must be writable again within 3 s. LOAM_FIGURES=1 adds a run with the
// default timeouts (1 s heartbeat and election), whose bound is 5 s.
func TestLeaderKillFailover(t *testing.T) {
	runs := []time.Duration{300 * time.Millisecond}
	if os.Getenv("LOAM_FIGURES") == "1" {
		runs = append(runs, time.Second)
	}
	for _, d := range runs {
		t.Run(fmt.Sprintf("timeouts=%s", d), func(t *testing.T) {
			limit := 3 * time.Second
			if d >= time.Second {
				limit = 5 * time.Second
			}
			failover(t, d, limit)
		})
	}
}

func failover(t *testing.T, timeout, limit time.Duration) {
	cfgs := clusterConfigs(t, 3)
	for i := range cfgs {
		cfgs[i].HeartbeatTimeout, cfgs[i].ElectionTimeout, cfgs[i].LeaderLeaseTimeout = timeout, timeout, timeout/2
	}
	nodes := startAll(t, cfgs)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader := waitLeader(t, nodes)
	s, err := NewLocalClient(leader).CreateStream(ctx, meta.StreamConfig{Name: "failover", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	var anyVoter, everyVoter []time.Duration
	for round := range 5 {
		leader := waitLeader(t, nodes)
		li := slices.Index(nodes, leader)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i, n := range nodes { // steady load through every voter
			wg.Go(func() {
				c := NewLocalClient(n)
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					default:
					}
					cctx, cancel := context.WithTimeout(ctx, time.Second)
					commitOne(cctx, c, s.ID, fmt.Sprintf("wal/load/%d-%d-%d", round, i, k))
					cancel()
				}
			})
		}
		time.Sleep(200 * time.Millisecond)
		killed := time.Now()
		leader.crash()
		resumed := make(chan time.Duration, len(nodes))
		for i, n := range nodes {
			if i == li {
				continue
			}
			wg.Go(func() {
				c := NewLocalClient(n)
				for k := 0; ctx.Err() == nil; k++ {
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := commitOne(cctx, c, s.ID, fmt.Sprintf("wal/probe/%d-%d-%d", round, i, k))
					cancel()
					if err == nil {
						resumed <- time.Since(killed)
						return
					}
				}
			})
		}
		first, last := <-resumed, <-resumed
		close(stop)
		wg.Wait()
		anyVoter, everyVoter = append(anyVoter, first), append(everyVoter, last)
		t.Logf("round %d: killed %s; writes resumed through a remaining voter after %s, through both after %s",
			round, leader.cfg.ID, first.Round(time.Millisecond), last.Round(time.Millisecond))
		nodes[li] = startNode(t, cfgs[li])
	}
	slices.Sort(anyVoter)
	slices.Sort(everyVoter)
	t.Logf("failover over %d kills: first voter p50 %s max %s; every voter p50 %s max %s", len(anyVoter),
		anyVoter[len(anyVoter)/2].Round(time.Millisecond), anyVoter[len(anyVoter)-1].Round(time.Millisecond),
		everyVoter[len(everyVoter)/2].Round(time.Millisecond), everyVoter[len(everyVoter)-1].Round(time.Millisecond))
	if worst := everyVoter[len(everyVoter)-1]; worst > limit {
		t.Fatalf("writes resumed only after %s", worst)
	}
}
