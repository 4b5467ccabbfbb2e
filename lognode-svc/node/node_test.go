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

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
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

// TestGRPCServedAndClosed: with a gRPC address the node serves loam.v1 there; Close ends
// an open subscription at once with UNAVAILABLE (resubscribe elsewhere), a record
// acknowledged over gRPC before Close is kept, and Close returns promptly.
func TestGRPCServedAndClosed(t *testing.T) {
	mc := startSequencer(t)
	bucket := objstore.NewMem()
	n, err := node.Start(context.Background(), node.Config{NodeID: "n-g", HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
		Bucket: bucket, Meta: mc, FlushInterval: 5 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if n.GRPCAddr() == "" {
		t.Fatal("no gRPC address")
	}
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := loamv1pb.NewStreamServiceClient(conn).CreateStream(ctx, &loamv1pb.CreateStreamRequest{Namespace: "default", Name: "g"}); err != nil {
		t.Fatal(err)
	}
	rc := loamv1pb.NewRecordServiceClient(conn)
	if _, err := rc.Produce(ctx, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "g", Records: []*loamv1pb.Record{{Value: []byte("kept")}}}); err != nil {
		t.Fatal(err)
	}
	sub, err := rc.Subscribe(ctx, &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := sub.Recv(); err != nil || len(m.Records) != 1 {
		t.Fatalf("subscribe: %v %v", m, err)
	}
	start := time.Now()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the open subscription ended with %v, want UNAVAILABLE", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v with a subscription open", took)
	}
	// A new node on the same bucket and sequencer serves the acknowledged record.
	n2, err := node.Start(context.Background(), node.Config{NodeID: "n-g2", HTTPAddr: "127.0.0.1:0", Bucket: bucket, Meta: mc, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close(context.Background())
	if n2.GRPCAddr() != "" {
		t.Fatalf("a node without a gRPC address serves gRPC at %s", n2.GRPCAddr())
	}
	resp, err := http.Get("http://" + n2.Addr() + "/v1/namespaces/default/streams/g/partitions/0/records?offset=0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var fr streamapi.FetchResponse
	if err := json.NewDecoder(resp.Body).Decode(&fr); err != nil || len(fr.Records) != 1 {
		t.Fatalf("fetch after restart: %v %v", fr, err)
	}
}

// TestCloseExpiredContextWithoutGRPC: Close with a context already ended, on nodes that
// serve no gRPC API, returns without touching the gRPC server they do not have.
func TestCloseExpiredContextWithoutGRPC(t *testing.T) {
	mc := startSequencer(t)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 16 {
		n, err := node.Start(context.Background(), node.Config{NodeID: fmt.Sprintf("x-%d", i), HTTPAddr: "127.0.0.1:0", Bucket: objstore.NewMem(), Meta: mc, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		_ = n.Close(done) // the HTTP shutdown reports the expired context; it must not panic
	}
}
