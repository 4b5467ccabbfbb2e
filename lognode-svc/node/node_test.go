package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startSequencer starts a real single-voter Raft sequencer and returns its in-process client.
func startSequencer(t testing.TB) meta.Client { return servertest.Client(t) }

func startNode(t *testing.T, lim httpapi.Limits) (*node.Node, string) {
	t.Helper()
	n, err := node.Start(context.Background(), node.Config{NodeID: "n-1", HTTPAddr: "127.0.0.1:0", Bucket: objstore.NewMem(),
		Meta: startSequencer(t), FlushInterval: 5 * time.Millisecond, Limits: lim, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + n.Addr()
	resp, err := http.Post(url+"/v1/namespaces/default/streams", "application/json", strings.NewReader(`{"name":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create stream: %d", resp.StatusCode)
	}
	return n, url
}

type pollResult struct {
	status  int
	body    []byte
	err     error
	elapsed time.Duration
}

func poll(url string, offset int64, wait time.Duration) <-chan pollResult {
	out := make(chan pollResult, 1)
	start := time.Now()
	go func() {
		resp, err := http.Get(fmt.Sprintf("%s/v1/namespaces/default/streams/s/partitions/0/records?offset=%d&max_wait_ms=%d", url, offset, wait.Milliseconds()))
		if err != nil {
			out <- pollResult{err: err, elapsed: time.Since(start)}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- pollResult{status: resp.StatusCode, body: b, err: err, elapsed: time.Since(start)}
	}()
	return out
}

// TestCloseAnswersOpenPolls: Close with a 60 s long-poll open answers the poll at once with
// what it has and returns promptly, and a produce acknowledged before Close is kept.
func TestCloseAnswersOpenPolls(t *testing.T) {
	n, url := startNode(t, httpapi.Limits{})
	resp, err := http.Post(url+"/v1/namespaces/default/streams/s/records", "application/json", strings.NewReader(`{"records":[{"value":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("produce: %d", resp.StatusCode)
	}
	polled := poll(url, 1, 60*time.Second)
	time.Sleep(300 * time.Millisecond) // the poll is open and waiting
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("Close took %v with a 60 s long-poll open", took)
	r := <-polled
	var fr streamapi.FetchResponse
	if r.err != nil || r.status != 200 || json.Unmarshal(r.body, &fr) != nil || len(fr.Records) != 0 || fr.NextOffset != 1 || fr.HighWatermark != 1 {
		t.Fatalf("the open poll got %d %s %v, want 200 with no records at offset 1", r.status, r.body, r.err)
	}
	if took > 5*time.Second {
		t.Fatalf("Close took %v, want well under ECS's 30 s stop timeout", took)
	}
}

// TestPollOutlivesServerTimeouts: a long-poll longer than the server's read and write
// timeouts is answered in full when its wait ends.
func TestPollOutlivesServerTimeouts(t *testing.T) {
	n, url := startNode(t, httpapi.Limits{ReadTimeout: 700 * time.Millisecond, WriteTimeout: time.Second,
		ProduceWait: 500 * time.Millisecond, PollWriteMargin: time.Second})
	defer n.Close(context.Background())
	r := <-poll(url, 0, 2500*time.Millisecond)
	var fr streamapi.FetchResponse
	if r.err != nil || r.status != 200 || json.Unmarshal(r.body, &fr) != nil || len(fr.Records) != 0 {
		t.Fatalf("poll: %d %s %v", r.status, r.body, r.err)
	}
	if r.elapsed < 2400*time.Millisecond {
		t.Fatalf("poll answered after %v, before its 2.5 s wait", r.elapsed)
	}
}

// TestInvalidLimits: limits that cannot work together are refused at Start.
func TestInvalidLimits(t *testing.T) {
	mc := startSequencer(t)
	for _, lim := range []httpapi.Limits{
		{MaxRequestBytes: 1 << 20, MaxInflightBodyBytes: 1 << 10},
		{WriteTimeout: time.Second, ProduceWait: 2 * time.Second},
		{MaxRecordBytes: 2 << 20, MaxRequestBytes: 1 << 20},
	} {
		_, err := node.Start(context.Background(), node.Config{NodeID: "n", Bucket: objstore.NewMem(), Meta: mc, Limits: lim, HTTPAddr: "127.0.0.1:0"})
		if err == nil || !strings.Contains(err.Error(), "httpapi:") {
			t.Fatalf("limits %+v: Start answered %v, want a limits error", lim, err)
		}
	}
}
