package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup: v0-5
//
// Behavior:
// * In CompletingRebalance, members wait until the leader's SyncGroup brings the
//   assignments; the group is then Stable and every waiting member gets its own (a member
//   the leader left out gets an empty one). In Stable, a member gets its assignment at once.
// * Errors: UNKNOWN_MEMBER_ID (no such member, or the group is not held here or is Empty),
//   FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (a rebalance started),
//   INCONSISTENT_GROUP_PROTOCOL (v5: another protocol type or protocol), INVALID_REQUEST
//   (an assignment above Config.MaxMemberBytes), NOT_COORDINATOR.
//
// Version notes:
// * v3: InstanceID
// * v5: ProtocolType and Protocol in the request (checked) and the response

func (c *Coordinator) syncGroup(ctx context.Context, ns string, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	fail := func(code int16) *kmsg.SyncGroupResponse {
		resp.ErrorCode = code
		return resp
	}
	for _, a := range req.GroupAssignment {
		if len(a.MemberAssignment) > c.cfg.MaxMemberBytes {
			return fail(kerr.InvalidRequest.Code)
		}
	}
	g, code := c.acquire(ns, req.Group, false)
	if g == nil {
		if code == 0 {
			code = kerr.UnknownMemberID.Code
		}
		return fail(code)
	}
	ch, code := g.sync(req)
	g.schedule()
	version := req.Version
	pt, proto := g.protocolType, g.protocol
	g.mu.Unlock()
	if ch == nil {
		return fail(code)
	}
	select {
	case r := <-ch:
		r.Version = version
		if version >= 5 && r.ErrorCode == 0 {
			r.ProtocolType, r.Protocol = strp(pt), strp(proto)
		}
		return r
	case <-ctx.Done():
		return fail(kerr.RebalanceInProgress.Code)
	}
}

func (g *group) sync(req *kmsg.SyncGroupRequest) (chan *kmsg.SyncGroupResponse, int16) {
	m, code := g.classicMember(req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		return nil, code
	}
	if req.ProtocolType != nil && *req.ProtocolType != g.protocolType || req.Protocol != nil && *req.Protocol != g.protocol {
		return nil, kerr.InconsistentGroupProtocol.Code
	}
	m.expires = g.now().Add(m.session)
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	switch g.state {
	case stPreparingRebalance:
		return nil, kerr.RebalanceInProgress.Code
	case stStable:
		r := kmsg.NewPtrSyncGroupResponse()
		r.MemberAssignment = m.assignment
		ch <- r
		return ch, 0
	}
	// CompletingRebalance
	if m.sync != nil {
		g.answerSyncErr(m, kerr.RebalanceInProgress.Code)
	}
	m.sync = ch
	if m.id == g.leader {
		for _, o := range g.members {
			o.assignment = []byte{}
		}
		for _, a := range req.GroupAssignment {
			if o := g.members[a.MemberID]; o != nil {
				o.assignment = a.MemberAssignment
			}
		}
		g.state = stStable
		for _, o := range g.members {
			if o.sync != nil {
				r := kmsg.NewPtrSyncGroupResponse()
				r.MemberAssignment = o.assignment
				o.sync <- r
				o.sync = nil
			}
		}
	}
	return ch, 0
}

// classicMember checks a member's identity and generation in a classic group: NONE and
// the member, or UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID or ILLEGAL_GENERATION.
func (g *group) classicMember(id string, instance *string, generation int32) (*member, int16) {
	if g.kind != kindClassic || g.state == stEmpty {
		return nil, kerr.UnknownMemberID.Code
	}
	if instance != nil && *instance != "" {
		cur, ok := g.static[*instance]
		if ok && cur != id {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := g.members[id]
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if generation != g.generation {
		return nil, kerr.IllegalGeneration.Code
	}
	return m, 0
}
