package group

import (
	"bytes"
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup: v0-9
//
// Behavior:
// * Joins a classic group, creating it (claimed from the sequencer) when this node does not
//   hold it yet, and waits until the rebalance completes: every known member joined again,
//   or the rebalance timeout (the largest of the members') passed, which drops the members
//   that did not.
// * v4+: a dynamic member without a member id is answered MEMBER_ID_REQUIRED with the id
//   to join with; it holds a place in the group for its session timeout.
// * v5+ static members (group.instance.id): a new member id replaces the instance's old one
//   (whose waiters and later requests get FENCED_INSTANCE_ID); a Stable group keeps its
//   generation and assignments unless the group's protocol would change; a restarted
//   leader gets the members with SkipAssignment (v9+) and must not assign again, an older
//   leader rebalances.
// * A known member of a Stable group that is not the leader and sends the same protocols
//   gets the current generation at once, without a rebalance.
// * Errors: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL (no
//   protocol in common, another protocol type, or a KIP-848 group with members),
//   UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, NOT_COORDINATOR,
//   COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST (metadata above Config.MaxMemberBytes).
//
// Version notes:
// * v1: RebalanceTimeoutMillis (v0: the session timeout)
// * v4: MEMBER_ID_REQUIRED
// * v5: InstanceID
// * v7: ProtocolType in the response
// * v8: Reason (logged)
// * v9: SkipAssignment (a static leader's restart in a Stable group)

func (c *Coordinator) joinGroup(ctx context.Context, ns string, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation, resp.MemberID = -1, req.MemberID
	fail := func(code int16) *kmsg.JoinGroupResponse {
		resp.ErrorCode = code
		return resp
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		rebalance = session
	}
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	size := 0
	for _, p := range req.Protocols {
		size += len(p.Name) + len(p.Metadata)
	}
	switch {
	case req.Group == "" || len(req.Group) > 255:
		return fail(kerr.InvalidGroupID.Code)
	case session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout:
		return fail(kerr.InvalidSessionTimeout.Code)
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return fail(kerr.InconsistentGroupProtocol.Code)
	case size > c.cfg.MaxMemberBytes:
		return fail(kerr.InvalidRequest.Code)
	case req.InstanceID != nil && instance == "":
		return fail(kerr.InvalidRequest.Code)
	}
	g, code := c.acquire(ns, req.Group, true)
	if g == nil {
		return fail(code)
	}
	ch, r := g.join(ctx, req, session, rebalance, instance)
	g.schedule()
	g.mu.Unlock()
	if r != nil {
		return r
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return fail(kerr.RebalanceInProgress.Code)
	}
}

// join runs under g.mu: an answer now, or the channel the completed join answers on.
func (g *group) join(ctx context.Context, req *kmsg.JoinGroupRequest, session, rebalance time.Duration, instance string) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation, resp.MemberID = -1, req.MemberID
	fail := func(code int16) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
		resp.ErrorCode = code
		return nil, resp
	}
	if code := g.load(ctx); code != 0 {
		return fail(code)
	}
	if g.kind == kindConsumer && !g.idle() {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	g.kind = kindClassic
	if req.Reason != nil {
		g.c.log.Debug("kafka group: join", "ns", g.ns, "group", g.id, "member", req.MemberID, "reason", *req.Reason)
	}
	now := g.now()
	var m *member
	switch {
	case req.MemberID == "" && instance != "":
		newID := newMemberID(instance)
		if old := g.members[g.static[instance]]; old != nil {
			// A new incarnation of a static member takes the old one's place.
			g.answerJoinErr(old, kerr.FencedInstanceID.Code)
			g.answerSyncErr(old, kerr.FencedInstanceID.Code)
			delete(g.members, old.id)
			sameType := old.protocolType == req.ProtocolType
			wasLeader := g.leader == old.id
			old.id = newID
			old.protocols, old.protocolType, old.session, old.rebalance = req.Protocols, req.ProtocolType, session, rebalance
			old.clientID, old.host, old.expires = clientID(ctx), clientHost(ctx), now.Add(session)
			g.members[newID], g.static[instance] = old, newID
			if wasLeader {
				g.leader = newID
			}
			// As Kafka: a Stable group keeps its generation when the new incarnation leaves
			// the group's protocol as it is (its metadata may differ: a restarted
			// cooperative member owns nothing yet). A restarted leader gets the members
			// with SkipAssignment (v9+, KIP-814); older leaders rebalance.
			if g.state == stStable && sameType && g.selectProtocol() == g.protocol && (!wasLeader || req.Version >= 9) {
				r := g.joinResponse(old, req.Version)
				r.SkipAssignment = wasLeader
				return nil, r
			}
			m = old
			break
		}
		if len(g.members)+len(g.pending) >= g.c.cfg.MaxMembers {
			return fail(kerr.GroupMaxSizeReached.Code)
		}
		if !g.compatible(req.ProtocolType, req.Protocols, "") {
			return fail(kerr.InconsistentGroupProtocol.Code)
		}
		m = &member{id: newID, instanceID: instance}
		g.members[newID], g.static[instance] = m, newID
	case req.MemberID == "":
		if len(g.members)+len(g.pending) >= g.c.cfg.MaxMembers {
			return fail(kerr.GroupMaxSizeReached.Code)
		}
		if !g.compatible(req.ProtocolType, req.Protocols, "") {
			return fail(kerr.InconsistentGroupProtocol.Code)
		}
		newID := newMemberID(clientPrefix(ctx))
		if req.Version >= 4 {
			g.pending[newID] = now.Add(session)
			resp.MemberID = newID
			return fail(kerr.MemberIDRequired.Code)
		}
		m = &member{id: newID}
		g.members[newID] = m
	default:
		if _, ok := g.pending[req.MemberID]; ok && g.members[req.MemberID] == nil {
			if !g.compatible(req.ProtocolType, req.Protocols, "") {
				return fail(kerr.InconsistentGroupProtocol.Code)
			}
			delete(g.pending, req.MemberID)
			m = &member{id: req.MemberID}
			g.members[m.id] = m
			break
		}
		m = g.members[req.MemberID]
		if instance != "" && g.static[instance] != req.MemberID {
			if g.static[instance] != "" {
				return fail(kerr.FencedInstanceID.Code)
			}
			return fail(kerr.UnknownMemberID.Code)
		}
		if m == nil {
			return fail(kerr.UnknownMemberID.Code)
		}
		if !g.compatible(req.ProtocolType, req.Protocols, m.id) {
			return fail(kerr.InconsistentGroupProtocol.Code)
		}
		same := m.protocolType == req.ProtocolType && sameProtocols(m.protocols, req.Protocols)
		switch {
		case g.state == stCompletingRebalance && same && m.join == nil:
			// A repeat of the join this generation answered: answer it again.
			m.expires = now.Add(session)
			return nil, g.joinResponse(m, req.Version)
		case g.state == stStable && same && m.id != g.leader:
			m.expires = now.Add(session)
			return nil, g.joinResponse(m, req.Version)
		}
	}
	if len(g.members) == 1 || g.state == stEmpty {
		g.protocolType = req.ProtocolType
	}
	m.protocols, m.protocolType, m.session, m.rebalance = req.Protocols, req.ProtocolType, session, rebalance
	m.clientID, m.host = clientID(ctx), clientHost(ctx)
	m.expires = now.Add(session)
	if m.join != nil {
		g.answerJoinErr(m, kerr.RebalanceInProgress.Code)
	}
	m.join, m.joinVersion = make(chan *kmsg.JoinGroupResponse, 1), req.Version
	ch := m.join
	if g.state != stPreparingRebalance {
		g.prepareRebalance()
	}
	g.maybeCompleteJoin(ctx, false)
	return ch, nil
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Metadata, b[i].Metadata) {
			return false
		}
	}
	return true
}

// Client identity: the gateway may put the connection's client id and address in the
// context (WithClient); they are shown by DescribeGroups.
type clientKey struct{}

type clientInfo struct{ id, host string }

// WithClient returns ctx carrying the Kafka client id and host of the connection.
func WithClient(ctx context.Context, clientID, host string) context.Context {
	return context.WithValue(ctx, clientKey{}, clientInfo{clientID, host})
}

func clientID(ctx context.Context) string {
	ci, _ := ctx.Value(clientKey{}).(clientInfo)
	return ci.id
}

func clientHost(ctx context.Context) string {
	ci, _ := ctx.Value(clientKey{}).(clientInfo)
	return ci.host
}

func clientPrefix(ctx context.Context) string {
	if id := clientID(ctx); id != "" {
		return id
	}
	return "member"
}
