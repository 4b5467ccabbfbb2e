package server

import (
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// TestKafkaGroupsThroughFollower: Kafka group state over the real three-voter sequencer,
// reached through a follower (the gRPC client dialing it, and the follower's in-process
// client), so writes are forwarded to the leader: a claim fences the previous holder, whose
// commit is refused with ErrStaleGroupGeneration over gRPC, reads answer on the follower,
// and the state survives the loss of the leader.
func TestKafkaGroupsThroughFollower(t *testing.T) {
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
	if _, err := remote.CreateStream(ctx, meta.StreamConfig{Name: "s", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	a, err := remote.AdvanceKafkaGroup(ctx, "default", "grp", 0, "consumer")
	if err != nil || a.Generation != 1 {
		t.Fatalf("claim over gRPC: %+v %v", a, err)
	}
	commit := func(c meta.Client, g meta.KafkaGroupGeneration, off int64) error {
		return c.CommitKafkaOffsets(ctx, meta.KafkaOffsetCommit{Namespace: "default", Group: "grp", Generation: g.Generation, Epoch: g.Epoch,
			Offsets: []meta.KafkaOffset{{Topic: "s", Partition: 1, Offset: off, LeaderEpoch: -1, Metadata: "m"}}})
	}
	if err := commit(remote, a, 4); err != nil {
		t.Fatal(err)
	}
	b, err := local.AdvanceKafkaGroup(ctx, "default", "grp", 0, "consumer")
	if err != nil || b.Generation != 2 {
		t.Fatalf("claim in process: %+v %v", b, err)
	}
	for name, c := range map[string]meta.Client{"grpc": remote, "local": local} {
		if err := commit(c, a, 9); !errors.Is(err, meta.ErrStaleGroupGeneration) {
			t.Fatalf("%s: commit of the fenced coordinator: %v", name, err)
		}
		if _, err := c.AdvanceKafkaGroup(ctx, "default", "grp", a.Epoch, ""); !errors.Is(err, meta.ErrStaleGroupGeneration) {
			t.Fatalf("%s: advance of the fenced coordinator: %v", name, err)
		}
		if _, err := c.DescribeKafkaGroup(ctx, "default", "nope"); !errors.Is(err, meta.ErrKafkaGroupNotFound) {
			t.Fatalf("%s: describe unknown: %v", name, err)
		}
	}
	if err := commit(local, b, 6); err != nil {
		t.Fatal(err)
	}
	nodes[li].Close()
	leaderOf(li)
	for name, c := range map[string]meta.Client{"grpc": remote, "local": local} {
		var st meta.KafkaGroupState
		for ctx.Err() == nil {
			if st, err = c.DescribeKafkaGroup(ctx, "default", "grp"); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if st.Generation != 2 || st.Epoch != b.Epoch || len(st.Offsets) != 1 || st.Offsets[0].Offset != 6 || st.Offsets[0].Metadata != "m" {
			t.Fatalf("%s: after the leader's loss: %+v %v", name, st, err)
		}
		gs, err := c.ListKafkaGroups(ctx, "default")
		if err != nil || len(gs) != 1 || gs[0].Group != "grp" {
			t.Fatalf("%s: list: %+v %v", name, gs, err)
		}
	}
	if err := remote.DeleteKafkaOffsets(ctx, "default", "grp", b.Epoch, []meta.KafkaTopicPartition{{Topic: "s", Partition: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := remote.DeleteKafkaGroup(ctx, "default", "grp", a.Epoch); !errors.Is(err, meta.ErrStaleGroupGeneration) {
		t.Fatalf("stale delete: %v", err)
	}
	if err := local.DeleteKafkaGroup(ctx, "default", "grp", b.Epoch); err != nil {
		t.Fatal(err)
	}
}
