package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat: v0-4
//
// Behavior:
// * Renews a classic member's session. In PreparingRebalance it answers
//   REBALANCE_IN_PROGRESS (the member must join again); in CompletingRebalance and Stable,
//   NONE.
// * Errors: UNKNOWN_MEMBER_ID (no such member, or the group is not held here or is Empty),
//   FENCED_INSTANCE_ID, ILLEGAL_GENERATION, NOT_COORDINATOR.
//
// Version notes:
// * v3: InstanceID

func (c *Coordinator) heartbeat(ns string, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	g, code := c.acquire(ns, req.Group, false)
	if g == nil {
		if code == 0 {
			code = kerr.UnknownMemberID.Code
		}
		resp.ErrorCode = code
		return resp
	}
	defer g.mu.Unlock()
	m, code := g.classicMember(req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	m.expires = g.now().Add(m.session)
	g.schedule()
	if g.state == stPreparingRebalance {
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	}
	return resp
}
