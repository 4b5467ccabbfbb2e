package server

import (
	"context"

	"google.golang.org/grpc"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// The CloudEvents dedup ledger (meta.Client.ClaimEvents, CompleteEvents, ReleaseEvents):
// each call is one Raft proposal on the leader (a follower forwards over the EventLedger
// service); the state lives in the state machine (fsm/cloudevents.go).

// ClaimEvents claims keys (meta.Client.ClaimEvents).
func (n *Node) ClaimEvents(ctx context.Context, c meta.EventClaim) ([]meta.EventClaimAnswer, error) {
	if err := meta.CheckEventClaim(c); err != nil {
		return nil, err
	}
	res, err := n.propose(ctx, fsm.ClaimEvents(c))
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	return res.Events, nil
}

// CompleteEvents marks keys done (meta.Client.CompleteEvents).
func (n *Node) CompleteEvents(ctx context.Context, c meta.EventComplete) error {
	if err := meta.CheckEventWindow(c.Window); err != nil {
		return err
	}
	res, err := n.propose(ctx, fsm.CompleteEvents(c))
	if err != nil {
		return err
	}
	return res.Err
}

// ReleaseEvents drops pending keys (meta.Client.ReleaseEvents).
func (n *Node) ReleaseEvents(ctx context.Context, r meta.EventRelease) error {
	res, err := n.propose(ctx, fsm.ReleaseEvents(r))
	if err != nil {
		return err
	}
	return res.Err
}

// LedgerStats answers the ledger's entries and their bytes in this node's state machine.
func (n *Node) LedgerStats() (entries int, bytes int64, err error) { return n.fsm.LedgerStats() }

// eventLedgerService serves loam.meta.v1.EventLedger.
type eventLedgerService struct {
	metapb.UnimplementedEventLedgerServer
	n *Node
}

func (s *eventLedgerService) ClaimEvents(ctx context.Context, r *metapb.EventClaimCmd) (*metapb.ClaimEventsResponse, error) {
	return authWrite(ctx, s.n, r, s.claim, remoteClaimEvents)
}

func (s *eventLedgerService) claim(ctx context.Context, r *metapb.EventClaimCmd) (*metapb.ClaimEventsResponse, error) {
	c, err := metapb.ToEventClaim(r)
	if err != nil {
		return nil, err
	}
	as, err := s.n.ClaimEvents(ctx, c)
	if err != nil {
		return nil, err
	}
	return metapb.FromEventAnswers(as), nil
}

func remoteClaimEvents(cc grpc.ClientConnInterface, ctx context.Context, r *metapb.EventClaimCmd) (*metapb.ClaimEventsResponse, error) {
	return metapb.NewEventLedgerClient(cc).ClaimEvents(ctx, r)
}

func (s *eventLedgerService) CompleteEvents(ctx context.Context, r *metapb.EventCompleteCmd) (*metapb.CompleteEventsResponse, error) {
	return authWrite(ctx, s.n, r, s.complete, remoteCompleteEvents)
}

func (s *eventLedgerService) complete(ctx context.Context, r *metapb.EventCompleteCmd) (*metapb.CompleteEventsResponse, error) {
	c, err := metapb.ToEventComplete(r)
	if err != nil {
		return nil, err
	}
	return &metapb.CompleteEventsResponse{}, s.n.CompleteEvents(ctx, c)
}

func remoteCompleteEvents(cc grpc.ClientConnInterface, ctx context.Context, r *metapb.EventCompleteCmd) (*metapb.CompleteEventsResponse, error) {
	return metapb.NewEventLedgerClient(cc).CompleteEvents(ctx, r)
}

func (s *eventLedgerService) ReleaseEvents(ctx context.Context, r *metapb.EventReleaseCmd) (*metapb.ReleaseEventsResponse, error) {
	return authWrite(ctx, s.n, r, s.release, remoteReleaseEvents)
}

func (s *eventLedgerService) release(ctx context.Context, r *metapb.EventReleaseCmd) (*metapb.ReleaseEventsResponse, error) {
	rel, err := metapb.ToEventRelease(r)
	if err != nil {
		return nil, err
	}
	return &metapb.ReleaseEventsResponse{}, s.n.ReleaseEvents(ctx, rel)
}

func remoteReleaseEvents(cc grpc.ClientConnInterface, ctx context.Context, r *metapb.EventReleaseCmd) (*metapb.ReleaseEventsResponse, error) {
	return metapb.NewEventLedgerClient(cc).ReleaseEvents(ctx, r)
}

func (c localClient) ledger() *eventLedgerService { return &eventLedgerService{n: c.n} }

func (c localClient) ClaimEvents(ctx context.Context, cl meta.EventClaim) ([]meta.EventClaimAnswer, error) {
	if c.n.IsLeader() {
		if as, err := c.n.ClaimEvents(ctx, cl); direct(err) {
			return as, err
		}
	}
	r, err := routeWriteCC(ctx, c.n, metapb.FromEventClaim(cl), c.ledger().claim, remoteClaimEvents)
	if err != nil {
		return nil, err
	}
	return metapb.ToEventAnswers(r), nil
}

func (c localClient) CompleteEvents(ctx context.Context, cc meta.EventComplete) error {
	if c.n.IsLeader() {
		if err := c.n.CompleteEvents(ctx, cc); direct(err) {
			return err
		}
	}
	_, err := routeWriteCC(ctx, c.n, metapb.FromEventComplete(cc), c.ledger().complete, remoteCompleteEvents)
	return err
}

func (c localClient) ReleaseEvents(ctx context.Context, r meta.EventRelease) error {
	if c.n.IsLeader() {
		if err := c.n.ReleaseEvents(ctx, r); direct(err) {
			return err
		}
	}
	_, err := routeWriteCC(ctx, c.n, metapb.FromEventRelease(r), c.ledger().release, remoteReleaseEvents)
	return err
}
