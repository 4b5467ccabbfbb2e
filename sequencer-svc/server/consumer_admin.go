package server

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
)

// Deleting a named consumer and resetting its offsets (meta/consumer_admin.go): the Node's
// methods, the ConsumerAdmin gRPC service, and localClient's methods.

// DeleteConsumer proposes a consumer's deletion.
func (n *Node) DeleteConsumer(ctx context.Context, ns, consumer string, force bool) error {
	res, err := n.propose(ctx, fsm.DeleteConsumer(ns, consumer, force))
	if err != nil {
		return err
	}
	return res.Err
}

// ResetConsumerOffsets proposes an offset reset. A timestamp reset is resolved to one
// offset per partition here, from this node's index (the leader's), and the command
// carries them: applying it reads no index.
func (n *Node) ResetConsumerOffsets(ctx context.Context, r meta.ConsumerReset) ([]meta.ConsumerOffset, error) {
	if err := meta.CheckConsumerReset(r); err != nil {
		return nil, err
	}
	var resolved []meta.ConsumerOffset
	if r.To == meta.ResetTimestamp {
		s, _, err := n.fsm.GetStream(r.Namespace, r.Stream)
		if err != nil {
			return nil, fmt.Errorf("reset consumer %s/%s offsets on %s: %w", r.Namespace, r.Consumer, r.Stream, err)
		}
		parts := r.Partitions
		if len(parts) == 0 {
			for p := range s.Partitions {
				parts = append(parts, p)
			}
		}
		for _, p := range parts {
			if p >= s.Partitions {
				continue // the command refuses it
			}
			off, err := n.fsm.ResolveTimestamp(s.ID, p, r.TimestampMs)
			if err != nil {
				return nil, fmt.Errorf("reset consumer %s/%s offsets on %s: partition %d: %w", r.Namespace, r.Consumer, r.Stream, p, err)
			}
			resolved = append(resolved, meta.ConsumerOffset{Partition: p, Offset: off})
		}
	}
	res, err := n.propose(ctx, fsm.ResetConsumerOffsets(r, resolved))
	if err != nil {
		return nil, err
	}
	return res.ConsumerOffsets, res.Err
}

// consumerAdminService serves loam.meta.v1.ConsumerAdmin.
type consumerAdminService struct {
	metapb.UnimplementedConsumerAdminServer
	n *Node
}

func registerConsumerAdmin(s *grpc.Server, n *Node) {
	metapb.RegisterConsumerAdminServer(s, &consumerAdminService{n: n})
}

// consumerAdminCall adapts a ConsumerAdmin method to the Sequencer-client form forwarding
// takes.
func consumerAdminCall[Req, Resp any](m func(metapb.ConsumerAdminClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) rpcFn[Req, Resp] {
	return func(s metapb.SequencerClient, ctx context.Context, r Req, opts ...grpc.CallOption) (Resp, error) {
		c, ok := metapb.ConsumerAdminOf(s)
		if !ok {
			var zero Resp
			return zero, fmt.Errorf("%w: no consumer admin service over this connection", meta.ErrUnavailable)
		}
		return m(c, ctx, r, opts...)
	}
}

var (
	remoteDeleteConsumer = consumerAdminCall(metapb.ConsumerAdminClient.DeleteConsumer)
	remoteResetOffsets   = consumerAdminCall(metapb.ConsumerAdminClient.ResetConsumerOffsets)
)

func (s *consumerAdminService) DeleteConsumer(ctx context.Context, r *metapb.DeleteConsumerRequest) (*metapb.DeleteConsumerResponse, error) {
	return write(ctx, s.n, r, s.delete, remoteDeleteConsumer)
}

func (s *consumerAdminService) delete(ctx context.Context, r *metapb.DeleteConsumerRequest) (*metapb.DeleteConsumerResponse, error) {
	if err := s.n.DeleteConsumer(ctx, r.GetNamespace(), r.GetConsumer(), r.GetForce()); err != nil {
		return nil, err
	}
	return &metapb.DeleteConsumerResponse{}, nil
}

func (s *consumerAdminService) ResetConsumerOffsets(ctx context.Context, r *metapb.ResetConsumerOffsetsRequest) (*metapb.ResetConsumerOffsetsResponse, error) {
	return write(ctx, s.n, r, s.reset, remoteResetOffsets)
}

func (s *consumerAdminService) reset(ctx context.Context, r *metapb.ResetConsumerOffsetsRequest) (*metapb.ResetConsumerOffsetsResponse, error) {
	os, err := s.n.ResetConsumerOffsets(ctx, metapb.ToConsumerReset(r))
	if err != nil {
		return nil, err
	}
	return &metapb.ResetConsumerOffsetsResponse{Offsets: metapb.FromResetOffsets(os)}, nil
}

func (c localClient) consumerAdmin() *consumerAdminService { return &consumerAdminService{n: c.n} }

func (c localClient) DeleteConsumer(ctx context.Context, ns, consumer string, force bool) error {
	if c.n.IsLeader() {
		if err := c.n.DeleteConsumer(ctx, ns, consumer, force); direct(err) {
			return err
		}
	}
	_, err := routeWrite(ctx, c.n, &metapb.DeleteConsumerRequest{Namespace: ns, Consumer: consumer, Force: force}, c.consumerAdmin().delete, remoteDeleteConsumer)
	return err
}

func (c localClient) ResetConsumerOffsets(ctx context.Context, r meta.ConsumerReset) ([]meta.ConsumerOffset, error) {
	if c.n.IsLeader() {
		if os, err := c.n.ResetConsumerOffsets(ctx, r); direct(err) {
			return os, err
		}
	}
	resp, err := routeWrite(ctx, c.n, metapb.FromConsumerReset(r), c.consumerAdmin().reset, remoteResetOffsets)
	if err != nil {
		return nil, err
	}
	return metapb.ToResetOffsets(resp.GetOffsets()), nil
}
