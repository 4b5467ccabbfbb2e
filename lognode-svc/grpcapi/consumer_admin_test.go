package grpcapi_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestConsumerAdminService: loam.v1.ConsumerAdminService on a real node and sequencer:
// delete and reset are FAILED_PRECONDITION consumer_active while a member is live unless
// forced; resets answer and commit the offsets; bad input is INVALID_ARGUMENT; a deleted
// consumer is NOT_FOUND consumer_not_found.
func TestConsumerAdminService(t *testing.T) {
	e := start(t, httpapi.Limits{})
	c := loamv1pb.NewConsumerServiceClient(e.conn)
	a := loamv1pb.NewConsumerAdminServiceClient(e.conn)
	e.createStream(t, "orders", 2)
	p := int32(1)
	if _, err := e.records.Produce(ctx(t), &loamv1pb.ProduceRequest{Namespace: "default", Stream: "orders",
		Records: []*loamv1pb.Record{{Value: []byte("a"), Partition: &p}, {Value: []byte("b"), Partition: &p}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx(t), &loamv1pb.HeartbeatRequest{Namespace: "default", Consumer: "app", Stream: "orders", Member: "m1", SessionMs: 30000}); err != nil {
		t.Fatal(err)
	}
	_, err := a.ResetOffsets(ctx(t), &loamv1pb.ResetOffsetsRequest{Namespace: "default", Consumer: "app", Stream: "orders", To: "latest"})
	wantStatus(t, "reset with a live member", err, codes.FailedPrecondition, streamapi.CodeConsumerActive)
	_, err = a.DeleteConsumer(ctx(t), &loamv1pb.DeleteConsumerRequest{Namespace: "default", Consumer: "app"})
	wantStatus(t, "delete with a live member", err, codes.FailedPrecondition, streamapi.CodeConsumerActive)
	r, err := a.ResetOffsets(ctx(t), &loamv1pb.ResetOffsetsRequest{Namespace: "default", Consumer: "app", Stream: "orders", To: "latest", Force: true})
	if err != nil || len(r.Offsets) != 2 || r.Offsets[0].Offset != 0 || r.Offsets[1].Offset != 2 {
		t.Fatalf("forced reset to latest: %v %v", r, err)
	}
	one := int64(1)
	if r, err = a.ResetOffsets(ctx(t), &loamv1pb.ResetOffsetsRequest{Namespace: "default", Consumer: "app", Stream: "orders", To: "offset",
		Offset: &one, Partitions: []int32{1}}); err != nil || len(r.Offsets) != 1 || r.Offsets[0].Offset != 1 {
		t.Fatalf("reset partition 1 to offset 1: %v %v", r, err)
	}
	d, err := c.DescribeConsumer(ctx(t), &loamv1pb.DescribeConsumerRequest{Namespace: "default", Consumer: "app"})
	if err != nil || len(d.Members) != 0 || d.Partitions[1].Committed != 1 {
		t.Fatalf("describe: %v %v", d, err)
	}
	_, err = a.ResetOffsets(ctx(t), &loamv1pb.ResetOffsetsRequest{Namespace: "default", Consumer: "app", Stream: "orders", To: "offset"})
	wantStatus(t, "offset without its value", err, codes.InvalidArgument, streamapi.CodeInvalidArgument)
	_, err = a.ResetOffsets(ctx(t), &loamv1pb.ResetOffsetsRequest{Namespace: "default", Consumer: "app", Stream: "orders", To: "latest", Partitions: []int32{9}})
	wantStatus(t, "unknown partition", err, codes.NotFound, streamapi.CodePartitionNotFound)
	if _, err := a.DeleteConsumer(ctx(t), &loamv1pb.DeleteConsumerRequest{Namespace: "default", Consumer: "app"}); err != nil {
		t.Fatal(err)
	}
	_, err = a.DeleteConsumer(ctx(t), &loamv1pb.DeleteConsumerRequest{Namespace: "default", Consumer: "app"})
	wantStatus(t, "delete twice", err, codes.NotFound, streamapi.CodeConsumerNotFound)
}
