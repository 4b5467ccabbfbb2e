package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestQuotaAdminAndRefusal: the quota is set and read over HTTP; a produce over it answers
// 429 quota_exceeded with a Retry-After, and nothing of it is written; bad input is 400.
func TestQuotaAdminAndRefusal(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	base := n.srv.URL + "/v1/namespaces/default"
	if r := call(t, "GET", base+"/quota", ""); r.status != 200 || !strings.Contains(string(r.body), `"ingest_bytes_per_sec":0`) {
		t.Fatalf("get quota: %d %s", r.status, r.body)
	}
	for _, bad := range []string{`{}`, `{"ingest_bytes_per_sec":-1}`, `{"ingest_bytes_per_sec":"x"}`, `{"ingest_bytes_per_sec":1,"x":1}`} {
		if r := call(t, "PUT", base+"/quota", bad); r.status != 400 {
			t.Fatalf("put %s: %d %s", bad, r.status, r.body)
		}
	}
	if r := call(t, "PUT", n.srv.URL+"/v1/namespaces/nope/quota", `{"ingest_bytes_per_sec":1}`); r.status != 404 || r.detail(t).Code != streamapi.CodeNamespaceNotFound {
		t.Fatalf("put of a missing namespace: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", base+"/streams", `{"name":"q","partitions":1}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	// 1000 B/s: a bucket of 500 bytes. The first produce of 400 bytes fits, the next does not.
	if r := call(t, "PUT", base+"/quota", `{"ingest_bytes_per_sec":1000}`); r.status != 200 || !strings.Contains(string(r.body), `"ingest_bytes_per_sec":1000`) {
		t.Fatalf("put quota: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", base+"/quota", ""); r.status != 200 || !strings.Contains(string(r.body), `"ingest_bytes_per_sec":1000`) {
		t.Fatalf("get quota: %d %s", r.status, r.body)
	}
	body := fmt.Sprintf(`{"records":[{"value":%q}]}`, strings.Repeat("x", 400-len(`{"records":[{"value":""}]}`)))
	if r := call(t, "POST", base+"/streams/q/records", body); r.status != 200 {
		t.Fatalf("first produce: %d %s", r.status, r.body)
	}
	req, _ := http.NewRequest("POST", base+"/streams/q/records", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 {
		t.Fatalf("second produce: %d, want 429", resp.StatusCode)
	}
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); ra < 1 {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	r := call(t, "POST", base+"/streams/q/records", body)
	if r.status != 429 || r.detail(t).Code != streamapi.CodeQuotaExceeded || !r.detail(t).Retriable || !strings.Contains(r.detail(t).Message, "quota") {
		t.Fatalf("third produce: %d %s", r.status, r.body)
	}
	if hw := highWatermark(t, base+"/streams/q"); hw != 1 {
		t.Fatalf("high watermark %d: refused produces wrote records", hw)
	}
	// Removing the quota admits again (within a lease of the "unlimited" answer).
	if r := call(t, "PUT", base+"/quota", `{"ingest_bytes_per_sec":0}`); r.status != 200 {
		t.Fatalf("remove quota: %d %s", r.status, r.body)
	}
	waitFor(t, func() bool { return call(t, "POST", base+"/streams/q/records", body).status == 200 })
}

// TestQuotaAcrossTwoNodes: with load spread over two log nodes on one sequencer, the bytes
// admitted in every 10 s window stay within 10 % of the quota. Eight producers (four per
// node) offer about five times the quota; each retries 5 ms after a 429.
func TestQuotaAcrossTwoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 13 s")
	}
	const (
		rate     = 100_000 // bytes per second
		bodySize = 1000
		run      = 13 * time.Second
		window   = 10 * time.Second
	)
	mc := startSequencer(t)
	bucket := objstore.NewMem()
	nodes := []string{startPeer(t, "quota-a", mc, bucket, httpapi.Limits{}).URL, startPeer(t, "quota-b", mc, bucket, httpapi.Limits{}).URL}
	if r := call(t, "POST", nodes[0]+"/v1/namespaces/default/streams", `{"name":"q","partitions":4}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := call(t, "PUT", nodes[1]+"/v1/namespaces/default/quota", fmt.Sprintf(`{"ingest_bytes_per_sec":%d}`, rate)); r.status != 200 {
		t.Fatalf("put quota: %d %s", r.status, r.body)
	}
	body := fmt.Sprintf(`{"records":[{"value":%q}]}`, strings.Repeat("x", bodySize-len(`{"records":[{"value":""}]}`)))
	if len(body) != bodySize {
		t.Fatalf("body of %d bytes", len(body))
	}
	var (
		mu       sync.Mutex
		acks     []time.Duration
		offers   []time.Duration // every answered request, admitted or not
		refused  int
		failures []string
	)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 8 {
		url := nodes[i%2] + "/v1/namespaces/default/streams/q/records"
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // the run ended
				}
				resp.Body.Close()
				mu.Lock()
				offers = append(offers, time.Since(start))
				switch resp.StatusCode {
				case 200:
					acks = append(acks, time.Since(start))
				case 429:
					refused++
				default:
					failures = append(failures, resp.Status)
				}
				mu.Unlock()
				if resp.StatusCode == 429 {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d produces failed: %v", len(failures), failures[:min(5, len(failures))])
	}
	want := float64(rate) * window.Seconds()
	count := func(ts []time.Duration, from time.Duration) float64 {
		n := 0
		for _, at := range ts {
			if at >= from && at < from+window {
				n++
			}
		}
		return float64(n * bodySize)
	}
	// A window in which the process stalled (no answer for 200 ms: the machine is shared)
	// overflows the bucket, and says nothing of how the quota is shared: the lower bound is
	// checked over the other windows only. The upper bound holds over every window.
	slices.Sort(offers)
	stalled := func(from time.Duration) bool {
		last := from
		for _, at := range offers {
			if at < from {
				continue
			}
			if at >= from+window {
				break
			}
			if at-last > 200*time.Millisecond {
				return true
			}
			last = at
		}
		return from+window-last > 200*time.Millisecond
	}
	lo, hi, checked := 1e18, 0.0, 0
	for from := time.Duration(0); from+window <= run-200*time.Millisecond; from += 100 * time.Millisecond {
		b := count(acks, from)
		hi = max(hi, b)
		if !stalled(from) && count(offers, from) >= 2*want {
			lo = min(lo, b)
			checked++
		}
	}
	t.Logf("quota %d B/s: admitted per 10 s window up to %.0f bytes (%.3f of the quota), at least %.0f (%.3f) over the %d windows without a stall; %d admitted, %d refused",
		rate, hi, hi/want, lo, lo/want, checked, len(acks), refused)
	if hi > 1.1*want {
		t.Fatalf("admitted per 10 s window up to %.0f bytes, want at most %.0f", hi, 1.1*want)
	}
	if checked > 0 && lo < 0.9*want {
		t.Fatalf("admitted per 10 s window down to %.0f bytes, want at least %.0f", lo, 0.9*want)
	}
	if refused == 0 {
		t.Fatal("no produce was refused: the load did not exceed the quota")
	}
}
