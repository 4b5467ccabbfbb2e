package httpapi

// Ingest quotas per namespace (docs/quotas.md).
//
// PUT /v1/namespaces/{ns}/quota {"ingest_bytes_per_sec": N} sets a namespace's quota in
// the metastore (0 removes it); GET answers it. A produce (JSON or binary, HTTP or gRPC)
// spends its request body's length from the namespace's quota after the body is read and
// before anything is decoded or written: over quota it answers 429 quota_exceeded with
// Retry-After (whole seconds, rounded up), and nothing of the request is written.
//
// Sharing across log nodes: the sequencer's leader keeps a token bucket per namespace and
// leases shares of it (meta.Client.AcquireIngest). Each node spends its share locally and
// asks again when it does not cover a request, taking a little more than it needs (a
// twentieth of a second of the rate) so a busy node asks about twenty times a second per
// namespace. What a node was granted and did not spend within meta.IngestLease is dropped,
// never handed back, so the cluster never admits more than the bucket gave out. A refusal
// is remembered until its retry delay passes, so an over-quota client does not make every
// one of its requests a sequencer call.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// maxQuotaPools bounds the namespaces whose leased share a node keeps at once: past it,
// pools whose lease ran out are dropped first, then any. A dropped pool's unspent share is
// lost (the cluster admits less, never more).
const maxQuotaPools = 4096

// ingestQuotas is a node's side of the ingest quotas: one pool per namespace.
type ingestQuotas struct {
	meta meta.Client
	node string
	now  func() time.Time

	mu    sync.Mutex
	pools map[string]*quotaPool // at most maxQuotaPools
}

// quotaPool is one namespace's share on this node. Its mutex is held across the sequencer
// call that refills it, so a namespace's produces on one node ask one at a time.
type quotaPool struct {
	mu        sync.Mutex
	tokens    int64     // granted and not spent, valid until until
	unlimited bool      // no quota, until until
	until     time.Time // lease end of tokens / unlimited
	refused   time.Time // refused until then
	rate      int64
	// open: the last answer was "unlimited". While the sequencer cannot be reached the
	// namespace stays admitted (its writes need the sequencer to commit anyway).
	open bool
	// refreshing: a background AcquireIngest of an open pool is under way.
	refreshing bool
}

// acquireTimeout bounds one AcquireIngest call of a produce.
const acquireTimeout = time.Second

func newIngestQuotas(mc meta.Client, node string, now func() time.Time) *ingestQuotas {
	return &ingestQuotas{meta: mc, node: node, now: now, pools: make(map[string]*quotaPool)}
}

func (q *ingestQuotas) pool(ns string) *quotaPool {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.pools[ns]
	if p != nil {
		return p
	}
	if len(q.pools) >= maxQuotaPools {
		now := q.now()
		for k, o := range q.pools {
			if o.mu.TryLock() {
				stale := !now.Before(o.until) && !now.Before(o.refused)
				o.mu.Unlock()
				if stale {
					delete(q.pools, k)
				}
			}
		}
		for k := range q.pools {
			if len(q.pools) < maxQuotaPools {
				break
			}
			delete(q.pools, k)
		}
	}
	p = &quotaPool{}
	q.pools[ns] = p
	return p
}

// admit spends n bytes of ns's quota, or answers *meta.QuotaExceededError (nothing spent).
func (q *ingestQuotas) admit(ctx context.Context, ns string, n int64) error {
	p := q.pool(ns)
	p.mu.Lock()
	defer p.mu.Unlock()
	now := q.now()
	if now.Before(p.until) {
		if p.unlimited {
			return nil
		}
		if p.tokens >= n {
			p.tokens -= n
			return nil
		}
	} else if p.open {
		// No quota as last learned: admit now and learn again in the background, so a
		// produce never waits on the sequencer for a namespace without a quota (a quota
		// set meanwhile holds from the refresh's answer on, about one lease later).
		p.unlimited, p.tokens, p.until = true, 0, now.Add(meta.IngestLease)
		if !p.refreshing {
			p.refreshing = true
			go q.refresh(ns, p, n)
		}
		return nil
	} else {
		p.tokens, p.unlimited = 0, false
	}
	if now.Before(p.refused) {
		return &meta.QuotaExceededError{Namespace: ns, Bytes: n, RetryAfter: p.refused.Sub(now), Rate: p.rate}
	}
	// A sequencer out of reach must not hold the produce: a namespace known to have no
	// quota is admitted at once, as the write path then refuses promptly on its own.
	actx, cancel := context.WithTimeout(ctx, acquireTimeout)
	g, err := q.meta.AcquireIngest(actx, ns, q.node, n-p.tokens)
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", meta.ErrUnavailable, err)
		}
		if p.open && (errors.Is(err, meta.ErrUnavailable) || errors.Is(err, meta.ErrNotLeader)) {
			p.unlimited, p.tokens, p.until = true, 0, q.now().Add(meta.IngestLease)
			return nil
		}
		return fmt.Errorf("ingest quota of %s: %w", ns, err)
	}
	now = q.now()
	p.rate, p.open = g.Rate, g.Unlimited
	switch {
	case g.Unlimited:
		p.unlimited, p.tokens, p.until = true, 0, now.Add(g.Lease)
		return nil
	case g.Granted > 0:
		p.tokens += g.Granted - n
		p.until = now.Add(g.Lease)
		return nil
	default:
		// The share held stays (it is this node's until its lease ends); the request is refused.
		p.refused = now.Add(g.RetryAfter)
		return &meta.QuotaExceededError{Namespace: ns, Bytes: n, RetryAfter: g.RetryAfter, Rate: g.Rate}
	}
}

// refresh asks the sequencer again about an open pool (see admit), charging n bytes, the
// size of the produce admitted meanwhile. An error leaves the pool as it was.
func (q *ingestQuotas) refresh(ns string, p *quotaPool, n int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*acquireTimeout)
	g, err := q.meta.AcquireIngest(ctx, ns, q.node, n)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refreshing = false
	if err != nil {
		return
	}
	now := q.now()
	p.rate, p.open = g.Rate, g.Unlimited
	switch {
	case g.Unlimited:
		p.unlimited, p.tokens, p.until = true, 0, now.Add(g.Lease)
	case g.Granted > 0:
		p.unlimited, p.tokens, p.until = false, max(0, g.Granted-n), now.Add(g.Lease)
	default:
		p.unlimited, p.tokens, p.until = false, 0, now
		p.refused = now.Add(g.RetryAfter)
	}
}

// AdmitIngest spends n bytes of namespace ns's ingest quota for a produce, or answers an
// error wrapping meta.ErrQuotaExceeded (a *meta.QuotaExceededError) when it is over; the
// gRPC API calls it as the HTTP produce does.
func (s *Server) AdmitIngest(ctx context.Context, ns string, n int) error {
	return s.quotas.admit(ctx, ns, int64(n))
}

// quotaAnswer maps an over-quota refusal: 429 quota_exceeded, retriable.
func quotaAnswer(err error) (answer, bool) {
	if !errors.Is(err, meta.ErrQuotaExceeded) {
		return answer{}, false
	}
	return retriable(http.StatusTooManyRequests, streamapi.CodeQuotaExceeded), true
}

// RetryAfterSeconds is the Retry-After value of an over-quota refusal: its delay in whole
// seconds, rounded up (at least 1); 0 when err is not one.
func RetryAfterSeconds(err error) int {
	var qe *meta.QuotaExceededError
	if !errors.As(err, &qe) {
		return 0
	}
	return max(1, int((qe.RetryAfter+time.Second-1)/time.Second))
}

// getQuota serves GET /v1/namespaces/{ns}/quota.
func (s *Server) getQuota(w http.ResponseWriter, r *http.Request) error {
	q, err := s.cfg.Meta.GetQuota(r.Context(), r.PathValue("ns"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, streamapi.Quota{Namespace: q.Namespace, IngestBytesPerSec: q.IngestBytesPerSec})
	return nil
}

// putQuota serves PUT /v1/namespaces/{ns}/quota {"ingest_bytes_per_sec": N}.
func (s *Server) putQuota(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req struct {
		IngestBytesPerSec *int64 `json:"ingest_bytes_per_sec"`
	}
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.IngestBytesPerSec == nil {
		return badInput(400, streamapi.CodeInvalidArgument, `"ingest_bytes_per_sec" is required (0 removes the quota)`)
	}
	if v := *req.IngestBytesPerSec; v < 0 || v > meta.MaxIngestBytesPerSec {
		return badInput(400, streamapi.CodeInvalidArgument, `"ingest_bytes_per_sec" %d is out of range [0, %d]`, v, int64(meta.MaxIngestBytesPerSec))
	}
	q, err := s.cfg.Meta.SetQuota(r.Context(), meta.Quota{Namespace: r.PathValue("ns"), IngestBytesPerSec: *req.IngestBytesPerSec})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, streamapi.Quota{Namespace: q.Namespace, IngestBytesPerSec: q.IngestBytesPerSec})
	return nil
}

func setRetryAfter(h http.Header, err error) {
	if s := RetryAfterSeconds(err); s > 0 {
		h.Set("Retry-After", strconv.Itoa(s))
	}
}
