package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// TestTokenBucket: a bucket of rate × IngestBurst, refilled at the rate; a grant adds
// rate × IngestLeaseShare when the bucket holds it; a request larger than the bucket is
// admitted from a full one only; a new term starts every bucket full.
func TestTokenBucket(t *testing.T) {
	var q quotaBuckets
	now := time.Unix(1000, 0)
	const rate = 1000 // capacity 500, share 50
	if g := q.take(1, "ns", rate, 100, now); g.Granted != 150 || g.Rate != rate || g.Lease != meta.IngestLease {
		t.Fatalf("first: %+v", g)
	}
	if g := q.take(1, "ns", rate, 330, now); g.Granted != 350 { // 350 left: all of it
		t.Fatalf("second: %+v", g)
	}
	g := q.take(1, "ns", rate, 100, now)
	if g.Granted != 0 || g.RetryAfter != 100*time.Millisecond {
		t.Fatalf("empty: %+v", g)
	}
	if g := q.take(1, "ns", rate, 100, now.Add(100*time.Millisecond)); g.Granted != 100 {
		t.Fatalf("after refill: %+v", g)
	}
	if g := q.take(1, "ns", rate, 2000, now.Add(10*time.Second)); g.Granted != 2000 {
		t.Fatalf("larger than the bucket, from a full one: %+v", g)
	}
	if g := q.take(1, "ns", rate, 2000, now.Add(11*time.Second)); g.Granted != 0 || g.RetryAfter != time.Second {
		t.Fatalf("in debt: %+v", g) // -1500 + 1000 = -500: a full bucket (500) is 1 s away
	}
	if g := q.take(2, "ns", rate, 100, now.Add(11*time.Second)); g.Granted != 150 {
		t.Fatalf("new term: %+v", g)
	}
}

// TestQuotaOnNode: SetQuota, GetQuota and AcquireIngest on a real node, in process and
// over gRPC (loam.meta.v1.Quotas).
func TestQuotaOnNode(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	t.Cleanup(func() { n.Close() })
	ctx := context.Background()
	for name, c := range clients(t, n) {
		ns := "q-" + name
		if err := c.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SetQuota(ctx, meta.Quota{Namespace: ns, IngestBytesPerSec: -1}); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("%s: negative: %v", name, err)
		}
		if g, err := c.AcquireIngest(ctx, ns, "n1", 10); err != nil || !g.Unlimited {
			t.Fatalf("%s: no quota: %+v %v", name, g, err)
		}
		if q, err := c.SetQuota(ctx, meta.Quota{Namespace: ns, IngestBytesPerSec: 1000}); err != nil || q.IngestBytesPerSec != 1000 {
			t.Fatalf("%s: set: %+v %v", name, q, err)
		}
		if q, err := c.GetQuota(ctx, ns); err != nil || q.IngestBytesPerSec != 1000 || q.Namespace != ns {
			t.Fatalf("%s: get: %+v %v", name, q, err)
		}
		if g, err := c.AcquireIngest(ctx, ns, "n1", 400); err != nil || g.Granted < 450 || g.Rate != 1000 {
			t.Fatalf("%s: acquire: %+v %v", name, g, err)
		}
		if g, err := c.AcquireIngest(ctx, ns, "n1", 400); err != nil || g.Granted != 0 || g.RetryAfter <= 0 {
			t.Fatalf("%s: over: %+v %v", name, g, err)
		}
		if _, err := c.AcquireIngest(ctx, "nope", "n1", 1); !errors.Is(err, meta.ErrNamespaceNotFound) {
			t.Fatalf("%s: missing namespace: %v", name, err)
		}
		if _, err := c.GetQuota(ctx, "nope"); !errors.Is(err, meta.ErrNamespaceNotFound) {
			t.Fatalf("%s: get of a missing namespace: %v", name, err)
		}
	}
}

// TestQuotaThroughFollower: a follower forwards SetQuota and AcquireIngest to the leader,
// in process and over gRPC, so every log node draws from the one bucket the leader keeps.
func TestQuotaThroughFollower(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	var follower *Node
	for _, n := range nodes {
		if n != leader {
			follower = n
		}
	}
	ctx := context.Background()
	cs := clients(t, follower)
	if _, err := cs["local"].SetQuota(ctx, meta.Quota{Namespace: "default", IngestBytesPerSec: 1000}); err != nil {
		t.Fatal(err)
	}
	var granted int64
	for _, name := range []string{"local", "grpc", "local"} {
		g, err := cs[name].AcquireIngest(ctx, "default", "n-"+name, 200)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		granted += g.Granted
	}
	// One bucket of 500 bytes (plus what refilled meanwhile): two asks of 200 take 250
	// each, the third finds it empty.
	if granted > 600 {
		t.Fatalf("granted %d bytes from a bucket of 500", granted)
	}
	if q, err := cs["grpc"].GetQuota(ctx, "default"); err != nil || q.IngestBytesPerSec != 1000 {
		t.Fatalf("get through follower: %+v %v", q, err)
	}
}
