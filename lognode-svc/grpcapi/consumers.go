package grpcapi

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// ConsumerService: named consumers over gRPC, answering as the HTTP routes do (the state
// lives in the sequencer; httpapi.DescribeConsumer computes the lag).

type consumerService struct {
	loamv1pb.UnimplementedConsumerServiceServer
	s *Server
}

func (s *Server) registerConsumers(g grpc.ServiceRegistrar) {
	loamv1pb.RegisterConsumerServiceServer(g, &consumerService{s: s})
}

// consumerErr maps the consumer sentinels (every other error goes to errorAnswer as is).
func consumerErr(err error) error {
	switch {
	case errors.Is(err, meta.ErrStaleConsumerEpoch):
		return &inputError{code: codes.FailedPrecondition, reason: streamapi.CodeStaleConsumerEpoch, msg: err.Error()}
	case errors.Is(err, meta.ErrConsumerNotFound):
		return &inputError{code: codes.NotFound, reason: streamapi.CodeConsumerNotFound, msg: err.Error()}
	case errors.Is(err, meta.ErrOffsetOutOfRange): // a commit past the high watermark
		return &inputError{code: codes.OutOfRange, reason: streamapi.CodeOffsetOutOfRange, msg: err.Error()}
	}
	return err
}

// Heartbeat implements loamv1pb.ConsumerServiceServer.
func (c *consumerService) Heartbeat(ctx context.Context, req *loamv1pb.HeartbeatRequest) (*loamv1pb.HeartbeatResponse, error) {
	if err := required("namespace", req.GetNamespace(), "consumer", req.GetConsumer(), "stream", req.GetStream(), "member", req.GetMember()); err != nil {
		return nil, err
	}
	session := req.GetSessionMs()
	if session == 0 && !req.GetLeave() {
		session = meta.DefaultConsumerSession.Milliseconds()
	}
	if !req.GetLeave() && (session < meta.MinConsumerSession.Milliseconds() || session > meta.MaxConsumerSession.Milliseconds()) {
		return nil, badInput(streamapi.CodeInvalidArgument, "session_ms %d: want %d..%d", session,
			meta.MinConsumerSession.Milliseconds(), meta.MaxConsumerSession.Milliseconds())
	}
	a, err := c.s.cfg.Meta.ConsumerHeartbeat(ctx, meta.ConsumerHeartbeat{Namespace: req.GetNamespace(), Consumer: req.GetConsumer(),
		Stream: req.GetStream(), Member: req.GetMember(), Session: time.Duration(session) * time.Millisecond, Leave: req.GetLeave()})
	if err != nil {
		return nil, consumerErr(err)
	}
	out := &loamv1pb.HeartbeatResponse{Partitions: a.Partitions, Members: a.Members, ExpiresMs: a.ExpiresMs,
		Leases: make([]*loamv1pb.ConsumerLease, len(a.Leases))}
	if !req.GetLeave() {
		out.ClockMs = a.ExpiresMs - session
	}
	for i, l := range a.Leases {
		out.Leases[i] = &loamv1pb.ConsumerLease{Partition: l.Partition, Epoch: l.Epoch, ExpiresMs: l.ExpiresMs}
	}
	return out, nil
}

// CommitOffsets implements loamv1pb.ConsumerServiceServer.
func (c *consumerService) CommitOffsets(ctx context.Context, req *loamv1pb.CommitOffsetsRequest) (*loamv1pb.CommitOffsetsResponse, error) {
	if err := required("namespace", req.GetNamespace(), "consumer", req.GetConsumer(), "stream", req.GetStream()); err != nil {
		return nil, err
	}
	cm := meta.ConsumerCommit{Namespace: req.GetNamespace(), Consumer: req.GetConsumer(), Stream: req.GetStream(), Member: req.GetMember(),
		Offsets: make([]meta.ConsumerOffset, len(req.GetOffsets()))}
	for i, o := range req.GetOffsets() {
		cm.Offsets[i] = meta.ConsumerOffset{Partition: o.GetPartition(), Offset: o.GetOffset(), Metadata: o.GetMetadata(), Epoch: o.GetEpoch()}
	}
	if err := meta.CheckConsumerCommit(cm); err != nil {
		return nil, err
	}
	if err := c.s.cfg.Meta.CommitConsumerOffsets(ctx, cm); err != nil {
		return nil, consumerErr(err)
	}
	return &loamv1pb.CommitOffsetsResponse{}, nil
}

// DescribeConsumer implements loamv1pb.ConsumerServiceServer.
func (c *consumerService) DescribeConsumer(ctx context.Context, req *loamv1pb.DescribeConsumerRequest) (*loamv1pb.DescribeConsumerResponse, error) {
	if err := required("namespace", req.GetNamespace(), "consumer", req.GetConsumer()); err != nil {
		return nil, err
	}
	d, err := httpapi.DescribeConsumer(ctx, c.s.cfg.Meta, req.GetNamespace(), req.GetConsumer())
	if err != nil {
		return nil, consumerErr(err)
	}
	out := &loamv1pb.DescribeConsumerResponse{ClockMs: d.ClockMs, Partitions: make([]*loamv1pb.ConsumerPartition, len(d.Partitions)),
		Members: make([]*loamv1pb.ConsumerMember, len(d.Members))}
	for i, p := range d.Partitions {
		out.Partitions[i] = &loamv1pb.ConsumerPartition{Stream: p.Stream, Partition: p.Partition, Committed: p.Committed, Metadata: p.Metadata,
			CommittedMs: p.CommittedMs, HighWatermark: p.HighWatermark, LogStart: p.LogStart, Lag: p.Lag, Holder: p.Holder, Epoch: p.Epoch,
			LeaseExpiresMs: p.LeaseExpiresMs}
	}
	for i, m := range d.Members {
		out.Members[i] = &loamv1pb.ConsumerMember{Stream: m.Stream, Member: m.Member, ExpiresMs: m.ExpiresMs}
	}
	return out, nil
}

// ListConsumers implements loamv1pb.ConsumerServiceServer.
func (c *consumerService) ListConsumers(ctx context.Context, req *loamv1pb.ListConsumersRequest) (*loamv1pb.ListConsumersResponse, error) {
	if err := required("namespace", req.GetNamespace()); err != nil {
		return nil, err
	}
	names, err := c.s.cfg.Meta.ListConsumers(ctx, req.GetNamespace())
	if err != nil {
		return nil, consumerErr(err)
	}
	return &loamv1pb.ListConsumersResponse{Consumers: names}, nil
}
