package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/metadata"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Ingest quotas (meta.Quota). The rate lives in the state machine (SetQuota, a Raft
// command); the leader answers AcquireIngest from one token bucket per namespace, in
// memory: capacity rate × meta.IngestBurst, refilled at the rate. A grant takes the bytes
// asked plus rate × meta.IngestLeaseShare (what the bucket holds, at most) at once, so
// bytes leased to log nodes are spent in the bucket when granted and the cluster admits
// at most rate × (W + IngestBurst) in any W seconds (plus one request larger than the
// whole bucket, admitted only from a full one, leaving the bucket in debt).
//
// The buckets are not replicated: a new leader (or a new term) starts every bucket full,
// so a failover admits at most one more burst. Bound: one bucket (a few dozen bytes) per
// namespace with a quota that was asked for; a bucket whose quota is removed is dropped.
type quotaBuckets struct {
	mu   sync.Mutex
	term uint64
	m    map[string]*tokenBucket
}

type tokenBucket struct {
	rate   int64
	tokens float64
	at     time.Time
}

// take grants from the bucket of ns at rate for bytes asked at now.
func (q *quotaBuckets) take(term uint64, ns string, rate, bytes int64, now time.Time) meta.IngestGrant {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil || q.term != term {
		q.m, q.term = make(map[string]*tokenBucket), term
	}
	capacity := float64(rate) * meta.IngestBurst.Seconds()
	b := q.m[ns]
	if b == nil {
		b = &tokenBucket{rate: rate, tokens: capacity, at: now}
		q.m[ns] = b
	}
	if b.rate != rate { // the quota changed: keep what is there, within the new capacity
		b.rate = rate
	}
	if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.tokens = math.Min(capacity, b.tokens+dt*float64(rate))
		b.at = now
	}
	b.tokens = math.Min(b.tokens, capacity)
	g := meta.IngestGrant{Lease: meta.IngestLease, Rate: rate}
	share := float64(rate) * meta.IngestLeaseShare.Seconds()
	switch need := float64(bytes); {
	case b.tokens >= need:
		got := math.Min(b.tokens, need+share)
		b.tokens -= got
		g.Granted = int64(got)
	case need > capacity && b.tokens >= capacity:
		// Larger than the whole bucket: admitted from a full one, leaving it in debt.
		b.tokens -= need
		g.Granted = bytes
	default:
		want := math.Min(need, capacity)
		g.RetryAfter = time.Duration((want - b.tokens) / float64(rate) * float64(time.Second))
		g.RetryAfter = max(g.RetryAfter, time.Millisecond)
	}
	return g
}

func (q *quotaBuckets) drop(ns string) {
	q.mu.Lock()
	delete(q.m, ns)
	q.mu.Unlock()
}

// SetQuota stores a namespace's quota (meta.Client.SetQuota).
func (n *Node) SetQuota(ctx context.Context, q meta.Quota) (meta.Quota, error) {
	if err := meta.CheckQuota(q); err != nil {
		return meta.Quota{}, err
	}
	res, err := n.propose(ctx, fsm.SetQuota(q))
	if err != nil {
		return meta.Quota{}, err
	}
	if res.Err != nil {
		return meta.Quota{}, res.Err
	}
	return res.Quota, nil
}

// GetQuota answers a namespace's quota from this node's state (the caller makes sure it
// may: the leader, ready).
func (n *Node) GetQuota(ctx context.Context, ns string) (meta.Quota, error) {
	if err := n.waitReady(ctx); err != nil {
		return meta.Quota{}, err
	}
	return n.fsm.GetQuota(ns)
}

// AcquireIngest answers from the leader's token bucket of ns (meta.Client.AcquireIngest).
// NotLeader on a follower.
func (n *Node) AcquireIngest(ctx context.Context, ns, node string, bytes int64) (meta.IngestGrant, error) {
	if bytes < 0 {
		return meta.IngestGrant{}, fmt.Errorf("%w: acquire ingest of %s: %d bytes", meta.ErrInvalidArgument, ns, bytes)
	}
	if err := n.waitReady(ctx); err != nil {
		return meta.IngestGrant{}, err
	}
	q, err := n.fsm.GetQuota(ns)
	if err != nil {
		return meta.IngestGrant{}, err
	}
	if q.IngestBytesPerSec == 0 {
		n.quotas.drop(ns)
		return meta.IngestGrant{Unlimited: true, Granted: bytes, Lease: meta.IngestLease}, nil
	}
	return n.quotas.take(n.raft.CurrentTerm(), ns, q.IngestBytesPerSec, bytes, time.Now()), nil
}

// onLeader runs local on the leader, else forwards the call to it over the Quotas service.
// A call forwarded here runs here or answers NotLeader.
func onLeader[Resp any](ctx context.Context, n *Node, local func(context.Context) (Resp, error), remote func(context.Context, metapb.QuotasClient) (Resp, error)) (Resp, error) {
	var zero Resp
	if forwardedFrom(ctx) != "" || n.raft.State() == raft.Leader {
		resp, err := local(ctx)
		if forwardedFrom(ctx) != "" || !errors.Is(err, meta.ErrNotLeader) {
			return resp, err
		}
	}
	addr, self := n.leaderAddr(ctx, "")
	if self || addr == "" {
		if err := ctxErr(ctx); err != nil {
			return zero, err
		}
		return zero, n.notLeader()
	}
	conn, err := n.rt.peers.conn(addr)
	if err != nil {
		return zero, err
	}
	fctx := metadata.NewOutgoingContext(ctx, metadata.Pairs(metagrpc.ForwardedHeader, n.cfg.ID))
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(fctx, n.cfg.ApplyTimeout+time.Second)
		defer cancel()
	}
	resp, err := remote(fctx, metapb.NewQuotasClient(conn))
	if err != nil {
		return zero, metagrpc.FromStatus(err)
	}
	return resp, nil
}

func (c localClient) SetQuota(ctx context.Context, q meta.Quota) (meta.Quota, error) {
	return onLeader(ctx, c.n, func(ctx context.Context) (meta.Quota, error) { return c.n.SetQuota(ctx, q) },
		func(ctx context.Context, s metapb.QuotasClient) (meta.Quota, error) {
			r, err := s.SetQuota(ctx, &metapb.SetQuotaRequest{Quota: metapb.FromQuota(q)})
			return metapb.ToQuota(r.GetQuota()), err
		})
}

func (c localClient) GetQuota(ctx context.Context, ns string) (meta.Quota, error) {
	return onLeader(ctx, c.n, func(ctx context.Context) (meta.Quota, error) { return c.n.GetQuota(ctx, ns) },
		func(ctx context.Context, s metapb.QuotasClient) (meta.Quota, error) {
			r, err := s.GetQuota(ctx, &metapb.GetQuotaRequest{Namespace: ns})
			return metapb.ToQuota(r.GetQuota()), err
		})
}

func (c localClient) AcquireIngest(ctx context.Context, ns, node string, bytes int64) (meta.IngestGrant, error) {
	return onLeader(ctx, c.n, func(ctx context.Context) (meta.IngestGrant, error) { return c.n.AcquireIngest(ctx, ns, node, bytes) },
		func(ctx context.Context, s metapb.QuotasClient) (meta.IngestGrant, error) {
			r, err := s.AcquireIngest(ctx, &metapb.AcquireIngestRequest{Namespace: ns, Node: node, Bytes: bytes})
			return metapb.ToIngestGrant(r), err
		})
}

// quotaService serves loam.meta.v1.Quotas.
type quotaService struct {
	metapb.UnimplementedQuotasServer
	n *Node
}

func (s *quotaService) SetQuota(ctx context.Context, r *metapb.SetQuotaRequest) (*metapb.SetQuotaResponse, error) {
	q, err := localClient{n: s.n}.SetQuota(viaRPC(ctx), metapb.ToQuota(r.GetQuota()))
	if err != nil {
		return nil, metagrpc.Status(err)
	}
	return &metapb.SetQuotaResponse{Quota: metapb.FromQuota(q)}, nil
}

func (s *quotaService) GetQuota(ctx context.Context, r *metapb.GetQuotaRequest) (*metapb.GetQuotaResponse, error) {
	q, err := localClient{n: s.n}.GetQuota(viaRPC(ctx), r.GetNamespace())
	if err != nil {
		return nil, metagrpc.Status(err)
	}
	return &metapb.GetQuotaResponse{Quota: metapb.FromQuota(q)}, nil
}

func (s *quotaService) AcquireIngest(ctx context.Context, r *metapb.AcquireIngestRequest) (*metapb.AcquireIngestResponse, error) {
	g, err := localClient{n: s.n}.AcquireIngest(viaRPC(ctx), r.GetNamespace(), r.GetNode(), r.GetBytes())
	if err != nil {
		return nil, metagrpc.Status(err)
	}
	return metapb.FromIngestGrant(g), nil
}
