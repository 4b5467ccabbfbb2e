package group

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// DescribeGroups: v0-6
//
// Behavior:
// * A group this node holds answers its state, protocol type, protocol and members (each
//   with its metadata of the chosen protocol and its assignment). A KIP-848 group answers
//   its members without metadata or assignment (ConsumerGroupDescribe has them).
// * A group only the sequencer knows (no member joined since this node took it) answers
//   Empty; an unknown group answers Dead (v6: with GROUP_ID_NOT_FOUND).
// * Errors: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID.
//
// Ignored: IncludeAuthorizedOperations (AuthorizedOperations is always -2147483648, not
// provided).
//
// Version notes:
// * v3: AuthorizedOperations
// * v4: InstanceID of members
// * v6: ErrorMessage, GROUP_ID_NOT_FOUND for unknown groups

func (c *Coordinator) describeGroups(ctx context.Context, ns string, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, c.describeGroup(ctx, ns, id, req.Version))
	}
	return resp
}

func (c *Coordinator) describeGroup(ctx context.Context, ns, id string, version int16) kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.Group = id
	fail := func(code int16, msg string) kmsg.DescribeGroupsResponseGroup {
		dg.ErrorCode = code
		if version >= 6 && msg != "" {
			dg.ErrorMessage = strp(msg)
		}
		return dg
	}
	if id == "" {
		return fail(kerr.InvalidGroupID.Code, "empty group id")
	}
	g, code := c.acquire(ns, id, false)
	if code != 0 {
		return fail(code, "")
	}
	if g != nil {
		defer g.mu.Unlock()
		if g.loaded && !g.idle() {
			if g.kind == kindConsumer {
				dg.State, dg.ProtocolType, dg.Protocol = g.cg.state(g).String(), "consumer", g.cg.assignorName()
				for _, mid := range g.cg.memberIDs() {
					m := g.cg.members[mid]
					dm := kmsg.NewDescribeGroupsResponseGroupMember()
					dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.host
					if m.instanceID != "" {
						dm.InstanceID = strp(m.instanceID)
					}
					dg.Members = append(dg.Members, dm)
				}
				return dg
			}
			dg.State, dg.ProtocolType, dg.Protocol = g.state.String(), g.protocolType, g.protocol
			if g.state == stPreparingRebalance {
				dg.Protocol = ""
			}
			for _, mid := range sortedKeys(g.members) {
				m := g.members[mid]
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.host
				if m.instanceID != "" {
					dm.InstanceID = strp(m.instanceID)
				}
				if g.state == stStable || g.state == stCompletingRebalance {
					dm.ProtocolMetadata = m.metadata(g.protocol)
				}
				if g.state == stStable {
					dm.MemberAssignment = m.assignment
				}
				dg.Members = append(dg.Members, dm)
			}
			return dg
		}
	}
	st, err := c.cfg.Meta.DescribeKafkaGroup(ctx, ns, id)
	switch {
	case isNotFound(err):
		dg.State = stDead.String()
		if version >= 6 {
			return fail(kerr.GroupIDNotFound.Code, "group "+id+" does not exist")
		}
		return dg
	case err != nil:
		c.log.Warn("kafka group: describe", "ns", ns, "group", id, "err", err)
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
	dg.State, dg.ProtocolType = stEmpty.String(), st.ProtocolType
	return dg
}

func isNotFound(err error) bool {
	return errors.Is(err, meta.ErrKafkaGroupNotFound)
}
