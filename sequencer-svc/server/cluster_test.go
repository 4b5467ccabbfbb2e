package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// TestThreeVoters: a group bootstrapped with peers elects a leader; a follower's Node
// methods answer NotLeader with the leader's RPC address; metagrpc fails over when the
// first address is down; followers serve reads of replicated state.
func TestThreeVoters(t *testing.T) {
	var cfgs []Config
	for _, id := range []string{"a", "b", "c"} {
		cfg := testConfig(t, t.TempDir())
		cfg.ID = id
		cfg.Bootstrap = false
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
		cfgs = append(cfgs, cfg)
	}
	cfgs[0].Bootstrap = true
	cfgs[0].Peers = []Peer{{ID: "b", RaftAddr: cfgs[1].RaftAddr}, {ID: "c", RaftAddr: cfgs[2].RaftAddr}}
	var nodes []*Node
	for _, cfg := range cfgs {
		n := startNode(t, cfg)
		defer n.Close()
		nodes = append(nodes, n)
	}
	ctx := ctxT(t)
	var leader *Node
	var followers []*Node
	for leader == nil {
		if ctx.Err() != nil {
			t.Fatal("no leader")
		}
		followers = nil
		for _, n := range nodes {
			if n.IsLeader() {
				leader = n
			} else {
				followers = append(followers, n)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := leader.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// The leader registers its RPC address; wait until a follower knows it.
	var nl *meta.NotLeaderError
	for {
		_, err := followers[0].CreateStream(ctx, meta.StreamConfig{Name: "x", Partitions: 1})
		if !errors.As(err, &nl) {
			t.Fatalf("follower write: %v", err)
		}
		if nl.Leader == leader.RPCAddr() {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("hint %q, leader at %s", nl.Leader, leader.RPCAddr())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A client that knows only a follower, behind a dead address, reaches the leader.
	dead := freeAddr(t)
	c, err := metagrpc.Dial(ctx, []string{dead, followers[0].RPCAddr()}, metagrpc.WithReadyTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "orders", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	res, err := c.CommitWal(ctx, meta.CommitWal{Object: "o1", CreatedMs: now, StampMs: now,
		Chunks: []meta.Chunk{{StreamID: s.ID, Partition: 1, Records: 5, Length: 10}}})
	if err != nil || res.BaseOffsets[0] != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	// Followers apply the same entries.
	for _, f := range followers {
		for {
			es, st, err := NewLocalClient(f).Lookup(ctx, s.ID, 1, 0, 10)
			if err == nil && st.HighWatermark == 5 && len(es) == 1 && es[0].Object == "o1" {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("follower %s: %+v %+v %v", f.cfg.ID, es, st, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestFollowerCatchesUpFromSnapshot: a follower that was down while the leader truncated
// its log is sent a snapshot; it restores it and its watchers get a Reset.
func TestFollowerCatchesUpFromSnapshot(t *testing.T) {
	var cfgs []Config
	for _, id := range []string{"a", "b", "c"} {
		cfg := testConfig(t, t.TempDir())
		cfg.ID = id
		cfg.Bootstrap = id == "a"
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
		cfg.TrailingLogs = 2
		cfgs = append(cfgs, cfg)
	}
	cfgs[0].Peers = []Peer{{ID: "b", RaftAddr: cfgs[1].RaftAddr}, {ID: "c", RaftAddr: cfgs[2].RaftAddr}}
	nodes := make([]*Node, 3)
	for i, cfg := range cfgs {
		nodes[i] = startNode(t, cfg)
		defer func(i int) { nodes[i].Close() }(i)
	}
	ctx := ctxT(t)
	leaderIdx := -1
	for leaderIdx < 0 && ctx.Err() == nil {
		for i, n := range nodes {
			if n.IsLeader() {
				leaderIdx = i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if leaderIdx < 0 {
		t.Fatal("no leader")
	}
	leader := nodes[leaderIdx]
	if err := leader.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	lagIdx := (leaderIdx + 1) % 3
	nodes[lagIdx].Close()

	c := NewLocalClient(leader)
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "s", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := commitOne(ctx, c, s.ID, "o"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.Snapshot(); err != nil {
		t.Fatal(err)
	}

	nodes[lagIdx] = startNode(t, cfgs[lagIdx])
	lag := nodes[lagIdx]
	resets := make(chan meta.Event, 10)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go lag.Watch(wctx, 1, func(ev meta.Event) error {
		if ev.Reset {
			resets <- ev
		}
		return nil
	})
	for {
		_, st, err := NewLocalClient(lag).Lookup(ctx, s.ID, 0, 0, 100)
		if err == nil && st.HighWatermark == 200 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("follower did not catch up: %+v %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var reset meta.Event
	select {
	case reset = <-resets:
	case <-time.After(5 * time.Second):
		t.Fatal("no reset on the follower")
	}
	// Raft records the installed snapshot just after the FSM restored it.
	for lag.raft.Stats()["last_snapshot_index"] == "0" {
		if ctx.Err() != nil {
			t.Fatalf("the follower caught up without installing a snapshot (reset %+v)", reset)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
