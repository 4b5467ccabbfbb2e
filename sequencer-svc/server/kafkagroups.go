package server

import (
	"context"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
)

// Kafka consumer groups (meta/kafkagroup.go): the Node's methods, the KafkaGroups gRPC
// service, and localClient's methods. Forwarding reaches the leader's KafkaGroups service
// over the peer connection (ccFn).

// AdvanceKafkaGroup proposes a group's next generation.
func (n *Node) AdvanceKafkaGroup(ctx context.Context, ns, group string, epoch uint64, protocolType string) (meta.KafkaGroupGeneration, error) {
	if err := meta.CheckKafkaGroupID(group); err != nil {
		return meta.KafkaGroupGeneration{}, err
	}
	res, err := n.propose(ctx, fsm.AdvanceKafkaGroup(ns, group, epoch, protocolType))
	if err != nil {
		return meta.KafkaGroupGeneration{}, err
	}
	return res.KafkaGroup, res.Err
}

// CommitKafkaOffsets proposes a group offset commit.
func (n *Node) CommitKafkaOffsets(ctx context.Context, c meta.KafkaOffsetCommit) error {
	if err := meta.CheckKafkaOffsetCommit(c); err != nil {
		return err
	}
	res, err := n.propose(ctx, fsm.CommitKafkaOffsets(c))
	if err != nil {
		return err
	}
	return res.Err
}

// DeleteKafkaOffsets proposes dropping offsets of a group.
func (n *Node) DeleteKafkaOffsets(ctx context.Context, ns, group string, epoch uint64, parts []meta.KafkaTopicPartition) error {
	res, err := n.propose(ctx, fsm.DeleteKafkaOffsets(ns, group, epoch, parts))
	if err != nil {
		return err
	}
	return res.Err
}

// DeleteKafkaGroup proposes dropping a group.
func (n *Node) DeleteKafkaGroup(ctx context.Context, ns, group string, epoch uint64) error {
	res, err := n.propose(ctx, fsm.DeleteKafkaGroup(ns, group, epoch))
	if err != nil {
		return err
	}
	return res.Err
}

// DescribeKafkaGroup reads a group from this node's state machine.
func (n *Node) DescribeKafkaGroup(ctx context.Context, ns, group string) (meta.KafkaGroupState, error) {
	if err := ctxErr(ctx); err != nil {
		return meta.KafkaGroupState{}, err
	}
	return n.fsm.DescribeKafkaGroup(ns, group)
}

// ListKafkaGroups reads a namespace's groups from this node's state machine.
func (n *Node) ListKafkaGroups(ctx context.Context, ns string) ([]meta.KafkaGroupState, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	return n.fsm.ListKafkaGroups(ns)
}

// kafkaGroupsService serves loam.meta.v1.KafkaGroups.
type kafkaGroupsService struct {
	metapb.UnimplementedKafkaGroupsServer
	n *Node
}

// registerKafkaGroups serves loam.meta.v1.KafkaGroups of n on s.
func registerKafkaGroups(s *grpc.Server, n *Node) {
	metapb.RegisterKafkaGroupsServer(s, &kafkaGroupsService{n: n})
}

func kgCall[Req, Resp any](m func(metapb.KafkaGroupsClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) ccFn[Req, Resp] {
	return func(cc grpc.ClientConnInterface, ctx context.Context, r Req) (Resp, error) {
		return m(metapb.NewKafkaGroupsClient(cc), ctx, r)
	}
}

var (
	remoteKafkaAdvance       = kgCall(metapb.KafkaGroupsClient.AdvanceKafkaGroup)
	remoteKafkaCommit        = kgCall(metapb.KafkaGroupsClient.CommitKafkaOffsets)
	remoteKafkaDeleteOffsets = kgCall(metapb.KafkaGroupsClient.DeleteKafkaOffsets)
	remoteKafkaDeleteGroup   = kgCall(metapb.KafkaGroupsClient.DeleteKafkaGroup)
	remoteKafkaDescribe      = kgCall(metapb.KafkaGroupsClient.DescribeKafkaGroup)
	remoteKafkaList          = kgCall(metapb.KafkaGroupsClient.ListKafkaGroups)
)

func kgWrite[Req, Resp any](ctx context.Context, n *Node, req Req, local func(context.Context, Req) (Resp, error), remote ccFn[Req, Resp]) (Resp, error) {
	resp, err := routeWriteCC(viaRPC(ctx), n, req, local, remote)
	return resp, metagrpc.Status(err)
}

func kgRead[Req, Resp any](ctx context.Context, n *Node, req Req, local func(context.Context, Req) (Resp, error), remote ccFn[Req, Resp]) (Resp, error) {
	resp, err := routeReadCC(viaRPC(ctx), n, req, local, remote)
	return resp, metagrpc.Status(err)
}

func (s *kafkaGroupsService) AdvanceKafkaGroup(ctx context.Context, r *metapb.AdvanceKafkaGroupRequest) (*metapb.AdvanceKafkaGroupResponse, error) {
	return kgWrite(ctx, s.n, r, s.advance, remoteKafkaAdvance)
}

func (s *kafkaGroupsService) advance(ctx context.Context, r *metapb.AdvanceKafkaGroupRequest) (*metapb.AdvanceKafkaGroupResponse, error) {
	g, err := s.n.AdvanceKafkaGroup(ctx, r.GetNamespace(), r.GetGroup(), r.GetEpoch(), r.GetProtocolType())
	if err != nil {
		return nil, err
	}
	return &metapb.AdvanceKafkaGroupResponse{Generation: g.Generation, Epoch: g.Epoch}, nil
}

func (s *kafkaGroupsService) CommitKafkaOffsets(ctx context.Context, r *metapb.CommitKafkaOffsetsRequest) (*metapb.CommitKafkaOffsetsResponse, error) {
	return kgWrite(ctx, s.n, r, s.commit, remoteKafkaCommit)
}

func (s *kafkaGroupsService) commit(ctx context.Context, r *metapb.CommitKafkaOffsetsRequest) (*metapb.CommitKafkaOffsetsResponse, error) {
	if err := s.n.CommitKafkaOffsets(ctx, metapb.ToKafkaOffsetCommit(r)); err != nil {
		return nil, err
	}
	return &metapb.CommitKafkaOffsetsResponse{}, nil
}

func (s *kafkaGroupsService) DeleteKafkaOffsets(ctx context.Context, r *metapb.DeleteKafkaOffsetsRequest) (*metapb.DeleteKafkaOffsetsResponse, error) {
	return kgWrite(ctx, s.n, r, s.deleteOffsets, remoteKafkaDeleteOffsets)
}

func (s *kafkaGroupsService) deleteOffsets(ctx context.Context, r *metapb.DeleteKafkaOffsetsRequest) (*metapb.DeleteKafkaOffsetsResponse, error) {
	if err := s.n.DeleteKafkaOffsets(ctx, r.GetNamespace(), r.GetGroup(), r.GetEpoch(), metapb.ToKafkaTopicPartitions(r.GetPartitions())); err != nil {
		return nil, err
	}
	return &metapb.DeleteKafkaOffsetsResponse{}, nil
}

func (s *kafkaGroupsService) DeleteKafkaGroup(ctx context.Context, r *metapb.DeleteKafkaGroupRequest) (*metapb.DeleteKafkaGroupResponse, error) {
	return kgWrite(ctx, s.n, r, s.deleteGroup, remoteKafkaDeleteGroup)
}

func (s *kafkaGroupsService) deleteGroup(ctx context.Context, r *metapb.DeleteKafkaGroupRequest) (*metapb.DeleteKafkaGroupResponse, error) {
	if err := s.n.DeleteKafkaGroup(ctx, r.GetNamespace(), r.GetGroup(), r.GetEpoch()); err != nil {
		return nil, err
	}
	return &metapb.DeleteKafkaGroupResponse{}, nil
}

func (s *kafkaGroupsService) DescribeKafkaGroup(ctx context.Context, r *metapb.DescribeKafkaGroupRequest) (*metapb.DescribeKafkaGroupResponse, error) {
	return kgRead(ctx, s.n, r, s.describe, remoteKafkaDescribe)
}

func (s *kafkaGroupsService) describe(ctx context.Context, r *metapb.DescribeKafkaGroupRequest) (*metapb.DescribeKafkaGroupResponse, error) {
	st, err := s.n.DescribeKafkaGroup(ctx, r.GetNamespace(), r.GetGroup())
	if err != nil {
		return nil, err
	}
	return metapb.FromKafkaGroupState(st), nil
}

func (s *kafkaGroupsService) ListKafkaGroups(ctx context.Context, r *metapb.ListKafkaGroupsRequest) (*metapb.ListKafkaGroupsResponse, error) {
	return kgRead(ctx, s.n, r, s.list, remoteKafkaList)
}

func (s *kafkaGroupsService) list(ctx context.Context, r *metapb.ListKafkaGroupsRequest) (*metapb.ListKafkaGroupsResponse, error) {
	gs, err := s.n.ListKafkaGroups(ctx, r.GetNamespace())
	if err != nil {
		return nil, err
	}
	out := &metapb.ListKafkaGroupsResponse{Groups: make([]*metapb.DescribeKafkaGroupResponse, len(gs))}
	for i, g := range gs {
		out.Groups[i] = metapb.FromKafkaGroupState(g)
	}
	return out, nil
}

func (c localClient) kafkaGroups() *kafkaGroupsService { return &kafkaGroupsService{n: c.n} }

func (c localClient) AdvanceKafkaGroup(ctx context.Context, ns, group string, epoch uint64, protocolType string) (meta.KafkaGroupGeneration, error) {
	if c.n.IsLeader() {
		if g, err := c.n.AdvanceKafkaGroup(ctx, ns, group, epoch, protocolType); direct(err) {
			return g, err
		}
	}
	r, err := routeWriteCC(ctx, c.n, &metapb.AdvanceKafkaGroupRequest{Namespace: ns, Group: group, Epoch: epoch, ProtocolType: protocolType},
		c.kafkaGroups().advance, remoteKafkaAdvance)
	if err != nil {
		return meta.KafkaGroupGeneration{}, err
	}
	return meta.KafkaGroupGeneration{Generation: r.GetGeneration(), Epoch: r.GetEpoch()}, nil
}

func (c localClient) CommitKafkaOffsets(ctx context.Context, cc meta.KafkaOffsetCommit) error {
	if c.n.IsLeader() {
		if err := c.n.CommitKafkaOffsets(ctx, cc); direct(err) {
			return err
		}
	}
	_, err := routeWriteCC(ctx, c.n, metapb.FromKafkaOffsetCommit(cc), c.kafkaGroups().commit, remoteKafkaCommit)
	return err
}

func (c localClient) DeleteKafkaOffsets(ctx context.Context, ns, group string, epoch uint64, parts []meta.KafkaTopicPartition) error {
	if c.n.IsLeader() {
		if err := c.n.DeleteKafkaOffsets(ctx, ns, group, epoch, parts); direct(err) {
			return err
		}
	}
	_, err := routeWriteCC(ctx, c.n, &metapb.DeleteKafkaOffsetsRequest{Namespace: ns, Group: group, Epoch: epoch,
		Partitions: metapb.FromKafkaTopicPartitions(parts)}, c.kafkaGroups().deleteOffsets, remoteKafkaDeleteOffsets)
	return err
}

func (c localClient) DeleteKafkaGroup(ctx context.Context, ns, group string, epoch uint64) error {
	if c.n.IsLeader() {
		if err := c.n.DeleteKafkaGroup(ctx, ns, group, epoch); direct(err) {
			return err
		}
	}
	_, err := routeWriteCC(ctx, c.n, &metapb.DeleteKafkaGroupRequest{Namespace: ns, Group: group, Epoch: epoch},
		c.kafkaGroups().deleteGroup, remoteKafkaDeleteGroup)
	return err
}

func (c localClient) DescribeKafkaGroup(ctx context.Context, ns, group string) (meta.KafkaGroupState, error) {
	if c.n.leaderReady() {
		return c.n.DescribeKafkaGroup(ctx, ns, group)
	}
	r, err := routeReadCC(ctx, c.n, &metapb.DescribeKafkaGroupRequest{Namespace: ns, Group: group}, c.kafkaGroups().describe, remoteKafkaDescribe)
	if err != nil {
		return meta.KafkaGroupState{}, err
	}
	return metapb.ToKafkaGroupState(r), nil
}

func (c localClient) ListKafkaGroups(ctx context.Context, ns string) ([]meta.KafkaGroupState, error) {
	if c.n.leaderReady() {
		return c.n.ListKafkaGroups(ctx, ns)
	}
	r, err := routeReadCC(ctx, c.n, &metapb.ListKafkaGroupsRequest{Namespace: ns}, c.kafkaGroups().list, remoteKafkaList)
	if err != nil {
		return nil, err
	}
	out := make([]meta.KafkaGroupState, len(r.GetGroups()))
	for i, g := range r.GetGroups() {
		out[i] = metapb.ToKafkaGroupState(g)
	}
	return out, nil
}
