package group

import (
	"context"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat: v1 (KIP-848)
//
// Behavior:
// * MemberEpoch 0 joins (the client generates its member id, as v1 requires), -1 leaves,
//   -2 leaves a static member (its instance id is free at once); any other epoch is a
//   heartbeat of a known member at its epoch (or at its previous one while it only owns
//   partitions it was given).
// * Joining, leaving, a change of subscription (names or regex), a session that expired,
//   a member that did not revoke within its rebalance timeout, or a subscribed topic that
//   gained partitions bumps the group epoch (one sequencer command) and recomputes every
//   member's target with the server assignor ("uniform" default, or "range").
// * Each heartbeat reconciles its member: partitions outside its target are revoked first
//   (epoch kept); once the member's Topics no longer list them, it moves to the group
//   epoch and gets the target partitions no other member still holds. The assignment is
//   sent when it changed, or when the member sent its full state.
// * Errors: INVALID_REQUEST (no member id, no subscription on join, a negative rebalance
//   timeout, a subscription above Config.MaxMemberBytes), INVALID_REGULAR_EXPRESSION, UNSUPPORTED_ASSIGNOR, UNKNOWN_MEMBER_ID,
//   FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
//   GROUP_ID_NOT_FOUND (a classic group with members), NOT_COORDINATOR,
//   COORDINATOR_NOT_AVAILABLE.
//
// Ignored: RackID (shown by ConsumerGroupDescribe; the assignors are not rack aware).
//
// Version notes:
// * v0 (server-made member ids, no regex) is not served: kgo pins v1.
// * v1: SubscribedTopicRegex (Go regexp syntax, matched against the whole name)

func (c *Coordinator) consumerGroupHeartbeat(ctx context.Context, ns string, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = strp(msg)
		}
		return resp
	}
	var re *regexp.Regexp
	switch {
	case req.Group == "" || len(req.Group) > 255:
		return fail(kerr.InvalidGroupID.Code, "")
	case req.MemberID == "":
		return fail(kerr.InvalidRequest.Code, "member id must be set")
	case req.MemberEpoch == 0 && req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
		return fail(kerr.InvalidRequest.Code, "a join must name its subscribed topics or regex")
	case req.MemberEpoch == 0 && req.RebalanceTimeoutMillis < 0:
		return fail(kerr.InvalidRequest.Code, "negative rebalance timeout")
	case req.ServerAssignor != nil && *req.ServerAssignor != "" && *req.ServerAssignor != "uniform" && *req.ServerAssignor != "range":
		return fail(kerr.UnsupportedAssignor.Code, "assignors served: uniform, range")
	case req.MemberEpoch < -2:
		return fail(kerr.InvalidRequest.Code, "member epoch below -2")
	}
	size := 0
	for _, t := range req.SubscribedTopicNames {
		size += len(t)
	}
	if req.SubscribedTopicRegex != nil {
		size += len(*req.SubscribedTopicRegex)
	}
	if size > c.cfg.MaxMemberBytes {
		return fail(kerr.InvalidRequest.Code, "subscription above the member size limit")
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *req.SubscribedTopicRegex + ")$"); err != nil {
			return fail(kerr.InvalidRegularExpression.Code, err.Error())
		}
	}
	g, code := c.acquire(ns, req.Group, req.MemberEpoch == 0)
	if g == nil {
		if code == 0 {
			code = kerr.UnknownMemberID.Code
		}
		return fail(code, "")
	}
	defer g.mu.Unlock()
	r := g.consumerHeartbeat(ctx, req, re)
	g.schedule()
	return r
}

func (g *group) consumerHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, re *regexp.Regexp) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = strp(msg)
		}
		return resp
	}
	if code := g.load(ctx); code != 0 {
		return fail(code, "")
	}
	if g.kind == kindClassic && !g.idle() {
		return fail(kerr.GroupIDNotFound.Code, "the group is a classic group with members")
	}
	g.kind = kindConsumer
	if g.cg == nil {
		g.cg = newConsumerGroup()
	}
	cg := g.cg
	now := g.now()
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	m := cg.members[req.MemberID]
	changed := false
	switch {
	case req.MemberEpoch < 0: // leave
		if m == nil && instance != "" {
			m = cg.members[cg.static[instance]]
		}
		if m == nil {
			return fail(kerr.UnknownMemberID.Code, "")
		}
		cg.remove(m)
		if code := g.bump(ctx); code != 0 {
			return fail(code, "")
		}
		resp.MemberID, resp.MemberEpoch = strp(req.MemberID), req.MemberEpoch
		return resp
	case req.MemberEpoch == 0:
		if cur := cg.static[instance]; instance != "" && cur != "" && cur != req.MemberID && cg.members[cur] != nil {
			return fail(kerr.UnreleasedInstanceID.Code, "instance "+instance+" is held by member "+cur)
		}
		if m == nil {
			if len(cg.members) >= g.c.cfg.MaxMembers {
				return fail(kerr.GroupMaxSizeReached.Code, "")
			}
			m = &cmember{id: req.MemberID, instanceID: instance}
			cg.members[m.id] = m
			if instance != "" {
				cg.static[instance] = m.id
			}
		}
		// A (re)join owns nothing.
		m.epoch, m.prevEpoch, m.assigned, m.revoking, m.sent = 0, 0, assignment{}, assignment{}, false
		changed = true
	default:
		if m == nil {
			return fail(kerr.UnknownMemberID.Code, "")
		}
		if req.MemberEpoch != m.epoch && (req.MemberEpoch != m.prevEpoch || !g.ownsOnly(m, req.Topics)) {
			return fail(kerr.FencedMemberEpoch.Code, "")
		}
	}
	m.expires = now.Add(g.c.cfg.ConsumerSessionTimeout)
	m.clientID, m.host = clientID(ctx), clientHost(ctx)
	if req.RackID != nil {
		m.rack = *req.RackID
	}
	if req.RebalanceTimeoutMillis > 0 {
		m.rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != "" && *req.ServerAssignor != m.assignor {
		m.assignor = *req.ServerAssignor
		if cg.assignor != m.assignor {
			cg.assignor, changed = m.assignor, true
		}
	}
	if req.SubscribedTopicNames != nil {
		subs := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(subs)
		subs = slices.Compact(subs)
		if !slices.Equal(subs, m.subscribed) {
			m.subscribed, changed = subs, true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex, m.re, m.matched, changed = *req.SubscribedTopicRegex, re, nil, true
	}
	// Topics the member owns now: what it gave up is no longer pending.
	if req.Topics != nil {
		owned := assignment{}
		for _, t := range req.Topics {
			if name, ok := cg.ids[t.TopicID]; ok {
				for _, p := range t.Partitions {
					owned.add(name, p)
				}
			}
		}
		for _, t := range sortedKeys(m.revoking) {
			for _, p := range slices.Clone(m.revoking[t]) {
				if !owned.has(t, p) {
					m.revoking.del(t, p)
				}
			}
		}
	}
	if changed || now.Sub(cg.refreshed) >= g.c.cfg.TopicRefresh {
		if g.refreshTopics(ctx) {
			changed = true
		}
	}
	if changed || cg.targetEpoch != g.generation {
		if code := g.bump(ctx); code != 0 {
			return fail(code, "")
		}
	}
	g.reconcile(m)
	resp.MemberID, resp.MemberEpoch = strp(m.id), m.epoch
	resp.HeartbeatIntervalMillis = int32(g.c.cfg.ConsumerHeartbeatInterval.Milliseconds())
	full := req.Topics != nil && req.SubscribedTopicNames != nil
	if !m.sent || full {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		for _, t := range sortedKeys(m.assigned) {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = cg.topics[t].id, slices.Clone(m.assigned[t])
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
		m.sent = true
	}
	return resp
}

// ownsOnly: topics (nil: as last sent) holds only partitions m was given.
func (g *group) ownsOnly(m *cmember, topics []kmsg.ConsumerGroupHeartbeatRequestTopic) bool {
	for _, t := range topics {
		name, ok := g.cg.ids[t.TopicID]
		if !ok {
			return false
		}
		for _, p := range t.Partitions {
			if !m.assigned.has(name, p) && !m.revoking.has(name, p) {
				return false
			}
		}
	}
	return true
}
