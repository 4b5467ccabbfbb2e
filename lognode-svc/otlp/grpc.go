package otlp

import (
	"context"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // exporters may compress with gzip
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/loamhq/loam/shared/otlplogs"
)

// OTLP/gRPC: opentelemetry.proto.collector.logs.v1.LogsService/Export, the target and API
// key in the metadata loam-namespace, loam-stream and authorization. Failures carry the
// codes errors.go gives; retryable ones a google.rpc.RetryInfo, without which OTLP
// exporters do not retry RESOURCE_EXHAUSTED.

// NewGRPCServer returns a gRPC server serving LogsService and gRPC health, its message
// size limit Limits.MaxRequestBytes (decompressed).
func (s *Server) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	base := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(s.cfg.Limits.MaxRequestBytes),
		grpc.InTapHandle(s.tap),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	g := grpc.NewServer(append(base, opts...)...)
	s.Register(g)
	h := health.NewServer()
	h.SetServingStatus(collogspb.LogsService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, h)
	return g
}

// Register registers LogsService on g.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	collogspb.RegisterLogsServiceServer(g, logsService{s: s})
}

type logsService struct {
	collogspb.UnimplementedLogsServiceServer
	s *Server
}

// Export implements LogsService.
func (l logsService) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	s := l.s
	n := otlplogs.Count(req)
	size := proto.Size(req)
	s.m.bytes.WithLabelValues(transportGRPC).Add(float64(size))
	if err := s.gadm.reserve(int64(size)); err != nil {
		return nil, s.grpcFail(n, err)
	}
	defer s.gadm.release(int64(size))
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	t, err := s.resolve(ctx, first("authorization"), first(HeaderNamespace), first(HeaderStream))
	if err != nil {
		return nil, s.grpcFail(n, err)
	}
	out, err := s.export(ctx, t, req, size)
	if err != nil {
		return nil, s.grpcFail(n, err)
	}
	s.done(transportGRPC, out)
	resp := &collogspb.ExportLogsServiceResponse{}
	if out.rejected > 0 {
		resp.PartialSuccess = &collogspb.ExportLogsPartialSuccess{RejectedLogRecords: out.rejected, ErrorMessage: out.message}
	}
	return resp, nil
}

// tap admits an Export before its message is read (at most Limits.MaxConcurrent at once),
// so messages being read hold at most MaxConcurrent × MaxRequestBytes.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if info.FullMethodName != collogspb.LogsService_Export_FullMethodName {
		return ctx, nil // health
	}
	if err := s.gadm.enter(); err != nil {
		return ctx, s.grpcFail(0, err)
	}
	context.AfterFunc(ctx, s.gadm.leave) // the stream's context ends with the call
	return ctx, nil
}

// grpcFail is err's gRPC status, with RetryInfo when it is retryable.
func (s *Server) grpcFail(records int, err error) error {
	a := errorAnswer(err)
	if a.status >= 500 {
		s.cfg.Logger.Warn("OTLP export failed", "transport", transportGRPC, "code", a.code, "err", err)
	}
	s.m.refused.WithLabelValues(transportGRPC).Add(float64(records))
	s.m.requests.WithLabelValues(transportGRPC, a.code.String()).Inc()
	st := status.New(a.code, a.msg)
	if a.retry > 0 {
		if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(a.retry)}); derr == nil {
			st = d
		}
	}
	return st.Err()
}
