package server

import (
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// TestConsumersThroughFollower: named consumers over the real three-voter sequencer,
// reached through a follower (the gRPC client dialing it, and the follower's in-process
// client), so writes are forwarded to the leader: heartbeats balance the leases, commits
// are fenced by epoch with a distinct error over gRPC, reads answer on the follower, and
// the state survives the loss of the leader.
func TestConsumersThroughFollower(t *testing.T) {
	var cfgs []Config
	for _, id := range []string{"a", "b", "c"} {
		cfg := testConfig(t, t.TempDir())
		cfg.ID = id
		cfg.Bootstrap = id == "a"
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
		cfgs = append(cfgs, cfg)
	}
	cfgs[0].Peers = []Peer{{ID: "b", RaftAddr: cfgs[1].RaftAddr}, {ID: "c", RaftAddr: cfgs[2].RaftAddr}}
	nodes := make([]*Node, 3)
	for i, cfg := range cfgs {
		nodes[i] = startNode(t, cfg)
		defer func(i int) { nodes[i].Close() }(i)
	}
	ctx := ctxT(t)
	leaderOf := func(skip int) int {
		for ctx.Err() == nil {
			for i, n := range nodes {
				if i != skip && n.IsLeader() {
					if err := n.WaitLeader(ctx); err == nil {
						return i
					}
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("no leader")
		return -1
	}
	li := leaderOf(-1)
	fi := (li + 1) % 3
	remote, err := metagrpc.Dial(ctx, []string{nodes[fi].RPCAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	local := NewLocalClient(nodes[fi])
	if _, err := remote.CreateStream(ctx, meta.StreamConfig{Name: "s", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	hb := func(c meta.Client, m string) meta.ConsumerAssignment {
		t.Helper()
		a, err := c.ConsumerHeartbeat(ctx, meta.ConsumerHeartbeat{Namespace: "default", Consumer: "app", Stream: "s", Member: m, Session: 20 * time.Second})
		if err != nil {
			t.Fatalf("heartbeat %s: %v", m, err)
		}
		return a
	}
	a1 := hb(remote, "m1")
	if len(a1.Leases) != 3 || a1.Members != 1 || a1.Partitions != 3 {
		t.Fatalf("m1 alone: %+v", a1)
	}
	hb(local, "m2")
	a1 = hb(remote, "m1") // share 2 of 3: releases partition 2
	a2 := hb(local, "m2")
	if len(a1.Leases) != 2 || len(a2.Leases) != 1 || a2.Leases[0].Partition != 2 || a2.Leases[0].Epoch != 2 {
		t.Fatalf("m1 %+v, m2 %+v", a1, a2)
	}
	commit := func(c meta.Client, m string, p int32, epoch uint64) error {
		return c.CommitConsumerOffsets(ctx, meta.ConsumerCommit{Namespace: "default", Consumer: "app", Stream: "s", Member: m,
			Offsets: []meta.ConsumerOffset{{Partition: p, Offset: 0, Metadata: "m=" + m, Epoch: epoch}}})
	}
	if err := commit(remote, "m1", 2, 1); !errors.Is(err, meta.ErrStaleConsumerEpoch) {
		t.Fatalf("m1's stale commit over gRPC: %v", err)
	}
	if err := commit(local, "m1", 2, 1); !errors.Is(err, meta.ErrStaleConsumerEpoch) {
		t.Fatalf("m1's stale commit in process: %v", err)
	}
	if err := commit(local, "m2", 2, 2); err != nil {
		t.Fatal(err)
	}
	if err := commit(remote, "m1", 0, a1.Leases[0].Epoch); err != nil {
		t.Fatal(err)
	}
	for _, c := range []meta.Client{remote, local} {
		st, err := c.DescribeConsumer(ctx, "default", "app")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Partitions) != 3 || st.Partitions[2].Committed != 0 || st.Partitions[2].Metadata != "m=m2" || st.Partitions[2].Holder != "m2" ||
			st.Partitions[1].Committed != -1 || len(st.Members) != 2 {
			t.Fatalf("describe: %+v", st)
		}
		if _, err := c.DescribeConsumer(ctx, "default", "nobody"); !errors.Is(err, meta.ErrConsumerNotFound) {
			t.Fatalf("describe nobody: %v", err)
		}
		if names, err := c.ListConsumers(ctx, "default"); err != nil || len(names) != 1 || names[0] != "app" {
			t.Fatalf("list: %v %v", names, err)
		}
	}
	// The leader goes: the new one has the offsets and the leases.
	nodes[li].Close()
	ni := leaderOf(li)
	st, err := NewLocalClient(nodes[ni]).DescribeConsumer(ctx, "default", "app")
	if err != nil || st.Partitions[2].Committed != 0 || st.Partitions[2].Epoch != 2 {
		t.Fatalf("after failover: %+v %v", st, err)
	}
	if err := commit(NewLocalClient(nodes[ni]), "m2", 2, 2); err != nil {
		t.Fatal(err)
	}
}
