package grpcapi_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestSubscribeFlowControl: a subscriber that does not read does not make the server
// read and buffer the partition: the server hands Send only what the client's receive
// window (64 KiB here, fixed) and gRPC's per-stream write quota let through, while 8 MiB
// are produced. Once the client reads, every record arrives in order.
func TestSubscribeFlowControl(t *testing.T) {
	const window = 64 << 10
	e := start(t, httpapi.Limits{})
	e.createStream(t, "slow", 1)
	conn := e.dial(t, grpc.WithInitialWindowSize(window), grpc.WithInitialConnWindowSize(window))
	sub, err := loamv1pb.NewRecordServiceClient(conn).Subscribe(ctx(t), &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "slow", MaxBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	const (
		produces  = 128
		perReq    = 64
		valueSize = 1000
	)
	value := bytes.Repeat([]byte("x"), valueSize)
	for i := range produces {
		recs := make([]*loamv1pb.Record, perReq)
		for j := range recs {
			recs[j] = &loamv1pb.Record{Key: []byte(fmt.Sprint(i*perReq + j)), Value: value}
		}
		if _, err := e.records.Produce(ctx(t), &loamv1pb.ProduceRequest{Namespace: "default", Stream: "slow", Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	produced := float64(produces * perReq * valueSize)
	// Let the server go as far as it can, then check it stopped.
	var sent float64
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		now := e.metric(t, "loam_grpc_subscribe_sent_bytes_total")
		if now == sent && now > 0 {
			break
		}
		sent = now
	}
	t.Logf("produced %.0f bytes; the unread subscription handed %.0f bytes to Send", produced, sent)
	if sent == 0 {
		t.Fatal("the subscription sent nothing")
	}
	if limit := float64(1 << 20); sent > limit {
		t.Fatalf("the server handed %.0f bytes to an unread subscription, more than %.0f: it is not held back by flow control", sent, limit)
	}
	// Reading resumes the flow: all records, in order.
	next := int64(0)
	for next < produces*perReq {
		m, err := sub.Recv()
		if err != nil {
			t.Fatalf("recv at %d: %v", next, err)
		}
		for _, r := range m.Records {
			if r.GetOffset() != next || string(r.Key) != fmt.Sprint(next) {
				t.Fatalf("record at %d: offset %d key %q", next, r.GetOffset(), r.Key)
			}
			next++
		}
	}
}
