package grpcapi

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// ConsumerAdminService: deleting a named consumer and resetting its offsets over gRPC,
// checked and answered as the HTTP routes do (httpapi.ConsumerReset checks a reset).

type consumerAdminService struct {
	loamv1pb.UnimplementedConsumerAdminServiceServer
	s *Server
}

func (s *Server) registerConsumerAdmin(g grpc.ServiceRegistrar) {
	loamv1pb.RegisterConsumerAdminServiceServer(g, &consumerAdminService{s: s})
}

// consumerAdminErr maps ErrConsumerActive, then the other consumer sentinels.
func consumerAdminErr(err error) error {
	if errors.Is(err, meta.ErrConsumerActive) {
		return &inputError{code: codes.FailedPrecondition, reason: streamapi.CodeConsumerActive, msg: err.Error()}
	}
	return consumerErr(err)
}

// DeleteConsumer implements loamv1pb.ConsumerAdminServiceServer.
func (c *consumerAdminService) DeleteConsumer(ctx context.Context, req *loamv1pb.DeleteConsumerRequest) (*loamv1pb.DeleteConsumerResponse, error) {
	if err := required("namespace", req.GetNamespace(), "consumer", req.GetConsumer()); err != nil {
		return nil, err
	}
	if err := c.s.cfg.Meta.DeleteConsumer(ctx, req.GetNamespace(), req.GetConsumer(), req.GetForce()); err != nil {
		return nil, consumerAdminErr(err)
	}
	return &loamv1pb.DeleteConsumerResponse{}, nil
}

// ResetOffsets implements loamv1pb.ConsumerAdminServiceServer.
func (c *consumerAdminService) ResetOffsets(ctx context.Context, req *loamv1pb.ResetOffsetsRequest) (*loamv1pb.ResetOffsetsResponse, error) {
	if err := required("namespace", req.GetNamespace(), "consumer", req.GetConsumer()); err != nil {
		return nil, err
	}
	rs, err := httpapi.ConsumerReset(req.GetNamespace(), req.GetConsumer(), streamapi.ResetOffsetsRequest{Stream: req.GetStream(),
		To: req.GetTo(), Partitions: req.GetPartitions(), Offset: req.Offset, TimestampMs: req.TimestampMs, Force: req.GetForce()})
	if err != nil {
		return nil, badInput(streamapi.CodeInvalidArgument, "%s", err.Error())
	}
	offs, err := c.s.cfg.Meta.ResetConsumerOffsets(ctx, rs)
	if err != nil {
		return nil, consumerAdminErr(err)
	}
	out := &loamv1pb.ResetOffsetsResponse{Offsets: make([]*loamv1pb.PartitionOffset, len(offs))}
	for i, o := range offs {
		out.Offsets[i] = &loamv1pb.PartitionOffset{Partition: o.Partition, Offset: o.Offset}
	}
	return out, nil
}
