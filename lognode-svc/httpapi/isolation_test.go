package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestDeletedStreamFailsOnlyItsProduces: stream B is deleted while its produce and stream
// A's share one flush. A's producer is answered with its offsets every time; B's with
// 404 stream_not_found; A's records are all there, dense.
func TestDeletedStreamFailsOnlyItsProduces(t *testing.T) {
	mc := startSequencer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: "iso-1", Listener: ln, Bucket: objstore.NewMem(), Meta: mc,
		FlushInterval: 400 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	streams := srv.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", streams, `{"name":"a","partitions":1}`); r.status != 201 {
		t.Fatalf("create a: %d %s", r.status, r.body)
	}
	for try := range 6 {
		b := fmt.Sprintf("b%d", try)
		if r := call(t, "POST", streams, fmt.Sprintf(`{"name":%q,"partitions":1}`, b)); r.status != 201 {
			t.Fatalf("create %s: %d %s", b, r.status, r.body)
		}
		// The node knows b: its produce is admitted and buffered with a's.
		var wg sync.WaitGroup
		var ra, rb httpReply
		wg.Add(2)
		go func() { defer wg.Done(); rb = call(t, "POST", streams+"/"+b+"/records", `{"records":[{"value":"b"}]}`) }()
		go func() {
			defer wg.Done()
			ra = call(t, "POST", streams+"/a/records", `{"records":[{"value":"a1"},{"value":"a2"}]}`)
		}()
		time.Sleep(100 * time.Millisecond) // both wait for the flush
		if err := mc.DeleteStream(context.Background(), meta.DefaultNS, b); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if ra.status != 200 {
			t.Fatalf("try %d: a's produce answered %d %s, want 200 (b's deletion must not fail it)", try, ra.status, ra.body)
		}
		var res streamapi.ProduceResponse
		if err := json.Unmarshal(ra.body, &res); err != nil || len(res.Offsets) != 2 || res.Offsets[0].Offset != int64(2*try) || res.Offsets[1].Offset != int64(2*try+1) {
			t.Fatalf("try %d: a's answer %s (%v), want offsets %d and %d", try, ra.body, err, 2*try, 2*try+1)
		}
		if rb.status == 200 {
			// b's produce raced ahead of the flush window: it committed before the deletion.
			continue
		}
		if d := rb.detail(t); rb.status != 404 || d.Code != streamapi.CodeStreamNotFound {
			t.Fatalf("try %d: b's produce answered %d %s, want 404 stream_not_found", try, rb.status, rb.body)
		}
	}
	r := call(t, "GET", streams+"/a/partitions/0/records?offset=0", "")
	var fr streamapi.FetchResponse
	if err := json.Unmarshal(r.body, &fr); err != nil || len(fr.Records) != 12 || fr.HighWatermark != 12 {
		t.Fatalf("a holds %s, want 12 records", r.body)
	}
}

// partialWriter commits its first request and refuses the others, as the writer answers
// a Write whose chunks the sequencer refused in part.
type partialWriter struct{}

func (partialWriter) Write(_ context.Context, reqs []writer.Request) ([]writer.Result, error) {
	res := make([]writer.Result, len(reqs))
	for i := range res {
		if i == 0 {
			res[i] = writer.Result{BaseOffset: 7, Token: 3}
			continue
		}
		res[i] = writer.Result{BaseOffset: -1, Err: fmt.Errorf("%w: %w", writer.ErrCommitFailed, meta.ErrPartitionNotFound)}
	}
	return res, writer.ErrPartialCommit
}
func (partialWriter) Close(context.Context) error { return nil }

// TestPartialCommitAnswers207: each record is answered by its own partition's outcome.
func TestPartialCommitAnswers207(t *testing.T) {
	mc := startSequencer(t)
	ctx := t.Context()
	if _, err := mc.CreateStream(ctx, meta.StreamConfig{Namespace: meta.DefaultNS, Name: "s", Partitions: 2, Class: meta.ClassStandard,
		Encoding: meta.EncodingKafka, RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete}); err != nil {
		t.Fatal(err)
	}
	rd, err := reader.New(reader.Config{Bucket: objstore.NewMem(), Meta: mc, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{NodeID: "n", Meta: mc, Reader: rd, Logger: quiet(),
		Writers: map[string]writer.Writer{meta.ClassStandard: partialWriter{}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	r := call(t, "POST", srv.URL+"/v1/namespaces/default/streams/s/records",
		`{"records":[{"value":1,"partition":0},{"value":2,"partition":1},{"value":3,"partition":0}]}`)
	var res streamapi.ProduceResponse
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != 207 || len(res.Offsets) != 3 {
		t.Fatalf("answered %d %s, want 207 with three outcomes", r.status, r.body)
	}
	ok0, bad, ok2 := res.Offsets[0], res.Offsets[1], res.Offsets[2]
	if ok0.Error != nil || ok0.Offset != 7 || ok2.Error != nil || ok2.Offset != 8 || res.Token != "v1.3" {
		t.Fatalf("committed records answered %s", r.body)
	}
	if bad.Offset != -1 || bad.Error == nil || bad.Error.Code != streamapi.CodePartitionNotFound {
		t.Fatalf("refused record answered %+v", bad)
	}
}
