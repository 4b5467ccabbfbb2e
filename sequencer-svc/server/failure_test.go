package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// TestGRPCClientOutlivesSequencerRestart: while the sequencer is down writes fail with
// ErrUnavailable (nothing sent); once it is back the same client writes again promptly.
func TestGRPCClientOutlivesSequencerRestart(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	n := startNode(t, cfg)
	ctx := ctxT(t)
	c, err := metagrpc.Dial(ctx, []string{n.RPCAddr()}, metagrpc.WithReadyTimeout(300*time.Millisecond), metagrpc.WithAttempts(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "s", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if _, err := commitOne(ctx, c, s.ID, "down"); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("write while down: %v", err)
	}
	if _, _, err := c.GetStream(ctx, meta.DefaultNS, "s"); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("read while down: %v", err)
	}
	time.Sleep(time.Second) // let gRPC's reconnect backoff grow
	n = startNode(t, cfg)
	defer n.Close()
	start := time.Now()
	if _, err := commitOne(ctx, c, s.ID, "up"); err != nil {
		t.Fatalf("write after restart: %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("write after restart took %s", el)
	}
}

// TestQuorumLoss: a leader whose followers are gone cannot commit; the proposal answers
// ErrUnavailable (outcome unknown) or ErrNotLeader once it steps down, never success.
func TestQuorumLoss(t *testing.T) {
	var cfgs []Config
	for _, id := range []string{"a", "b", "c"} {
		cfg := testConfig(t, t.TempDir())
		cfg.ID = id
		cfg.Bootstrap = id == "a"
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
		cfg.ApplyTimeout = 2 * time.Second
		cfgs = append(cfgs, cfg)
	}
	cfgs[0].Peers = []Peer{{ID: "b", RaftAddr: cfgs[1].RaftAddr}, {ID: "c", RaftAddr: cfgs[2].RaftAddr}}
	var nodes []*Node
	for _, cfg := range cfgs {
		n := startNode(t, cfg)
		defer n.Close()
		nodes = append(nodes, n)
	}
	ctx := ctxT(t)
	var leader *Node
	for leader == nil && ctx.Err() == nil {
		for _, n := range nodes {
			if n.IsLeader() {
				leader = n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if leader == nil || leader.WaitLeader(ctx) != nil {
		t.Fatal("no leader")
	}
	for _, n := range nodes {
		if n != leader {
			n.Close()
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := NewLocalClient(leader).CreateStream(pctx, meta.StreamConfig{Name: "lost", Partitions: 1})
	if !errors.Is(err, meta.ErrUnavailable) && !errors.Is(err, meta.ErrNotLeader) {
		t.Fatalf("without quorum: %v", err)
	}
}
