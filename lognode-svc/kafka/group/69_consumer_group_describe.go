package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe: v0-1 (KIP-848)
//
// Behavior:
// * A KIP-848 group held here answers its state (Empty, Reconciling, Stable), group epoch,
//   assignment epoch, assignor and members, each with its subscription, current
//   assignment and target assignment (topics by id and name).
// * A group only the sequencer knows answers Empty at its stored generation; an unknown
//   group, or a classic group with members, answers GROUP_ID_NOT_FOUND.
// * Errors: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID.
//
// Ignored: IncludeAuthorizedOperations (AuthorizedOperations is not provided).
//
// Version notes:
// * v1: MemberType (1: consumer)

func (c *Coordinator) consumerGroupDescribe(ctx context.Context, ns string, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, c.describeConsumerGroup(ctx, ns, id))
	}
	return resp
}

func (c *Coordinator) describeConsumerGroup(ctx context.Context, ns, id string) kmsg.ConsumerGroupDescribeResponseGroup {
	dg := kmsg.NewConsumerGroupDescribeResponseGroup()
	dg.Group = id
	fail := func(code int16, msg string) kmsg.ConsumerGroupDescribeResponseGroup {
		dg.ErrorCode = code
		if msg != "" {
			dg.ErrorMessage = strp(msg)
		}
		return dg
	}
	if id == "" {
		return fail(kerr.InvalidGroupID.Code, "")
	}
	g, code := c.acquire(ns, id, false)
	if code != 0 {
		return fail(code, "")
	}
	if g != nil {
		defer g.mu.Unlock()
		if g.loaded && !g.idle() {
			if g.kind != kindConsumer {
				return fail(kerr.GroupIDNotFound.Code, "group "+id+" is not a consumer group")
			}
			cg := g.cg
			dg.State, dg.Epoch, dg.AssignmentEpoch, dg.AssignorName = cg.state(g).String(), g.generation, cg.targetEpoch, cg.assignorName()
			for _, mid := range cg.memberIDs() {
				m := cg.members[mid]
				dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost, dm.MemberType = m.id, m.epoch, m.clientID, m.host, 1
				if m.instanceID != "" {
					dm.InstanceID = strp(m.instanceID)
				}
				if m.rack != "" {
					dm.RackID = strp(m.rack)
				}
				dm.SubscribedTopics = append([]string{}, m.subscribed...)
				if m.regex != "" {
					dm.SubscribedTopicRegex = strp(m.regex)
				}
				dm.Assignment = cg.describeAssignment(m.assigned)
				dm.TargetAssignment = cg.describeAssignment(cg.target[mid])
				dg.Members = append(dg.Members, dm)
			}
			return dg
		}
	}
	st, err := c.cfg.Meta.DescribeKafkaGroup(ctx, ns, id)
	switch {
	case isNotFound(err):
		return fail(kerr.GroupIDNotFound.Code, "group "+id+" does not exist")
	case err != nil:
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
	dg.State, dg.Epoch, dg.AssignmentEpoch, dg.AssignorName = stEmpty.String(), st.Generation, st.Generation, "uniform"
	return dg
}

func (cg *consumerGroup) describeAssignment(a assignment) kmsg.Assignment {
	out := kmsg.NewAssignment()
	for _, t := range sortedKeys(a) {
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic, tp.Partitions = cg.topics[t].id, t, append([]int32{}, a[t]...)
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	return out
}
