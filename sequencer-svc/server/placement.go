package server

import (
	"context"

	"google.golang.org/grpc"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Quorum placement (meta/placement.go): the Node's methods, the JournalPlacement gRPC
// service, and localClient's methods. Forwarding reaches the leader's JournalPlacement
// service over the peer connection (ccFn). The controller that proposes journals and
// membership changes is placement_controller.go.

// CreateJournal proposes recording a journal.
func (n *Node) CreateJournal(ctx context.Context, j meta.Journal) (meta.Journal, error) {
	if err := meta.CheckJournalID(j.ID); err != nil {
		return meta.Journal{}, err
	}
	if err := meta.CheckJournalMembers(j.Members); err != nil {
		return meta.Journal{}, err
	}
	res, err := n.propose(ctx, fsm.CreateJournal(j))
	if err != nil {
		return meta.Journal{}, err
	}
	return res.Journal, res.Err
}

// SetJournalMembers proposes a journal's membership change.
func (n *Node) SetJournalMembers(ctx context.Context, id string, epoch uint64, members []meta.JournalMember) (meta.Journal, error) {
	if err := meta.CheckJournalMembers(members); err != nil {
		return meta.Journal{}, err
	}
	res, err := n.propose(ctx, fsm.SetJournalMembers(id, epoch, members))
	if err != nil {
		return meta.Journal{}, err
	}
	return res.Journal, res.Err
}

// AssignJournalPartitions proposes moving partitions of a quorum stream to a journal.
func (n *Node) AssignJournalPartitions(ctx context.Context, streamID uint64, partitions []int32, journal string) error {
	res, err := n.propose(ctx, fsm.AssignJournalPartitions(streamID, partitions, journal))
	if err != nil {
		return err
	}
	return res.Err
}

// SealJournalMove proposes recording a move's seal.
func (n *Node) SealJournalMove(ctx context.Context, m meta.JournalMove) error {
	if err := meta.CheckProducerCarry(m.Producers); err != nil {
		return err
	}
	res, err := n.propose(ctx, fsm.SealJournalMove(m))
	if err != nil {
		return err
	}
	return res.Err
}

// CompleteJournalMove proposes completing a sealed move.
func (n *Node) CompleteJournalMove(ctx context.Context, streamID uint64, partition int32, journal string, end int64) error {
	res, err := n.propose(ctx, fsm.CompleteJournalMove(streamID, partition, journal, end))
	if err != nil {
		return err
	}
	return res.Err
}

// ListJournals reads the placement from this node's state machine.
func (n *Node) ListJournals(ctx context.Context) (meta.Placement, error) {
	if err := ctxErr(ctx); err != nil {
		return meta.Placement{}, err
	}
	return n.fsm.ListJournals()
}

// placementService serves loam.meta.v1.JournalPlacement.
type placementService struct {
	metapb.UnimplementedJournalPlacementServer
	n *Node
}

// registerPlacement serves loam.meta.v1.JournalPlacement of n on s.
func registerPlacement(s *grpc.Server, n *Node) {
	metapb.RegisterJournalPlacementServer(s, &placementService{n: n})
}

func jpCall[Req, Resp any](m func(metapb.JournalPlacementClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) ccFn[Req, Resp] {
	return func(cc grpc.ClientConnInterface, ctx context.Context, r Req) (Resp, error) {
		return m(metapb.NewJournalPlacementClient(cc), ctx, r)
	}
}

var (
	remoteCreateJournal = jpCall(metapb.JournalPlacementClient.CreateJournal)
	remoteSetMembers    = jpCall(metapb.JournalPlacementClient.SetJournalMembers)
	remoteAssignParts   = jpCall(metapb.JournalPlacementClient.AssignJournalPartitions)
	remoteListJournals  = jpCall(metapb.JournalPlacementClient.ListJournals)
	remoteSealMove      = jpCall(metapb.JournalPlacementClient.SealJournalMove)
	remoteCompleteMove  = jpCall(metapb.JournalPlacementClient.CompleteJournalMove)
)

func (s *placementService) SealJournalMove(ctx context.Context, r *metapb.SealJournalMoveRequest) (*metapb.SealJournalMoveResponse, error) {
	resp, err := routeWriteCC(viaRPC(ctx), s.n, r, s.sealMove, remoteSealMove)
	return resp, metagrpc.Status(err)
}

func (s *placementService) sealMove(ctx context.Context, r *metapb.SealJournalMoveRequest) (*metapb.SealJournalMoveResponse, error) {
	if err := s.n.SealJournalMove(ctx, metapb.ToJournalMove(r.GetMove())); err != nil {
		return nil, err
	}
	return &metapb.SealJournalMoveResponse{}, nil
}

func (s *placementService) CompleteJournalMove(ctx context.Context, r *metapb.CompleteJournalMoveRequest) (*metapb.CompleteJournalMoveResponse, error) {
	resp, err := routeWriteCC(viaRPC(ctx), s.n, r, s.completeMove, remoteCompleteMove)
	return resp, metagrpc.Status(err)
}

func (s *placementService) completeMove(ctx context.Context, r *metapb.CompleteJournalMoveRequest) (*metapb.CompleteJournalMoveResponse, error) {
	if err := s.n.CompleteJournalMove(ctx, r.GetStreamId(), r.GetPartition(), r.GetJournal(), r.GetEnd()); err != nil {
		return nil, err
	}
	return &metapb.CompleteJournalMoveResponse{}, nil
}

func (s *placementService) CreateJournal(ctx context.Context, r *metapb.CreateJournalRequest) (*metapb.CreateJournalResponse, error) {
	resp, err := routeWriteCC(viaRPC(ctx), s.n, r, s.create, remoteCreateJournal)
	return resp, metagrpc.Status(err)
}

func (s *placementService) create(ctx context.Context, r *metapb.CreateJournalRequest) (*metapb.CreateJournalResponse, error) {
	j, err := s.n.CreateJournal(ctx, metapb.ToJournal(r.GetJournal()))
	if err != nil {
		return nil, err
	}
	return &metapb.CreateJournalResponse{Journal: metapb.FromJournal(j)}, nil
}

func (s *placementService) SetJournalMembers(ctx context.Context, r *metapb.SetJournalMembersRequest) (*metapb.SetJournalMembersResponse, error) {
	resp, err := routeWriteCC(viaRPC(ctx), s.n, r, s.setMembers, remoteSetMembers)
	return resp, metagrpc.Status(err)
}

func (s *placementService) setMembers(ctx context.Context, r *metapb.SetJournalMembersRequest) (*metapb.SetJournalMembersResponse, error) {
	j, err := s.n.SetJournalMembers(ctx, r.GetId(), r.GetEpoch(), metapb.ToJournalMembers(r.GetMembers()))
	if err != nil {
		return nil, err
	}
	return &metapb.SetJournalMembersResponse{Journal: metapb.FromJournal(j)}, nil
}

func (s *placementService) AssignJournalPartitions(ctx context.Context, r *metapb.AssignJournalPartitionsRequest) (*metapb.AssignJournalPartitionsResponse, error) {
	resp, err := routeWriteCC(viaRPC(ctx), s.n, r, s.assign, remoteAssignParts)
	return resp, metagrpc.Status(err)
}

func (s *placementService) assign(ctx context.Context, r *metapb.AssignJournalPartitionsRequest) (*metapb.AssignJournalPartitionsResponse, error) {
	if err := s.n.AssignJournalPartitions(ctx, r.GetStreamId(), r.GetPartitions(), r.GetJournal()); err != nil {
		return nil, err
	}
	return &metapb.AssignJournalPartitionsResponse{}, nil
}

func (s *placementService) ListJournals(ctx context.Context, r *metapb.ListJournalsRequest) (*metapb.ListJournalsResponse, error) {
	resp, err := routeReadCC(viaRPC(ctx), s.n, r, s.list, remoteListJournals)
	return resp, metagrpc.Status(err)
}

func (s *placementService) list(ctx context.Context, _ *metapb.ListJournalsRequest) (*metapb.ListJournalsResponse, error) {
	p, err := s.n.ListJournals(ctx)
	if err != nil {
		return nil, err
	}
	return metapb.FromPlacement(p), nil
}

func (c localClient) placement() *placementService { return &placementService{n: c.n} }

func (c localClient) CreateJournal(ctx context.Context, j meta.Journal) (meta.Journal, error) {
	if c.n.IsLeader() {
		if out, err := c.n.CreateJournal(ctx, j); direct(err) {
			return out, err
		}
	}
	r, err := routeWriteCC(ctx, c.n, &metapb.CreateJournalRequest{Journal: metapb.FromJournal(j)}, c.placement().create, remoteCreateJournal)
	if err != nil {
		return meta.Journal{}, err
	}
	return metapb.ToJournal(r.GetJournal()), nil
}

func (c localClient) SetJournalMembers(ctx context.Context, id string, epoch uint64, members []meta.JournalMember) (meta.Journal, error) {
	if c.n.IsLeader() {
		if out, err := c.n.SetJournalMembers(ctx, id, epoch, members); direct(err) {
			return out, err
		}
	}
	r, err := routeWriteCC(ctx, c.n, &metapb.SetJournalMembersRequest{Id: id, Epoch: epoch, Members: metapb.FromJournalMembers(members)},
		c.placement().setMembers, remoteSetMembers)
	if err != nil {
		return meta.Journal{}, err
	}
	return metapb.ToJournal(r.GetJournal()), nil
}

func (c localClient) AssignJournalPartitions(ctx context.Context, streamID uint64, partitions []int32, journal string) error {
	if c.n.IsLeader() {
		if err := c.n.AssignJournalPartitions(ctx, streamID, partitions, journal); direct(err) {
			return err
		}
	}
	_, err := routeWriteCC(ctx, c.n, &metapb.AssignJournalPartitionsRequest{StreamId: streamID, Partitions: partitions, Journal: journal},
		c.placement().assign, remoteAssignParts)
	return err
}

func (c localClient) ListJournals(ctx context.Context) (meta.Placement, error) {
	if c.n.leaderReady() {
		return c.n.ListJournals(ctx)
	}
	r, err := routeReadCC(ctx, c.n, &metapb.ListJournalsRequest{}, c.placement().list, remoteListJournals)
	if err != nil {
		return meta.Placement{}, err
	}
	return metapb.ToPlacement(r), nil
}

func (c localClient) SealJournalMove(ctx context.Context, m meta.JournalMove) error {
	if c.n.IsLeader() {
		if err := c.n.SealJournalMove(ctx, m); direct(err) {
			return err
		}
	}
	_, err := routeWriteCC(ctx, c.n, &metapb.SealJournalMoveRequest{Move: metapb.FromJournalMove(m)}, c.placement().sealMove, remoteSealMove)
	return err
}

func (c localClient) CompleteJournalMove(ctx context.Context, streamID uint64, partition int32, journal string, end int64) error {
	if c.n.IsLeader() {
		if err := c.n.CompleteJournalMove(ctx, streamID, partition, journal, end); direct(err) {
			return err
		}
	}
	_, err := routeWriteCC(ctx, c.n, &metapb.CompleteJournalMoveRequest{StreamId: streamID, Partition: partition, Journal: journal, End: end},
		c.placement().completeMove, remoteCompleteMove)
	return err
}
