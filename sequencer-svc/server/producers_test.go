package server

import (
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// TestProducersSurviveFailover: producer state is Raft state. A producer allocated and
// used through a follower (forwarded) keeps its sequences across a snapshot and the loss
// of the leader: a retry under a new object is answered as a duplicate with the original
// offset, the next sequence commits, the name bumps its epoch; the old leader restarted
// from its data directory catches up.
func TestProducersSurviveFailover(t *testing.T) {
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
	follower := nodes[(li+1)%3]
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.RPCAddr())
	}
	// A client that reaches the follower first: writes are forwarded.
	c, err := metagrpc.Dial(ctx, append([]string{follower.RPCAddr()}, addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "s", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.InitProducer(ctx, "default", "app", 0, -1)
	if err != nil || p.ID <= 0 || p.Epoch != 0 {
		t.Fatalf("%+v %v", p, err)
	}
	commit := func(obj string, seq int32) (meta.CommitResult, error) {
		now := time.Now().UnixMilli()
		return c.CommitWal(ctx, meta.CommitWal{Object: obj, CreatedMs: now, StampMs: now, Chunks: []meta.Chunk{{StreamID: s.ID, Records: 5, Length: 10,
			Producer: meta.ChunkProducer{ID: p.ID, Epoch: p.Epoch, BaseSequence: seq}}}})
	}
	if res, err := commit("o1", 0); err != nil || res.BaseOffsets[0] != 0 || res.Status != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if err := nodes[li].Snapshot(); err != nil {
		t.Fatal(err)
	}
	nodes[li].Close()
	leaderOf(li)

	res, err := commit("o2", 0)
	if err != nil || !res.IsDuplicate(0) || res.BaseOffsets[0] != 0 {
		t.Fatalf("retry after failover: %+v %v", res, err)
	}
	if res, err := commit("o3", 5); err != nil || res.BaseOffsets[0] != 5 || res.Status != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if res, err := commit("o4", 20); err != nil || !errors.Is(res.ChunkErr(0), meta.ErrOutOfOrderSequence) {
		t.Fatalf("%+v %v", res, err)
	}
	p2, err := c.InitProducer(ctx, "default", "app", 0, -1)
	if err != nil || p2.ID != p.ID || p2.Epoch != 1 {
		t.Fatalf("%+v %v", p2, err)
	}
	if res, err := commit("o5", 10); err != nil || !errors.Is(res.ChunkErr(0), meta.ErrProducerFenced) {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := c.InitProducer(ctx, "default", "", p.ID, 0); !errors.Is(err, meta.ErrProducerFenced) {
		t.Fatalf("stale bump over gRPC: %v", err)
	}

	nodes[li] = startNode(t, cfgs[li])
	for {
		_, st, err := NewLocalClient(nodes[li]).Lookup(ctx, s.ID, 0, 0, 10)
		if err == nil && st.HighWatermark == 10 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("restarted voter: %+v %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, ok := nodes[li].fsm.Producer(p.ID); !ok || got.Epoch != 1 || got.Name != "app" {
		t.Fatalf("restarted voter's producer: %+v %v", got, ok)
	}
}
