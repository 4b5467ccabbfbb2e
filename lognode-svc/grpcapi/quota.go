package grpcapi

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// Ingest quotas and consistency tokens over gRPC, as over HTTP (httpapi/quota.go,
// httpapi/tokens.go): a Produce spends its request's encoded size from the namespace's
// quota before anything is decoded into batches or written, through the same per-node
// share the HTTP API spends from; over quota it answers RESOURCE_EXHAUSTED (reason
// quota_exceeded) with a RetryInfo carrying the delay. QuotaService reads and sets quotas.

// ingestAdmitter is the HTTP API's quota admission (httpapi.Server.AdmitIngest), shared
// through the catalog so both APIs spend one share per node.
type ingestAdmitter interface {
	AdmitIngest(ctx context.Context, ns string, n int) error
}

func (s *Server) admitIngest(ctx context.Context, ns string, req *loamv1pb.ProduceRequest) error {
	a, ok := s.cfg.Streams.(ingestAdmitter)
	if !ok {
		return nil // a catalog without quotas (tests)
	}
	return a.AdmitIngest(ctx, ns, proto.Size(req))
}

// quotaAnswer maps an over-quota refusal.
func quotaAnswer(err error) (answer, bool) {
	var qe *meta.QuotaExceededError
	if !errors.As(err, &qe) {
		return answer{}, false
	}
	return answer{code: codes.ResourceExhausted, reason: streamapi.CodeQuotaExceeded, retriable: true, retryAfter: qe.RetryAfter}, true
}

// parseToken parses a Fetch or Subscribe token ("" : none); malformed, INVALID_ARGUMENT.
func parseToken(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	t, err := httpapi.ParseToken(v)
	if err != nil {
		return 0, badInput(streamapi.CodeBadRequest, "token: %v", err)
	}
	return t, nil
}

// quotaServer implements loamv1pb.QuotaServiceServer.
type quotaServer struct {
	loamv1pb.UnimplementedQuotaServiceServer
	s *Server
}

func (q quotaServer) GetQuota(ctx context.Context, req *loamv1pb.GetQuotaRequest) (*loamv1pb.Quota, error) {
	if err := required("namespace", req.GetNamespace()); err != nil {
		return nil, err
	}
	got, err := q.s.cfg.Meta.GetQuota(ctx, req.GetNamespace())
	if err != nil {
		return nil, err
	}
	return &loamv1pb.Quota{Namespace: got.Namespace, IngestBytesPerSec: got.IngestBytesPerSec}, nil
}

func (q quotaServer) SetQuota(ctx context.Context, req *loamv1pb.SetQuotaRequest) (*loamv1pb.Quota, error) {
	if err := required("namespace", req.GetNamespace()); err != nil {
		return nil, err
	}
	if v := req.GetIngestBytesPerSec(); v < 0 || v > meta.MaxIngestBytesPerSec {
		return nil, badInput(streamapi.CodeInvalidArgument, "ingest_bytes_per_sec %d is out of range [0, %d]", v, int64(meta.MaxIngestBytesPerSec))
	}
	got, err := q.s.cfg.Meta.SetQuota(ctx, meta.Quota{Namespace: req.GetNamespace(), IngestBytesPerSec: req.GetIngestBytesPerSec()})
	if err != nil {
		return nil, err
	}
	return &loamv1pb.Quota{Namespace: got.Namespace, IngestBytesPerSec: got.IngestBytesPerSec}, nil
}
