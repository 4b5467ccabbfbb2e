package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// failoverTransport sends every request to the current log node and moves to the next one
// when a request gets no answer, so a client keeps going while a node is down. It also
// loses one answer in ten after the request was served (the client cannot tell whether
// the write happened, as when a connection breaks after the commit).
type failoverTransport struct {
	urls []*url.URL
	cur  atomic.Int64
	next http.RoundTripper
	lost atomic.Int64
}

func (f *failoverTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	i := f.cur.Load()
	u := f.urls[int(i)%len(f.urls)]
	r2 := r.Clone(r.Context())
	r2.URL.Scheme, r2.URL.Host, r2.Host = u.Scheme, u.Host, u.Host
	if r.GetBody != nil {
		b, err := r.GetBody()
		if err != nil {
			return nil, err
		}
		r2.Body = b
	}
	resp, err := f.next.RoundTrip(r2)
	if err != nil || resp.StatusCode == http.StatusServiceUnavailable {
		f.cur.CompareAndSwap(i, i+1)
	}
	if err == nil && r.Method == http.MethodPost && rand.N(10) == 0 {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		f.lost.Add(1)
		return nil, errors.New("answer lost")
	}
	return resp, err
}

// TestIdempotentProducersUnderKills is the idempotent-producer gate on real processes:
// several producers, each retrying every request whose answer it did not get (one in ten
// answers is thrown away after the write; the client switches log nodes when one is
// down), while a log node and then the sequencer leader are
// SIGKILLed. Every acknowledged record is in the log exactly once, no record is in it
// twice, and each producer's records of a partition are in sequence order.
func TestIdempotentProducersUnderKills(t *testing.T) {
	const stream, parts, producers, perRequest = "idem", int32(3), 4, 5
	c := setup(t, Options{Sequencers: 3, Nodes: 2, FlushInterval: 20 * time.Millisecond}, stream, parts)
	var urls []*url.URL
	for _, s := range c.NodeURLs() {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, u)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	type ack struct{ producer, request int }
	var fts []*failoverTransport
	var (
		mu    sync.Mutex
		acked = map[ack]bool{}
		sent  atomic.Int64
		wg    sync.WaitGroup
		fails = make(chan error, producers)
	)
	for pi := range producers {
		ft := &failoverTransport{urls: urls, next: http.DefaultTransport}
		ft.cur.Store(int64(pi))
		fts = append(fts, ft)
		cl, err := streamapi.NewClient(c.NodeURLs()[0], streamapi.WithHTTPClient(&http.Client{Transport: ft, Timeout: 10 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		// Initializing by name again after a lost answer only bumps the epoch.
		var pr *streamapi.IdempotentProducer
		for try := 0; pr == nil; try++ {
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			pr, err = cl.NewIdempotentProducer(pctx, ns, stream, fmt.Sprintf("p%d", pi))
			cancel()
			if err != nil && (!streamapi.IsRetriable(err) || try > 20) {
				t.Fatal(err)
			}
		}
		pr.MaxRetryTime = time.Minute
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; ctx.Err() == nil; r++ {
				var recs []streamapi.Record
				for k := range perRequest {
					q := int32((r + k) % int(parts))
					recs = append(recs, streamapi.Record{Partition: &q, Value: json.RawMessage(fmt.Sprintf(`{"p":%d,"r":%d,"k":%d}`, pi, r, k))})
				}
				sent.Add(1)
				if _, err := pr.Send(ctx, recs); err != nil {
					if ctx.Err() == nil {
						fails <- fmt.Errorf("producer %d request %d: %w", pi, r, err)
					}
					return
				}
				mu.Lock()
				acked[ack{pi, r}] = true
				mu.Unlock()
			}
		}()
	}
	time.Sleep(2 * time.Second)
	old := c.Kill("node-1")
	t.Logf("node-1 SIGKILLed")
	c.WaitRestarted("node-1", old, 15*time.Second)
	time.Sleep(2 * time.Second)
	leader := c.WaitLeader(10 * time.Second)
	old = c.Kill(leader.ID)
	t.Logf("leader %s SIGKILLed", leader.ID)
	next := c.WaitLeader(15 * time.Second)
	c.WaitRestarted(leader.ID, old, 15*time.Second)
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()
	close(fails)
	for err := range fails {
		t.Fatal(err)
	}
	var lost int64
	for _, ft := range fts {
		lost += ft.lost.Load()
	}
	t.Logf("new leader %s; %d requests sent, %d acknowledged, %d answers lost (and retried)", next.ID, sent.Load(), len(acked), lost)
	if lost == 0 {
		t.Fatal("no answer was lost: nothing was retried")
	}
	if len(acked) < producers*10 {
		t.Fatalf("only %d requests acknowledged", len(acked))
	}

	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := c.Client(1)
	seen := map[string]int{}
	for q := range parts {
		last := map[int]int{}
		for off := int64(0); ; {
			res, err := admin.Fetch(rctx, ns, stream, q, off, 0, 0)
			if err != nil {
				if errors.Is(err, streamapi.ErrNetwork) {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				t.Fatal(err)
			}
			for _, rec := range res.Records {
				var v struct{ P, R, K int }
				if err := json.Unmarshal(rec.Value, &v); err != nil {
					t.Fatal(err)
				}
				id := fmt.Sprintf("%d/%d/%d", v.P, v.R, v.K)
				if seen[id]++; seen[id] > 1 {
					t.Errorf("record %s stored twice (partition %d offset %d)", id, q, *rec.Offset)
				}
				if at, ok := last[v.P]; ok && at >= v.R*perRequest+v.K {
					t.Errorf("partition %d: producer %d's record %s is out of order", q, v.P, id)
				}
				last[v.P] = v.R*perRequest + v.K
			}
			off = res.NextOffset
			if off >= res.HighWatermark {
				break
			}
		}
	}
	missing := 0
	for a := range acked {
		for k := range perRequest {
			if seen[fmt.Sprintf("%d/%d/%d", a.producer, a.request, k)] != 1 {
				missing++
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d acknowledged records missing", missing)
	}
	t.Logf("%d records in the log, each once; every acknowledged one there", len(seen))
	if p := c.LogProblems(); len(p) > 0 {
		t.Fatalf("children logged races or crashes:\n%s", p)
	}
}
