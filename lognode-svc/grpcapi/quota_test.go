package grpcapi_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestQuotaOverGRPC: QuotaService sets and reads the quota; a Produce over it answers
// RESOURCE_EXHAUSTED quota_exceeded with a RetryInfo and writes nothing.
func TestQuotaOverGRPC(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createStream(t, "q", 1)
	quotas := loamv1pb.NewQuotaServiceClient(e.conn)
	if _, err := quotas.SetQuota(ctx(t), &loamv1pb.SetQuotaRequest{Namespace: "default", IngestBytesPerSec: -1}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("negative: %v", err)
	}
	if _, err := quotas.GetQuota(ctx(t), &loamv1pb.GetQuotaRequest{Namespace: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("missing namespace: %v", err)
	}
	if q, err := quotas.SetQuota(ctx(t), &loamv1pb.SetQuotaRequest{Namespace: "default", IngestBytesPerSec: 1000}); err != nil || q.IngestBytesPerSec != 1000 {
		t.Fatalf("set: %v %v", q, err)
	}
	if q, err := quotas.GetQuota(ctx(t), &loamv1pb.GetQuotaRequest{Namespace: "default"}); err != nil || q.IngestBytesPerSec != 1000 {
		t.Fatalf("get: %v %v", q, err)
	}
	req := &loamv1pb.ProduceRequest{Namespace: "default", Stream: "q", Records: []*loamv1pb.Record{{Value: []byte(strings.Repeat("x", 380))}}}
	if _, err := e.records.Produce(ctx(t), req); err != nil {
		t.Fatalf("first produce: %v", err)
	}
	_, err := e.records.Produce(ctx(t), req)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || reasonOf(st) != "quota_exceeded" || !strings.Contains(st.Message(), "quota") {
		t.Fatalf("second produce: %v", err)
	}
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if retry == nil || retry.GetRetryDelay().AsDuration() <= 0 || retry.GetRetryDelay().AsDuration() > time.Second {
		t.Fatalf("RetryInfo %v", retry)
	}
	f, err := e.records.Fetch(ctx(t), &loamv1pb.FetchRequest{Namespace: "default", Stream: "q", Partition: 0})
	if err != nil || f.HighWatermark != 1 {
		t.Fatalf("fetch: %v %v: the refused produce wrote records", f, err)
	}
}

// TestTokenOverGRPC: Fetch and Subscribe take the produce's token; a malformed one is
// INVALID_ARGUMENT naming it.
func TestTokenOverGRPC(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createStream(t, "t", 1)
	res, err := e.records.Produce(ctx(t), &loamv1pb.ProduceRequest{Namespace: "default", Stream: "t", Records: []*loamv1pb.Record{{Value: []byte("v")}}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.records.Fetch(ctx(t), &loamv1pb.FetchRequest{Namespace: "default", Stream: "t", Token: res.Token})
	if err != nil || len(f.Records) != 1 {
		t.Fatalf("fetch with token %s: %v %v", res.Token, f, err)
	}
	sub, err := e.records.Subscribe(ctx(t), &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "t", Token: res.Token})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := sub.Recv(); err != nil || len(m.Records) != 1 {
		t.Fatalf("subscribe with token: %v %v", m, err)
	}
	_, err = e.records.Fetch(ctx(t), &loamv1pb.FetchRequest{Namespace: "default", Stream: "t", Token: "v1.x"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "token") {
		t.Fatalf("malformed token: %v", err)
	}
	sub, err = e.records.Subscribe(ctx(t), &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "t", Token: "x"})
	if err == nil {
		_, err = sub.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("malformed token on subscribe: %v", err)
	}
}
