package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup: v0-5
//
// Behavior:
// * Removes members (v3+: several, by member id or group.instance.id) from a classic
//   group; the others rebalance. A member id handed out by MEMBER_ID_REQUIRED and not yet
//   used may leave too.
// * Errors: UNKNOWN_MEMBER_ID (per member from v3), FENCED_INSTANCE_ID (an instance id whose
//   current member id is another), NOT_COORDINATOR.
//
// Version notes:
// * v3: Members, each with InstanceID
// * v5: Reason (logged)

func (c *Coordinator) leaveGroup(ns string, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	answer := func(code int16) *kmsg.LeaveGroupResponse {
		if req.Version < 3 {
			resp.ErrorCode = code
			return resp
		}
		for _, l := range leaving {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = l.MemberID, l.InstanceID, code
			resp.Members = append(resp.Members, rm)
		}
		return resp
	}
	g, code := c.acquire(ns, req.Group, false)
	if g == nil {
		if code == 0 {
			code = kerr.UnknownMemberID.Code
		}
		if code == kerr.NotCoordinator.Code {
			resp.ErrorCode = code
			return resp
		}
		return answer(code)
	}
	defer g.mu.Unlock()
	if g.kind != kindClassic {
		return answer(kerr.UnknownMemberID.Code)
	}
	removed := false
	for _, l := range leaving {
		code := int16(0)
		if l.Reason != nil {
			c.log.Debug("kafka group: leave", "ns", ns, "group", req.Group, "member", l.MemberID, "reason", *l.Reason)
		}
		id := l.MemberID
		if l.InstanceID != nil && *l.InstanceID != "" {
			cur, ok := g.static[*l.InstanceID]
			switch {
			case !ok:
				code = kerr.UnknownMemberID.Code
			case id != "" && id != cur:
				code = kerr.FencedInstanceID.Code
			}
			id = cur
		}
		if code == 0 {
			if m := g.members[id]; m != nil {
				g.remove(m, kerr.UnknownMemberID.Code)
				removed = true
			} else if _, ok := g.pending[id]; ok {
				delete(g.pending, id)
				removed = true
			} else {
				code = kerr.UnknownMemberID.Code
			}
		}
		if req.Version >= 3 {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = l.MemberID, l.InstanceID, code
			resp.Members = append(resp.Members, rm)
		} else {
			resp.ErrorCode = code
		}
	}
	if removed {
		switch g.state {
		case stStable, stCompletingRebalance:
			g.prepareRebalance()
			fallthrough
		case stPreparingRebalance:
			ctx, cancel := g.metaCtx()
			g.maybeCompleteJoin(ctx, false)
			cancel()
		}
		g.schedule()
	}
	return resp
}
