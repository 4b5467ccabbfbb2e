package httpapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// grants answers AcquireIngest from a script, counting calls.
type grants struct {
	meta.Client
	mu      sync.Mutex
	answers []func() (meta.IngestGrant, error)
	calls   int
}

func (g *grants) AcquireIngest(ctx context.Context, ns, node string, bytes int64) (meta.IngestGrant, error) {
	g.mu.Lock()
	a := g.answers[min(g.calls, len(g.answers)-1)]
	g.calls++
	g.mu.Unlock()
	return a()
}

func (g *grants) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// TestIngestPool: a node spends its share locally, asks again when it does not cover a
// request, drops what its lease did not spend, remembers a refusal until its delay passes.
func TestIngestPool(t *testing.T) {
	now := time.Unix(1000, 0)
	g := &grants{answers: []func() (meta.IngestGrant, error){
		func() (meta.IngestGrant, error) {
			return meta.IngestGrant{Granted: 150, Lease: time.Second, Rate: 1000}, nil
		},
		func() (meta.IngestGrant, error) {
			return meta.IngestGrant{RetryAfter: 300 * time.Millisecond, Rate: 1000}, nil
		},
		func() (meta.IngestGrant, error) {
			return meta.IngestGrant{Granted: 100, Lease: time.Second, Rate: 1000}, nil
		},
	}}
	q := newIngestQuotas(g, "n1", func() time.Time { return now })
	ctx := context.Background()
	for i, want := range []struct {
		n     int64
		ok    bool
		calls int
	}{{100, true, 1}, {50, true, 1}, {10, false, 2}, {10, false, 2}} {
		err := q.admit(ctx, "ns", want.n)
		if (err == nil) != want.ok || g.count() != want.calls {
			t.Fatalf("step %d: %v after %d calls", i, err, g.calls)
		}
		if err != nil && (!errors.Is(err, meta.ErrQuotaExceeded) || RetryAfterSeconds(err) != 1) {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	now = now.Add(300 * time.Millisecond) // the refusal's delay passed
	if err := q.admit(ctx, "ns", 100); err != nil || g.count() != 3 {
		t.Fatalf("after the delay: %v, %d calls", err, g.calls)
	}
}

// TestIngestPoolSequencerDown: a namespace last answered "unlimited" is admitted without
// waiting on the sequencer (asked again in the background, once at a time) and stays
// admitted while the sequencer cannot be reached (its writes need the sequencer anyway);
// one with a quota answers the sequencer's error.
func TestIngestPoolSequencerDown(t *testing.T) {
	now := time.Unix(1000, 0)
	down := func() (meta.IngestGrant, error) {
		return meta.IngestGrant{}, fmt.Errorf("dial: %w", meta.ErrUnavailable)
	}
	g := &grants{answers: []func() (meta.IngestGrant, error){
		func() (meta.IngestGrant, error) { return meta.IngestGrant{Unlimited: true, Lease: time.Second}, nil }, down}}
	q := newIngestQuotas(g, "n1", func() time.Time { return now })
	ctx := context.Background()
	if err := q.admit(ctx, "open", 10); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	for i := range 3 {
		if err := q.admit(ctx, "open", 10); err != nil {
			t.Fatalf("request %d with the sequencer down: %v", i, err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); g.count() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // a second background ask would show now
	if n := g.count(); n != 2 {
		t.Fatalf("%d calls: want one at first and one background refresh, not one per request", n)
	}
	g.mu.Lock()
	g.answers = []func() (meta.IngestGrant, error){
		func() (meta.IngestGrant, error) {
			return meta.IngestGrant{Granted: 10, Lease: time.Second, Rate: 1000}, nil
		}, down}
	g.calls = 0
	g.mu.Unlock()
	if err := q.admit(ctx, "limited", 10); err != nil {
		t.Fatal(err)
	}
	if err := q.admit(ctx, "limited", 10); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("a namespace with a quota, sequencer down: %v", err)
	}
}
