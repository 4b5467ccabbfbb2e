package grpcapi_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestConsumerService: loam.v1.ConsumerService on a real node and sequencer: heartbeats
// balance the leases, a commit under a lost lease is FAILED_PRECONDITION
// stale_consumer_epoch with nothing committed, describe answers offsets and lag, list names
// the consumer, and bad input is refused.
func TestConsumerService(t *testing.T) {
	e := start(t, httpapi.Limits{})
	c := loamv1pb.NewConsumerServiceClient(e.conn)
	e.createStream(t, "orders", 2)
	p := int32(1)
	if _, err := e.records.Produce(ctx(t), &loamv1pb.ProduceRequest{Namespace: "default", Stream: "orders",
		Records: []*loamv1pb.Record{{Value: []byte("a"), Partition: &p}, {Value: []byte("b"), Partition: &p}}}); err != nil {
		t.Fatal(err)
	}
	hb := func(m string, leave bool) *loamv1pb.HeartbeatResponse {
		t.Helper()
		r, err := c.Heartbeat(ctx(t), &loamv1pb.HeartbeatRequest{Namespace: "default", Consumer: "app", Stream: "orders", Member: m, SessionMs: 30000, Leave: leave})
		if err != nil {
			t.Fatalf("heartbeat %s: %v", m, err)
		}
		return r
	}
	if r := hb("m1", false); len(r.Leases) != 2 || r.Members != 1 || r.ExpiresMs-r.ClockMs != 30000 {
		t.Fatalf("m1: %v", r)
	}
	hb("m2", false)
	hb("m1", false)
	r2 := hb("m2", false)
	if len(r2.Leases) != 1 || r2.Leases[0].Partition != 1 || r2.Leases[0].Epoch != 2 {
		t.Fatalf("m2: %v", r2)
	}
	_, err := c.CommitOffsets(ctx(t), &loamv1pb.CommitOffsetsRequest{Namespace: "default", Consumer: "app", Stream: "orders", Member: "m1",
		Offsets: []*loamv1pb.CommitOffset{{Partition: 0, Offset: 0, Epoch: 1}, {Partition: 1, Offset: 1, Epoch: 1}}})
	wantStatus(t, "stale commit", err, codes.FailedPrecondition, streamapi.CodeStaleConsumerEpoch)
	if _, err := c.CommitOffsets(ctx(t), &loamv1pb.CommitOffsetsRequest{Namespace: "default", Consumer: "app", Stream: "orders", Member: "m2",
		Offsets: []*loamv1pb.CommitOffset{{Partition: 1, Offset: 1, Metadata: "half", Epoch: 2}}}); err != nil {
		t.Fatal(err)
	}
	d, err := c.DescribeConsumer(ctx(t), &loamv1pb.DescribeConsumerRequest{Namespace: "default", Consumer: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Partitions) != 2 || d.Partitions[0].Committed != -1 || d.Partitions[1].Committed != 1 || d.Partitions[1].Lag != 1 ||
		d.Partitions[1].Metadata != "half" || d.Partitions[1].Holder != "m2" || len(d.Members) != 2 {
		t.Fatalf("describe: %v", d)
	}
	l, err := c.ListConsumers(ctx(t), &loamv1pb.ListConsumersRequest{Namespace: "default"})
	if err != nil || strings.Join(l.Consumers, ",") != "app" {
		t.Fatalf("list: %v %v", l, err)
	}
	if r := hb("m1", true); len(r.Leases) != 0 || r.Members != 1 {
		t.Fatalf("leave: %v", r)
	}
	_, err = c.DescribeConsumer(ctx(t), &loamv1pb.DescribeConsumerRequest{Namespace: "default", Consumer: "nobody"})
	wantStatus(t, "describe nobody", err, codes.NotFound, streamapi.CodeConsumerNotFound)
	_, err = c.Heartbeat(ctx(t), &loamv1pb.HeartbeatRequest{Namespace: "default", Consumer: "app", Stream: "orders"})
	wantStatus(t, "no member", err, codes.InvalidArgument, streamapi.CodeInvalidArgument)
	_, err = c.Heartbeat(ctx(t), &loamv1pb.HeartbeatRequest{Namespace: "default", Consumer: "app", Stream: "orders", Member: "m", SessionMs: 1})
	wantStatus(t, "short session", err, codes.InvalidArgument, streamapi.CodeInvalidArgument)
	_, err = c.CommitOffsets(ctx(t), &loamv1pb.CommitOffsetsRequest{Namespace: "default", Consumer: "app", Stream: "orders", Member: "m2",
		Offsets: []*loamv1pb.CommitOffset{{Partition: 1, Offset: 9, Epoch: 2}}})
	wantStatus(t, "past the high watermark", err, codes.OutOfRange, streamapi.CodeOffsetOutOfRange)
	_, err = c.Heartbeat(ctx(t), &loamv1pb.HeartbeatRequest{Namespace: "default", Consumer: "app", Stream: "nosuch", Member: "m"})
	wantStatus(t, "missing stream", err, codes.NotFound, streamapi.CodeStreamNotFound)
}
