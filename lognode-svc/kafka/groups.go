package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group requests (OffsetCommit, OffsetFetch, JoinGroup, Heartbeat, LeaveGroup,
// SyncGroup, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete,
// ConsumerGroupHeartbeat, ConsumerGroupDescribe) go to Config.Groups on the group's
// coordinator. A node that is not the coordinator of the request's group (a client
// behind a load balancer reaches any node) forwards the request to the owner over the
// Kafka protocol, authenticated with the client's own API key, and relays the answer. A
// forwarded request is always served where it arrives, so a node whose view of the live
// nodes lags cannot bounce it. A request naming groups of several owners, and ListGroups,
// are served where they arrive.

// groupKeys are the API keys Config.Groups serves.
var groupKeys = map[int16]bool{8: true, 9: true, 11: true, 12: true, 13: true, 14: true, 15: true, 16: true, 42: true, 47: true, 68: true, 69: true}

func isGroupKey(k int16) bool { return groupKeys[k] }

// forwardClientID marks a request one node forwarded to another.
const forwardClientID = "loam-forward"

// groupsOf lists the groups a group request names.
func groupsOf(req kmsg.Request) []string {
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		return []string{r.Group}
	case *kmsg.OffsetFetchRequest:
		if r.Version < 8 {
			return []string{r.Group}
		}
		gs := make([]string, len(r.Groups))
		for i, g := range r.Groups {
			gs[i] = g.Group
		}
		return gs
	case *kmsg.JoinGroupRequest:
		return []string{r.Group}
	case *kmsg.HeartbeatRequest:
		return []string{r.Group}
	case *kmsg.LeaveGroupRequest:
		return []string{r.Group}
	case *kmsg.SyncGroupRequest:
		return []string{r.Group}
	case *kmsg.DescribeGroupsRequest:
		return r.Groups
	case *kmsg.DeleteGroupsRequest:
		return r.Groups
	case *kmsg.OffsetDeleteRequest:
		return []string{r.Group}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return []string{r.Group}
	case *kmsg.ConsumerGroupDescribeRequest:
		return r.Groups
	}
	return nil
}

func (c *conn) group(ctx context.Context, r request) (kmsg.Response, error) {
	g := c.s.cfg.Groups
	if g == nil {
		return nil, closeConn("API key %d: consumer groups are not served by this node", r.kreq.Key())
	}
	if r.clientID != forwardClientID {
		if owner, ok := c.s.soleOwner(ctx, c.ns, groupsOf(r.kreq)); ok && owner.ID != c.s.cfg.NodeID {
			if c.authed && c.key == "" && c.s.cfg.Auth != nil {
				// SCRAM never sends the key, so there is none to log in to the coordinator
				// with: the client reconnects, and FindCoordinator names the coordinator.
				return nil, closeConn("API key %d: group %v is coordinated by %s, and a SCRAM login cannot be forwarded there: connect to it (FindCoordinator names it), or log in with SASL/PLAIN", r.kreq.Key(), groupsOf(r.kreq), owner.ID)
			}
			resp, err := c.s.fwd.forward(ctx, owner.KafkaAddr, c.user, c.key, r.kreq)
			if err != nil {
				return nil, closeConn("forward API key %d to coordinator %s (%s): %v", r.kreq.Key(), owner.ID, owner.KafkaAddr, err)
			}
			return resp, nil
		}
	}
	resp, err := g.Handle(ctx, c.ns, r.kreq)
	if err != nil {
		return nil, closeConn("group handler, API key %d: %v", r.kreq.Key(), err)
	}
	if resp == nil || resp.Key() != r.kreq.Key() {
		return nil, closeConn("group handler answered API key %d with no response of its kind", r.kreq.Key())
	}
	resp.SetVersion(r.kreq.GetVersion())
	return resp, nil
}

// soleOwner is the live node owning every group of gs, if one node owns them all.
func (s *Server) soleOwner(ctx context.Context, ns string, gs []string) (nodeRef, bool) {
	var owner nodeRef
	for i, g := range gs {
		n := s.owner(ctx, groupKey(ns, g))
		if i == 0 {
			owner = nodeRef{ID: n.ID, KafkaAddr: n.KafkaAddr}
		} else if n.ID != owner.ID {
			return nodeRef{}, false
		}
	}
	return owner, len(gs) > 0
}

type nodeRef struct{ ID, KafkaAddr string }

func (n nodeRef) String() string { return fmt.Sprintf("%s@%s", n.ID, n.KafkaAddr) }
