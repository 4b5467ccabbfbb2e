package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

func voters(t *testing.T, adm metagrpc.Admin) []string {
	t.Helper()
	ms, err := adm.Members(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		if m.Voter {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	return out
}

// TestJoinAndRemove: a fourth voter joins a running three-voter group after many commits
// and snapshots (through a follower's address): it catches up from a snapshot, is
// promoted, serves reads and takes writes; restarted with the same --join it stays a
// voter without joining again. Then a follower and the leader itself are removed, and
// the group keeps committing.
func TestJoinAndRemove(t *testing.T) {
	cfgs := clusterConfigs(t, 3)
	for i := range cfgs {
		cfgs[i].SnapshotThreshold = 32
		cfgs[i].SnapshotInterval = 50 * time.Millisecond
		cfgs[i].TrailingLogs = 8
	}
	nodes := startAll(t, cfgs)
	leader := waitLeader(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.RPCAddr())
	}
	g, err := metagrpc.Dial(ctx, addrs)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	s, err := g.CreateStream(ctx, meta.StreamConfig{Name: "join", Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Int64
	commitMany := func(c meta.Client, k int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				for range k / 8 {
					i := seq.Add(1)
					now := time.Now().UnixMilli()
					cw := meta.CommitWal{Object: fmt.Sprintf("wal/join/%d", i), CreatedMs: now, StampMs: now,
						Chunks: []meta.Chunk{{StreamID: s.ID, Partition: int32(i % 8), Records: 5, Length: 50}}}
					_, err := c.CommitWal(ctx, cw)
					// As a log node does: an unknown outcome (a client still calling a
					// voter that just went away) is retried with the same object; the
					// sequencer deduplicates it.
					for try := 0; errors.Is(err, meta.ErrUnavailable) && try < 5; try++ {
						time.Sleep(100 * time.Millisecond)
						_, err = c.CommitWal(ctx, cw)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	commitMany(g, 400)
	if err := leader.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if first, _ := leader.store.FirstIndex(); first <= 1 {
		t.Fatalf("leader log not truncated: first index %d", first)
	}

	// Join through a follower (AddVoter is forwarded).
	fs := followersOf(nodes, leader)
	dcfg := testConfig(t, t.TempDir())
	dcfg.ID, dcfg.Bootstrap, dcfg.Join = "d", false, []string{fs[0].RPCAddr()}
	dcfg.HeartbeatTimeout, dcfg.ElectionTimeout, dcfg.LeaderLeaseTimeout = cfgs[0].HeartbeatTimeout, cfgs[0].ElectionTimeout, cfgs[0].LeaderLeaseTimeout
	start := time.Now()
	d := startNode(t, dcfg)
	defer func() { d.Close() }()
	t.Logf("joined in %s at applied index %d (leader %d)", time.Since(start).Round(time.Millisecond), d.AppliedIndex(), leader.AppliedIndex())
	if d.raft.Stats()["last_snapshot_index"] == "0" {
		t.Fatal("the new voter caught up without installing a snapshot")
	}
	adm := g.(metagrpc.Admin)
	if got := voters(t, adm); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("voters %v", got)
	}
	dc := NewLocalClient(d)
	for p := range int32(8) {
		_, want, err := leader.Lookup(ctx, s.ID, p, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		es, got, err := dc.Lookup(ctx, s.ID, p, 0, 1000)
		if err != nil || got != want || len(es) != 50 {
			t.Fatalf("partition %d on the new voter: %d entries, %+v, want %+v: %v", p, len(es), got, want, err)
		}
	}
	commitMany(dc, 80)

	// Restarted with the same config: already a voter, it does not join again.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	cfgIndex := leader.raft.Stats()["latest_configuration_index"]
	d = startNode(t, dcfg)
	commitMany(g, 40)
	if idx := leader.raft.Stats()["latest_configuration_index"]; idx != cfgIndex {
		t.Fatalf("restart with --join changed the configuration (index %s -> %s)", cfgIndex, idx)
	}
	d.catchUp(ctx)
	if _, st, err := NewLocalClient(d).Lookup(ctx, s.ID, 0, 0, 0); err != nil || st.HighWatermark != 65*5 {
		t.Fatalf("restarted voter: %+v %v", st, err)
	}

	// Remove a follower through the new voter's address, then the leader itself.
	dg, err := metagrpc.Dial(ctx, []string{d.RPCAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer dg.Close()
	dadm := dg.(metagrpc.Admin)
	if err := dadm.RemoveServer(ctx, fs[1].cfg.ID); err != nil {
		t.Fatal(err)
	}
	if err := dadm.RemoveServer(ctx, "nobody"); err != nil {
		t.Fatalf("removing an unknown server: %v", err)
	}
	fs[1].Close()
	if got := voters(t, dadm); slices.Contains(got, fs[1].cfg.ID) || len(got) != 3 {
		t.Fatalf("voters after removing %s: %v", fs[1].cfg.ID, got)
	}
	commitMany(dg, 40)
	if err := dadm.RemoveServer(ctx, leader.cfg.ID); err != nil && !errors.Is(err, meta.ErrUnavailable) {
		t.Fatal(err) // the old leader may step down before it answers: outcome unknown
	}
	start = time.Now()
	rest := []*Node{fs[0], d}
	newLeader := waitLeader(t, rest)
	t.Logf("after removing the leader: %s leads within %s", newLeader.cfg.ID, time.Since(start).Round(time.Millisecond))
	leader.Close()
	commitMany(dg, 40)
	if got := voters(t, dadm); !slices.Equal(got, []string{fs[0].cfg.ID, "d"}) && !slices.Equal(got, []string{"d", fs[0].cfg.ID}) {
		t.Fatalf("voters after removing the leader: %v", got)
	}
}

// TestAddVoterValidates: AddVoter refuses an empty id or a malformed address, on the
// leader and through a follower.
func TestAddVoterValidates(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	f := followersOf(nodes, leader)[0]
	g, err := metagrpc.Dial(ctxT(t), []string{f.RPCAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	adm := g.(metagrpc.Admin)
	for _, c := range []struct{ id, addr string }{{"", "127.0.0.1:1"}, {"x", "nohostport"}} {
		if err := adm.AddVoter(ctxT(t), c.id, c.addr); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("AddVoter(%q, %q): %v", c.id, c.addr, err)
		}
	}
	if got := voters(t, adm); len(got) != 3 {
		t.Fatalf("voters %v", got)
	}
}
