package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi"
)

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return resp.StatusCode, out
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestInitProducerHTTP: POST /v1/namespaces/{ns}/producers on the real sequencer.
func TestInitProducerHTTP(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	url := n.srv.URL + "/v1/namespaces/default/producers"
	st, a := post(t, url, `{}`)
	st2, b := post(t, url, ``)
	if st != 200 || st2 != 200 || a["producer_id"] == b["producer_id"] || a["epoch"] != 0.0 {
		t.Fatalf("%d %v %d %v", st, a, st2, b)
	}
	_, n1 := post(t, url, `{"name":"billing"}`)
	_, n2 := post(t, url, `{"name":"billing"}`)
	if n1["producer_id"] != n2["producer_id"] || n1["epoch"] != 0.0 || n2["epoch"] != 1.0 {
		t.Fatalf("%v %v", n1, n2)
	}
	id := int64(a["producer_id"].(float64))
	if st, out := post(t, url, fmt.Sprintf(`{"producer_id":%d,"epoch":0}`, id)); st != 200 || out["epoch"] != 1.0 || int64(out["producer_id"].(float64)) != id {
		t.Fatalf("bump: %d %v", st, out)
	}
	// The repeat of that bump answers the same; after another bump the old epoch is fenced.
	if st, out := post(t, url, fmt.Sprintf(`{"producer_id":%d,"epoch":0}`, id)); st != 200 || out["epoch"] != 1.0 {
		t.Fatalf("repeat: %d %v", st, out)
	}
	post(t, url, fmt.Sprintf(`{"producer_id":%d,"epoch":1}`, id))
	if st, out := post(t, url, fmt.Sprintf(`{"producer_id":%d,"epoch":0}`, id)); st != 409 || errCode(out) != streamapi.CodeProducerFenced {
		t.Fatalf("fenced: %d %v", st, out)
	}
	for body, want := range map[string]int{
		`{"producer_id":1}`:                           400,
		`{"epoch":1}`:                                 400,
		`{"producer_id":1,"epoch":40000}`:             400,
		`{"producer_id":-1,"epoch":0}`:                400,
		`{"producer_id":"x","epoch":0}`:               400,
		`{"nme":"x"}`:                                 400,
		`{"name":"` + strings.Repeat("n", 250) + `"}`: 400,
	} {
		if st, out := post(t, url, body); st != want || !strings.Contains(fmt.Sprint(out["error"]), "message") {
			t.Errorf("%s: %d %v", body, st, out)
		}
	}
	if st, out := post(t, n.srv.URL+"/v1/namespaces/nope/producers", `{}`); st != 404 || errCode(out) != streamapi.CodeNamespaceNotFound {
		t.Fatalf("%d %v", st, out)
	}
}

func part(p int32) *int32 { return &p }

// TestIdempotentProduceHTTP: produce with producer fields on the real sequencer: a retry
// answers the first offsets and writes nothing; out-of-order, fenced and unknown
// producers are refused with their codes; bad producer fields are 400s.
func TestIdempotentProduceHTTP(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	ctx := context.Background()
	c, err := streamapi.NewClient(n.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "s", Partitions: ptr32(3)}); err != nil {
		t.Fatal(err)
	}
	p, err := c.InitProducer(ctx, "default", streamapi.InitProducerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recs := func(parts ...int32) []streamapi.Record {
		var out []streamapi.Record
		for i, q := range parts {
			v := json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
			out = append(out, streamapi.Record{Partition: part(q), Value: v})
		}
		return out
	}
	first, err := c.ProduceIdempotent(ctx, "default", "s", p, map[int32]int32{0: 0, 2: 0}, recs(0, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.ProduceIdempotent(ctx, "default", "s", p, map[int32]int32{0: 0, 2: 0}, recs(0, 2, 0))
	if err != nil || fmt.Sprint(again.Offsets) != fmt.Sprint(first.Offsets) {
		t.Fatalf("retry: %v %v, first %v", again.Offsets, err, first.Offsets)
	}
	hwm := func(q int32) int64 {
		r, err := c.Fetch(ctx, "default", "s", q, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return r.HighWatermark
	}
	if hwm(0) != 2 || hwm(2) != 1 {
		t.Fatalf("the retry wrote: %d %d", hwm(0), hwm(2))
	}
	code := func(err error) string { return streamapi.ErrorCode(err) }
	status := func(err error) int {
		var ae *streamapi.APIError
		if errors.As(err, &ae) {
			return ae.Status
		}
		return 0
	}
	_, err = c.ProduceIdempotent(ctx, "default", "s", p, map[int32]int32{0: 5}, recs(0))
	if code(err) != streamapi.CodeOutOfOrderSequence || status(err) != 409 || streamapi.IsRetriable(err) || !streamapi.IsProducerRefusal(err) {
		t.Fatalf("gap: %v", err)
	}
	// Partition 0 in sequence, partition 2 out of order: 207, each record its own outcome.
	res, err := c.ProduceIdempotent(ctx, "default", "s", p, map[int32]int32{0: 2, 2: 9}, recs(0, 2))
	if !errors.Is(err, streamapi.ErrPartialCommit) || res.Offsets[0].Error != nil || res.Offsets[0].Offset != 2 ||
		res.Offsets[1].Error == nil || res.Offsets[1].Error.Code != streamapi.CodeOutOfOrderSequence {
		t.Fatalf("partial: %+v %v", res, err)
	}
	bumped, err := c.InitProducer(ctx, "default", streamapi.InitProducerRequest{ProducerID: &p.ProducerID, Epoch: ptr32(int32(p.Epoch))})
	if err != nil || bumped.Epoch != p.Epoch+1 {
		t.Fatalf("%+v %v", bumped, err)
	}
	if _, err := c.ProduceIdempotent(ctx, "default", "s", p, map[int32]int32{0: 3}, recs(0)); code(err) != streamapi.CodeProducerFenced || status(err) != 409 {
		t.Fatalf("fenced: %v", err)
	}
	if _, err := c.ProduceIdempotent(ctx, "default", "s", streamapi.ProducerID{ProducerID: 1 << 50}, map[int32]int32{1: 0}, recs(1)); code(err) != streamapi.CodeUnknownProducer {
		t.Fatalf("unknown: %v", err)
	}
	if _, err := c.ProduceIdempotent(ctx, "default", "s", bumped, map[int32]int32{0: 0}, recs(0)); err != nil {
		t.Fatalf("new epoch from 0: %v", err)
	}
	url := n.srv.URL + "/v1/namespaces/default/streams/s/records"
	id := p.ProducerID
	for body, want := range map[string]string{
		fmt.Sprintf(`{"producer_id":%d,"epoch":1,"sequences":{"0":1},"records":[{"value":1}]}`, id):                     "partition",
		fmt.Sprintf(`{"producer_id":%d,"epoch":1,"sequences":{"1":0},"records":[{"partition":0,"value":1}]}`, id):       "no base sequence for partition 0",
		fmt.Sprintf(`{"producer_id":%d,"epoch":1,"sequences":{"0":1,"1":0},"records":[{"partition":0,"value":1}]}`, id): "names partition 1",
		fmt.Sprintf(`{"producer_id":%d,"epoch":1,"sequences":{"x":0},"records":[{"partition":0,"value":1}]}`, id):       "not a partition number",
		fmt.Sprintf(`{"producer_id":%d,"epoch":1,"sequences":{"0":-1},"records":[{"partition":0,"value":1}]}`, id):      "negative",
		fmt.Sprintf(`{"producer_id":%d,"sequences":{"0":1},"records":[{"partition":0,"value":1}]}`, id):                 "epoch",
		fmt.Sprintf(`{"producer_id":%d,"epoch":70000,"sequences":{"0":1},"records":[{"partition":0,"value":1}]}`, id):   "epoch",
		fmt.Sprintf(`{"producer_id":%d,"epoch":1,"records":[{"partition":0,"value":1}]}`, id):                           "sequences",
		`{"producer_id":0,"epoch":1,"sequences":{"0":1},"records":[{"partition":0,"value":1}]}`:                         "above 0",
		`{"epoch":1,"sequences":{"0":1},"records":[{"partition":0,"value":1}]}`:                                         "producer_id",
		`{"producer_id":"a","epoch":1,"sequences":{"0":1},"records":[{"partition":0,"value":1}]}`:                       "producer_id",
	} {
		st, out := post(t, url, body)
		if st != 400 || !strings.Contains(fmt.Sprint(out["error"]), want) {
			t.Errorf("%s: %d %v, want 400 naming %q", body, st, out, want)
		}
	}
	if hwm(0) != 4 || hwm(1) != 0 || hwm(2) != 1 {
		t.Fatalf("hwm %d %d %d", hwm(0), hwm(1), hwm(2))
	}
}

func ptr32(v int32) *int32 { return &v }

// lossyTransport loses answers: with probability lose it forwards the request and throws
// the answer away (the write happened, the client cannot know), and with probability drop
// it fails before sending.
type lossyTransport struct {
	next        http.RoundTripper
	lose, drop  float64
	lost, drops atomic.Int64
}

func (l *lossyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	x := rand.Float64()
	if x < l.drop {
		l.drops.Add(1)
		return nil, errors.New("lossy: request dropped")
	}
	resp, err := l.next.RoundTrip(r)
	if err == nil && x < l.drop+l.lose {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		l.lost.Add(1)
		return nil, errors.New("lossy: answer lost")
	}
	return resp, err
}

// TestIdempotentProducersLostAnswers: several producers send records to a stream through
// a transport that loses a third of the answers (after the write) and drops some requests;
// each retries every request until answered. Every record is stored exactly once: no
// duplicate, no loss, each producer's records of a partition in order.
func TestIdempotentProducersLostAnswers(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	ctx := context.Background()
	lt := &lossyTransport{next: http.DefaultTransport, lose: 0.3, drop: 0.1}
	c, err := streamapi.NewClient(n.srv.URL, streamapi.WithHTTPClient(&http.Client{Transport: lt}))
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := streamapi.NewClient(n.srv.URL)
	const parts, producers, requests, perRequest = 3, 4, 25, 4
	if _, err := admin.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "lossy", Partitions: ptr32(parts)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for pi := range producers {
		var pr *streamapi.IdempotentProducer
		for pr == nil {
			if pr, err = c.NewIdempotentProducer(ctx, "default", "lossy", fmt.Sprintf("p%d", pi)); err != nil && !streamapi.IsRetriable(err) {
				t.Fatal(err)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range requests {
				var recs []streamapi.Record
				for k := range perRequest {
					q := int32((r + k) % parts)
					recs = append(recs, streamapi.Record{Partition: &q, Key: ptrS(fmt.Sprintf("p%d", pi)),
						Value: json.RawMessage(fmt.Sprintf(`{"p":%d,"r":%d,"k":%d}`, pi, r, k))})
				}
				if _, err := pr.Send(ctx, recs); err != nil {
					errs <- fmt.Errorf("producer %d request %d: %w", pi, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if lt.lost.Load() == 0 || lt.drops.Load() == 0 {
		t.Fatalf("no answers lost (%d) or requests dropped (%d)", lt.lost.Load(), lt.drops.Load())
	}
	seen := map[string]int{}
	total := 0
	for q := range int32(parts) {
		last := map[string]int{} // producer -> last (r, k) seen, as r*perRequest+k
		for off := int64(0); ; {
			res, err := admin.Fetch(ctx, "default", "lossy", q, off, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Records {
				var v struct{ P, R, K int }
				if err := json.Unmarshal(r.Value, &v); err != nil {
					t.Fatal(err)
				}
				id := fmt.Sprintf("%d/%d/%d", v.P, v.R, v.K)
				seen[id]++
				p := fmt.Sprint(v.P)
				if at, ok := last[p]; ok && at >= v.R*perRequest+v.K {
					t.Fatalf("partition %d: producer %d's record %s after %d: out of order", q, v.P, id, at)
				}
				last[p] = v.R*perRequest + v.K
				total++
			}
			off = res.NextOffset
			if off >= res.HighWatermark {
				break
			}
		}
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("record %s stored %d times", id, k)
		}
	}
	if want := producers * requests * perRequest; total != want || len(seen) != want {
		t.Fatalf("%d records stored (%d distinct), want %d", total, len(seen), want)
	}
	t.Logf("%d answers lost, %d requests dropped, %d records each stored once", lt.lost.Load(), lt.drops.Load(), total)

}

func ptrS(s string) *string { return &s }
