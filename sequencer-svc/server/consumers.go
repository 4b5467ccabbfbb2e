package server

import (
	"context"
	"fmt"
	"time"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
)

// Named consumers (meta/consumer.go): the Node's methods, the Consumers gRPC service, and
// localClient's methods. Forwarding reaches the leader's Consumers service over the
// connection of the Sequencer client it is handed (metapb.ConsumersOf).

// ConsumerHeartbeat proposes a member's heartbeat.
func (n *Node) ConsumerHeartbeat(ctx context.Context, h meta.ConsumerHeartbeat) (meta.ConsumerAssignment, error) {
	if err := meta.CheckConsumerHeartbeat(h); err != nil {
		return meta.ConsumerAssignment{}, err
	}
	res, err := n.propose(ctx, fsm.ConsumerHeartbeat(h))
	if err != nil {
		return meta.ConsumerAssignment{}, err
	}
	return res.Consumer, res.Err
}

// CommitConsumerOffsets proposes a consumer offset commit.
func (n *Node) CommitConsumerOffsets(ctx context.Context, c meta.ConsumerCommit) error {
	if err := meta.CheckConsumerCommit(c); err != nil {
		return err
	}
	res, err := n.propose(ctx, fsm.CommitConsumerOffsets(c))
	if err != nil {
		return err
	}
	return res.Err
}

// DescribeConsumer reads a consumer's state from this node's state machine.
func (n *Node) DescribeConsumer(ctx context.Context, ns, consumer string) (meta.ConsumerState, error) {
	if err := ctxErr(ctx); err != nil {
		return meta.ConsumerState{}, err
	}
	return n.fsm.DescribeConsumer(ns, consumer)
}

// ListConsumers reads a namespace's consumers from this node's state machine.
func (n *Node) ListConsumers(ctx context.Context, ns string) ([]string, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	return n.fsm.ListConsumers(ns)
}

// consumersService serves loam.meta.v1.Consumers.
type consumersService struct {
	metapb.UnimplementedConsumersServer
	n *Node
}

func registerConsumers(s *grpc.Server, n *Node) {
	metapb.RegisterConsumersServer(s, &consumersService{n: n})
}

// consumersCall adapts a Consumers method to the Sequencer-client form forwarding takes.
func consumersCall[Req, Resp any](m func(metapb.ConsumersClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) rpcFn[Req, Resp] {
	return func(s metapb.SequencerClient, ctx context.Context, r Req, opts ...grpc.CallOption) (Resp, error) {
		c, ok := metapb.ConsumersOf(s)
		if !ok {
			var zero Resp
			return zero, fmt.Errorf("%w: no consumers service over this connection", meta.ErrUnavailable)
		}
		return m(c, ctx, r, opts...)
	}
}

var (
	remoteHeartbeat = consumersCall(metapb.ConsumersClient.ConsumerHeartbeat)
	remoteCommit    = consumersCall(metapb.ConsumersClient.CommitConsumerOffsets)
	remoteDescribe  = consumersCall(metapb.ConsumersClient.DescribeConsumer)
	remoteList      = consumersCall(metapb.ConsumersClient.ListConsumers)
)

func heartbeatOf(r *metapb.ConsumerHeartbeatRequest) meta.ConsumerHeartbeat {
	return meta.ConsumerHeartbeat{Namespace: r.GetNamespace(), Consumer: r.GetConsumer(), Stream: r.GetStream(), Member: r.GetMember(),
		Session: time.Duration(r.GetSessionMs()) * time.Millisecond, Leave: r.GetLeave()}
}

func (s *consumersService) ConsumerHeartbeat(ctx context.Context, r *metapb.ConsumerHeartbeatRequest) (*metapb.ConsumerHeartbeatResponse, error) {
	return write(ctx, s.n, r, s.heartbeat, remoteHeartbeat)
}

func (s *consumersService) heartbeat(ctx context.Context, r *metapb.ConsumerHeartbeatRequest) (*metapb.ConsumerHeartbeatResponse, error) {
	a, err := s.n.ConsumerHeartbeat(ctx, heartbeatOf(r))
	if err != nil {
		return nil, err
	}
	return metapb.FromConsumerAssignment(a), nil
}

func (s *consumersService) CommitConsumerOffsets(ctx context.Context, r *metapb.CommitConsumerOffsetsRequest) (*metapb.CommitConsumerOffsetsResponse, error) {
	return write(ctx, s.n, r, s.commit, remoteCommit)
}

func (s *consumersService) commit(ctx context.Context, r *metapb.CommitConsumerOffsetsRequest) (*metapb.CommitConsumerOffsetsResponse, error) {
	if err := s.n.CommitConsumerOffsets(ctx, metapb.ToConsumerCommit(r)); err != nil {
		return nil, err
	}
	return &metapb.CommitConsumerOffsetsResponse{}, nil
}

func (s *consumersService) DescribeConsumer(ctx context.Context, r *metapb.DescribeConsumerRequest) (*metapb.DescribeConsumerResponse, error) {
	return read(ctx, s.n, r, s.describe, remoteDescribe)
}

func (s *consumersService) describe(ctx context.Context, r *metapb.DescribeConsumerRequest) (*metapb.DescribeConsumerResponse, error) {
	st, err := s.n.DescribeConsumer(ctx, r.GetNamespace(), r.GetConsumer())
	if err != nil {
		return nil, err
	}
	return metapb.FromConsumerState(st), nil
}

func (s *consumersService) ListConsumers(ctx context.Context, r *metapb.ListConsumersRequest) (*metapb.ListConsumersResponse, error) {
	return read(ctx, s.n, r, s.list, remoteList)
}

func (s *consumersService) list(ctx context.Context, r *metapb.ListConsumersRequest) (*metapb.ListConsumersResponse, error) {
	names, err := s.n.ListConsumers(ctx, r.GetNamespace())
	if err != nil {
		return nil, err
	}
	return &metapb.ListConsumersResponse{Names: names}, nil
}

func (c localClient) consumers() *consumersService { return &consumersService{n: c.n} }

func (c localClient) ConsumerHeartbeat(ctx context.Context, h meta.ConsumerHeartbeat) (meta.ConsumerAssignment, error) {
	if c.n.IsLeader() {
		if a, err := c.n.ConsumerHeartbeat(ctx, h); direct(err) {
			return a, err
		}
	}
	r, err := routeWrite(ctx, c.n, &metapb.ConsumerHeartbeatRequest{Namespace: h.Namespace, Consumer: h.Consumer, Stream: h.Stream,
		Member: h.Member, SessionMs: h.Session.Milliseconds(), Leave: h.Leave}, c.consumers().heartbeat, remoteHeartbeat)
	if err != nil {
		return meta.ConsumerAssignment{}, err
	}
	return metapb.ToConsumerAssignment(r), nil
}

func (c localClient) CommitConsumerOffsets(ctx context.Context, cc meta.ConsumerCommit) error {
	if c.n.IsLeader() {
		if err := c.n.CommitConsumerOffsets(ctx, cc); direct(err) {
			return err
		}
	}
	_, err := routeWrite(ctx, c.n, metapb.FromConsumerCommit(cc), c.consumers().commit, remoteCommit)
	return err
}

func (c localClient) DescribeConsumer(ctx context.Context, ns, consumer string) (meta.ConsumerState, error) {
	if c.n.leaderReady() {
		return c.n.DescribeConsumer(ctx, ns, consumer)
	}
	r, err := routeRead(ctx, c.n, &metapb.DescribeConsumerRequest{Namespace: ns, Consumer: consumer}, c.consumers().describe, remoteDescribe)
	if err != nil {
		return meta.ConsumerState{}, err
	}
	return metapb.ToConsumerState(r), nil
}

func (c localClient) ListConsumers(ctx context.Context, ns string) ([]string, error) {
	if c.n.leaderReady() {
		return c.n.ListConsumers(ctx, ns)
	}
	r, err := routeRead(ctx, c.n, &metapb.ListConsumersRequest{Namespace: ns}, c.consumers().list, remoteList)
	return r.GetNames(), err
}
