package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

func evKey(b byte) meta.EventKey { var k meta.EventKey; k[0], k[31] = b, b; return k }

// TestEventLedgerOnNode: claim, complete, duplicate and the namespace cap on a real node,
// in process and over gRPC (loam.meta.v1.EventLedger).
func TestEventLedgerOnNode(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	t.Cleanup(func() { n.Close() })
	ctx := ctxT(t)
	for name, c := range clients(t, n) {
		st, err := c.CreateStream(ctx, meta.StreamConfig{Namespace: "default", Name: "ce-" + name, Partitions: 2})
		if err != nil {
			t.Fatal(err)
		}
		cl := meta.EventClaim{Namespace: "default", StreamID: st.ID, Node: "n1", Claim: 1, Keys: []meta.EventKey{evKey(1), evKey(2)},
			Pending: meta.DefaultEventPending, MaxEntries: 1000}
		as, err := c.ClaimEvents(ctx, cl)
		if err != nil || len(as) != 2 || as[0].Status != meta.EventClaimed {
			t.Fatalf("%s: claim: %+v %v", name, as, err)
		}
		if as, err := c.ClaimEvents(ctx, cl); err != nil || as[1].Status != meta.EventClaimed {
			t.Fatalf("%s: repeated claim: %+v %v", name, as, err)
		}
		if err := c.CompleteEvents(ctx, meta.EventComplete{Namespace: "default", StreamID: st.ID, Claim: 1, Window: time.Hour,
			Done: []meta.EventDone{{Key: evKey(1), Partition: 1, Offset: 7}}}); err != nil {
			t.Fatalf("%s: complete: %v", name, err)
		}
		if err := c.ReleaseEvents(ctx, meta.EventRelease{Namespace: "default", StreamID: st.ID, Claim: 1, Keys: []meta.EventKey{evKey(2)}}); err != nil {
			t.Fatalf("%s: release: %v", name, err)
		}
		cl.Claim = 2
		as, err = c.ClaimEvents(ctx, cl)
		if err != nil || as[0] != (meta.EventClaimAnswer{Status: meta.EventDuplicate, Partition: 1, Offset: 7}) || as[1].Status != meta.EventClaimed {
			t.Fatalf("%s: after complete: %+v %v", name, as, err)
		}
		cl.Claim, cl.Keys, cl.MaxEntries = 3, []meta.EventKey{evKey(9)}, 2
		_, err = c.ClaimEvents(ctx, cl)
		var full *meta.EventLedgerFullError
		if !errors.Is(err, meta.ErrEventLedgerFull) || !errors.As(err, &full) || full.Namespace != "default" || !strings.Contains(err.Error(), `"default"`) {
			t.Fatalf("%s: over the cap: %v", name, err)
		}
		if err := c.CompleteEvents(ctx, meta.EventComplete{Namespace: "default", StreamID: st.ID, Claim: 1, Window: 25 * time.Hour}); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("%s: window over 24 h: %v", name, err)
		}
	}
}

// TestEventLedgerFailover: keys completed through a follower survive the leader's loss;
// the new leader answers them duplicate with their offsets, and a pending claim stays in
// flight.
func TestEventLedgerFailover(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	var follower *Node
	for _, n := range nodes {
		if n != leader {
			follower = n
		}
	}
	ctx := ctxT(t)
	c := clients(t, follower)["grpc"]
	st, err := c.CreateStream(ctx, meta.StreamConfig{Namespace: "default", Name: "ce", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	cl := meta.EventClaim{Namespace: "default", StreamID: st.ID, Node: "n1", Claim: 1, Keys: []meta.EventKey{evKey(1), evKey(2)},
		Pending: meta.DefaultEventPending, MaxEntries: 1000}
	if _, err := c.ClaimEvents(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if err := c.CompleteEvents(ctx, meta.EventComplete{Namespace: "default", StreamID: st.ID, Claim: 1, Window: time.Hour,
		Done: []meta.EventDone{{Key: evKey(1), Partition: 0, Offset: 11}}}); err != nil {
		t.Fatal(err)
	}
	leader.Close()
	var rest []*Node
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	waitLeader(t, rest)
	cl.Claim = 2
	var as []meta.EventClaimAnswer
	for deadline := time.Now().Add(10 * time.Second); ; {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		as, err = clients(t, rest[0])["local"].ClaimEvents(cctx, cl)
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || as[0] != (meta.EventClaimAnswer{Status: meta.EventDuplicate, Offset: 11}) || as[1].Status != meta.EventInFlight {
		t.Fatalf("after failover: %+v %v", as, err)
	}
}
