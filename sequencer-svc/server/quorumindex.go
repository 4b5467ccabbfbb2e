package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// The offset index of quorum streams (meta.QuorumIndexClient): journals append the
// segments they offloaded. A follower forwards the call to the leader.

var _ meta.QuorumIndexClient = localClient{}

// AppendSegments appends offloaded segments to a quorum partition's index
// (meta.QuorumIndexClient). One stamped more than meta.MaxClockAhead ahead of this
// leader's clock is refused before it is proposed.
func (n *Node) AppendSegments(ctx context.Context, a meta.SegmentAppend) error {
	if err := fsm.CheckSegmentAppend(a); err != nil {
		return err
	}
	now, ahead, err := n.checkAhead(ctx, a.StampMs, meta.MaxClockAhead)
	if err != nil {
		return err
	}
	if ahead {
		return fmt.Errorf("append segments %d/%d: stamped %d ms ahead of the leader: %w",
			a.Lease.StreamID, a.Lease.Partition, a.StampMs-now, meta.ErrClockAhead)
	}
	_, err = n.propose(ctx, fsm.AppendSegments(a))
	return err
}

func registerQuorumIndex(s *grpc.Server, n *Node) {
	metapb.RegisterQuorumIndexServer(s, &quorumIndexService{n: n})
}

// quorumIndexService serves loam.meta.v1.QuorumIndex.
type quorumIndexService struct {
	metapb.UnimplementedQuorumIndexServer
	n *Node
}

var remoteAppendSegments ccFn[*metapb.AppendSegmentsRequest, *metapb.AppendSegmentsResponse] = func(cc grpc.ClientConnInterface,
	ctx context.Context, r *metapb.AppendSegmentsRequest) (*metapb.AppendSegmentsResponse, error) {
	return metapb.NewQuorumIndexClient(cc).AppendSegments(ctx, r)
}

func (s *quorumIndexService) AppendSegments(ctx context.Context, r *metapb.AppendSegmentsRequest) (*metapb.AppendSegmentsResponse, error) {
	resp, err := routeWriteCC(viaRPC(ctx), s.n, r, s.appendSegments, remoteAppendSegments)
	return resp, metagrpc.Status(err)
}

func (s *quorumIndexService) appendSegments(ctx context.Context, r *metapb.AppendSegmentsRequest) (*metapb.AppendSegmentsResponse, error) {
	a := fsm.SegmentAppendOf(r.GetAppend())
	a.StampMs = r.GetStampMs()
	if err := s.n.AppendSegments(ctx, a); err != nil {
		return nil, err
	}
	return &metapb.AppendSegmentsResponse{}, nil
}

func (c localClient) AppendSegments(ctx context.Context, a meta.SegmentAppend) error {
	if c.n.IsLeader() {
		if err := c.n.AppendSegments(ctx, a); direct(err) {
			return err
		}
	}
	svc := &quorumIndexService{n: c.n}
	_, err := routeWriteCC(ctx, c.n, &metapb.AppendSegmentsRequest{Append: fsm.AppendSegments(a).GetAppendSegments(), StampMs: a.StampMs},
		svc.appendSegments, remoteAppendSegments)
	return err
}
