package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// allowedSkew is DefaultConfig().MaxClockSkew (TestJudge checks they agree).
const allowedSkew = time.Second

// skewedCluster starts a three-voter group whose clocks the test shifts through offs.
func skewedCluster(t *testing.T) (nodes []*Node, offs []atomic.Int64) {
	cfgs := clusterConfigs(t, 3)
	offs = make([]atomic.Int64, len(cfgs))
	for i := range cfgs {
		cfgs[i].Now = func() time.Time { return time.Now().Add(time.Duration(offs[i].Load())) }
	}
	return startAll(t, cfgs), offs
}

func indexOf(nodes []*Node, n *Node) int {
	for i, m := range nodes {
		if m == n {
			return i
		}
	}
	return -1
}

// commitUntilOK commits fresh objects through c (CreatedMs and StampMs on a true clock)
// until one succeeds; NotLeader and Unavailable are retried, StaleCommit and ClockAhead
// fail the test. It returns how long it took.
func commitUntilOK(t *testing.T, ctx context.Context, c meta.Client, streamID uint64, prefix string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for i := 0; ; i++ {
		now := time.Now().UnixMilli()
		_, err := c.CommitWal(ctx, meta.CommitWal{NodeID: "n1", Object: fmt.Sprintf("%s/%d", prefix, i), CreatedMs: now, StampMs: now,
			Chunks: []meta.Chunk{{StreamID: streamID, Partition: 0, Records: 1, Length: 10, MaxTimestamp: now}}})
		switch {
		case err == nil:
			return time.Since(start)
		case errors.Is(err, meta.ErrStaleCommit), errors.Is(err, meta.ErrClockAhead):
			t.Fatalf("commit of a healthy log node after %s: %v", time.Since(start), err)
		case errors.Is(err, meta.ErrNotLeader), errors.Is(err, meta.ErrUnavailable):
		default:
			t.Fatalf("commit: %v", err)
		}
		if time.Since(start) > within {
			t.Fatalf("no commit succeeded within %s: %v", within, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLeaderClockOffset: in a three-voter group whose leader's clock jumps an hour
// ahead (or behind), commits of log nodes with true clocks succeed again within one
// election and are never StaleCommit or ClockAhead; no voter's state-machine clock moves
// ahead of the true time (beyond the allowed skew); and a lease acquired before the jump
// stays held by its holder until its TTL has passed on a true clock.
func TestLeaderClockOffset(t *testing.T) {
	for _, off := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(off.String(), func(t *testing.T) { testLeaderClockOffset(t, off) })
	}
}

func testLeaderClockOffset(t *testing.T, off time.Duration) {
	nodes, offs := skewedCluster(t)
	leader := waitLeader(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.RPCAddr())
	}
	c, err := metagrpc.Dial(ctx, addrs)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "clock", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 6 * time.Second
	acquired := time.Now()
	lease, err := c.AcquireLease(ctx, s.ID, 0, "segment", "holder-a", ttl)
	if err != nil {
		t.Fatal(err)
	}

	offs[indexOf(nodes, leader)].Store(int64(off))
	took := commitUntilOK(t, ctx, c, s.ID, "wal/first", 5*time.Second)
	t.Logf("leader %s at %s: first commit after %s", leader.cfg.ID, off, took)
	for i := range 20 {
		commitUntilOK(t, ctx, c, s.ID, fmt.Sprintf("wal/more-%d", i), 5*time.Second)
	}
	// Ahead, it handed leadership over before it answered; behind, it does so in the
	// background once every follower has reported.
	for deadline := time.Now().Add(5 * time.Second); leader.IsLeader(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader with a clock %s off still leads", off)
		}
	}

	// The lease stays held until its TTL on a true clock (less the allowed skew).
	for time.Since(acquired) < ttl-allowedSkew-200*time.Millisecond {
		_, err := c.AcquireLease(ctx, s.ID, 0, "segment", "holder-b", ttl)
		if !errors.Is(err, meta.ErrLeaseHeld) && !errors.Is(err, meta.ErrNotLeader) && !errors.Is(err, meta.ErrUnavailable) {
			t.Fatalf("%s after holder-a acquired it for %s, holder-b: %v", time.Since(acquired), ttl, err)
		}
		for _, n := range nodes {
			if ms, now := n.fsm.ClockMs(), time.Now().Add(allowedSkew).UnixMilli(); ms > now {
				t.Fatalf("voter %s: state-machine clock %d ms ahead of the true clock", n.cfg.ID, ms-now)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	renewed, err := c.AcquireLease(ctx, s.ID, 0, "segment", "holder-a", ttl)
	if err != nil || renewed.Epoch != lease.Epoch {
		t.Fatalf("holder-a renews: %+v %v (had epoch %d)", renewed, err, lease.Epoch)
	}
}
