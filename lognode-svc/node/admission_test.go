package node_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestAdmissionSharedByHTTPAndGRPC: a node's HTTP and gRPC APIs admit against one set of
// counters: with MaxConcurrent 1, a long-poll held over HTTP makes a gRPC call answer
// RESOURCE_EXHAUSTED, and a Subscribe held over gRPC makes an HTTP request answer 429.
func TestAdmissionSharedByHTTPAndGRPC(t *testing.T) {
	n, err := node.Start(context.Background(), node.Config{NodeID: "n-a", HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
		Bucket: objstore.NewMem(), Meta: startSequencer(t), FlushInterval: 5 * time.Millisecond, Logger: quiet(),
		Limits: httpapi.Limits{MaxConcurrent: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	url := "http://" + n.Addr()
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := loamv1pb.NewStreamServiceClient(conn).CreateStream(ctx, &loamv1pb.CreateStreamRequest{Namespace: "default", Name: "s"}); err != nil {
		t.Fatal(err)
	}
	held := poll(url, 0, 2*time.Second) // waits at the high watermark, holding the one slot
	time.Sleep(300 * time.Millisecond)
	_, err = loamv1pb.NewStreamServiceClient(conn).ListStreams(ctx, &loamv1pb.ListStreamsRequest{Namespace: "default"})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a gRPC call while an HTTP long-poll holds the only slot: %v, want RESOURCE_EXHAUSTED", err)
	}
	if r := <-held; r.err != nil || r.status != 200 {
		t.Fatalf("the long-poll: %+v", r)
	}

	sctx, scancel := context.WithCancel(ctx)
	sub, err := loamv1pb.NewRecordServiceClient(conn).Subscribe(sctx, &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "s"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the call is admitted once its message arrives
	resp, err := http.Get(url + "/v1/namespaces/default/streams")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("an HTTP request while a Subscribe holds the only slot: %d, want 429", resp.StatusCode)
	}
	scancel()
	_, _ = sub.Recv()
}
