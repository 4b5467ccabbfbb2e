package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestAnyVoterAnyNode checks what a three-voter group owes beyond failover:
// any voter accepts writes (forwarding them to the leader), a follower's reads include
// every write acknowledged before them, and a stream created through one log node can be
// produced to through another at once.
func TestAnyVoterAnyNode(t *testing.T) {
	c := Start(t, bins, Options{Sequencers: 3, Nodes: 2})
	ctx := context.Background()

	// "forwards writes from followers to the leader so clients may call any voter"
	t.Run("FollowerForwardsWrites", func(t *testing.T) {
		leader := c.WaitLeader(10 * time.Second)
		for _, s := range c.File().Sequencers {
			if s.ID == leader.ID {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.conn(s.RPC).CreateNamespace(cctx, &metapb.CreateNamespaceRequest{Name: "fwd-" + s.ID})
			cancel()
			if err != nil {
				t.Errorf("CreateNamespace on follower %s: %v", s.ID, metagrpc.FromStatus(err))
			}
		}
	})

	// "serves reads of the offset index and the watch stream from any voter that is
	// caught up": a follower must not answer from state older than a write already
	// acknowledged to the caller.
	t.Run("FollowerReadsAfterWrite", func(t *testing.T) {
		leader := c.WaitLeader(10 * time.Second)
		const n = 20
		stale := map[string]int{}
		for i := range n {
			name := fmt.Sprintf("ryw-%d", i)
			if _, err := c.conn(leader.RPC).CreateStream(ctx, &metapb.CreateStreamRequest{Config: &metapb.StreamConfig{Namespace: ns, Name: name, Partitions: 1}}); err != nil {
				t.Fatal(metagrpc.FromStatus(err))
			}
			for _, s := range c.File().Sequencers {
				if s.ID == leader.ID {
					continue
				}
				if _, err := c.conn(s.RPC).GetStream(ctx, &metapb.GetStreamRequest{Namespace: ns, Name: name}); err != nil {
					stale[s.ID]++
				}
			}
		}
		for id, k := range stale {
			t.Errorf("follower %s: GetStream right after the leader acknowledged CreateStream answered not found %d of %d times", id, k, n)
		}
	})

	// A stream created through one log node can be produced to through another at once
	// (the log node reads stream descriptions through metagrpc, which reads from whichever
	// voter answered last, often a follower).
	t.Run("StreamVisibleOnOtherNode", func(t *testing.T) {
		a, b := c.Client(0), c.Client(1)
		const n = 20
		failed := 0
		var last error
		for i := range n {
			name := fmt.Sprintf("vis-%d", i)
			if _, err := a.CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: name, Partitions: ptr(int32(1))}); err != nil {
				t.Fatal(err)
			}
			rec, _ := makeRecord(AttemptKey{ID: int64(i)}, 0, 4)
			if _, err := b.Produce(ctx, ns, name, []streamapi.Record{rec}); err != nil {
				failed++
				last = err
			}
		}
		if failed > 0 {
			t.Errorf("produce through node-2 right after CreateStream through node-1 failed %d of %d times; last: %v", failed, n, last)
		}
	})

}

// TestGapSequencerLoss checks that "a log node that loses the sequencer keeps serving
// fetches of what it knows and refuses produce with a clear retriable error, never a false
// ack": with every voter killed, a produce is refused with a retriable error (the first
// one after the produce wait, commit_unknown; later ones at once, commit_failed), and both
// nodes keep serving the committed records of a stream they served before.
func TestSequencerLoss(t *testing.T) {
	c := Start(t, bins, Options{Sequencers: 3, Nodes: 2})
	ctx := context.Background()
	const stream = "loss"
	cl := c.Client(0)
	if _, err := cl.CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: stream, Partitions: ptr(int32(1))}); err != nil {
		t.Fatal(err)
	}
	var recs []streamapi.Record
	for i := range 10 {
		r, _ := makeRecord(AttemptKey{ID: int64(i)}, 0, 4)
		recs = append(recs, r)
	}
	if _, err := cl.Produce(ctx, ns, stream, recs); err != nil {
		t.Fatal(err)
	}
	// Both nodes serve the stream once, so each knows it ("what it knows").
	for i := range 2 {
		if res, err := c.Client(i).Fetch(ctx, ns, stream, 0, 0, 1<<20, 0); err != nil || len(res.Records) != 10 {
			t.Fatalf("node-%d fetch before the loss: %d records, %v", i+1, len(res.Records), err)
		}
	}
	for _, s := range c.File().Sequencers {
		c.Hold(s.ID)
		c.Kill(s.ID)
	}
	defer func() {
		for _, s := range c.File().Sequencers {
			c.Release(s.ID)
		}
	}()
	// Right away, while node-1 still has the stream description cached (5 s): the
	// write path itself must answer.
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	r, _ := makeRecord(AttemptKey{ID: 100}, 0, 4)
	_, err := cl.Produce(pctx, ns, stream, []streamapi.Record{r})
	cancel()
	took := time.Since(start)
	switch {
	case err == nil:
		t.Errorf("produce acknowledged with every sequencer down")
	case !streamapi.IsRetriable(err) || streamapi.ErrorCode(err) == "":
		t.Errorf("produce with every sequencer down: after %s got %v; want a prompt retriable error from the node", took.Round(time.Millisecond), err)
	case took > 15*time.Second:
		t.Errorf("produce with every sequencer down answered only after %s: %v", took.Round(time.Millisecond), err)
	default:
		t.Logf("produce refused after %s: %v", took.Round(time.Millisecond), err)
	}

	// Now that the node knows the sequencer is out of reach, the next produce is refused
	// at once: nothing written, retriable.
	start = time.Now()
	r2, _ := makeRecord(AttemptKey{ID: 101}, 0, 4)
	_, err = cl.Produce(ctx, ns, stream, []streamapi.Record{r2})
	if took := time.Since(start); err == nil || !streamapi.IsRetriable(err) || streamapi.ErrorCode(err) != streamapi.CodeCommitFailed || took > 3*time.Second {
		t.Errorf("second produce with every sequencer down: after %s got %v; want a prompt retriable commit_failed", took.Round(time.Millisecond), err)
	} else {
		t.Logf("second produce refused after %s: %v", took.Round(time.Millisecond), err)
	}

	for i := range 2 {
		node := c.Client(i)
		fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		start := time.Now()
		res, err := node.Fetch(fctx, ns, stream, 0, 0, 1<<20, 0)
		cancel()
		if took := time.Since(start); err != nil || len(res.Records) != 10 || took > 2*time.Second {
			t.Errorf("node-%d fetch of 10 committed records with every sequencer down: %d records after %s, %v", i+1, len(res.Records), took.Round(time.Millisecond), err)
		}
	}
}
