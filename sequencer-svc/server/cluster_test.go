package server

import (
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// TestThreeVoters: a group bootstrapped with peers elects a leader; a follower answers
// NotLeader with the leader's RPC address; metagrpc follows the hint, and fails over
// when the first address is down; followers serve reads of replicated state.
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
		_, err := NewLocalClient(followers[0]).CreateStream(ctx, meta.StreamConfig{Name: "x", Partitions: 1})
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
