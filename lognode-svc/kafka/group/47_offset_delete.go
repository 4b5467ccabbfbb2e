package group

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// OffsetDelete: v0
//
// Behavior:
// * Deletes committed offsets of a group from the sequencer (fenced by the group's epoch).
//   While the group has members, partitions of topics a member subscribes to answer
//   GROUP_SUBSCRIBED_TO_TOPIC and are kept (classic subscriptions are read from the
//   members' ConsumerMemberMetadata; a member metadata that does not decode subscribes to
//   nothing).
// * Errors: GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, NOT_COORDINATOR,
//   COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT (top level); GROUP_SUBSCRIBED_TO_TOPIC,
//   UNKNOWN_TOPIC_OR_PARTITION (per partition).

func (c *Coordinator) offsetDelete(ctx context.Context, ns string, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	if _, err := c.cfg.Meta.DescribeKafkaGroup(ctx, ns, req.Group); isNotFound(err) {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	} else if err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	g, code := c.acquire(ns, req.Group, true)
	if g == nil {
		resp.ErrorCode = code
		return resp
	}
	defer g.mu.Unlock()
	if code := g.load(ctx); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	subscribed := g.subscribedTopics()
	var del []meta.KafkaTopicPartition
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		for j, p := range t.Partitions {
			switch {
			case slices.Contains(subscribed, t.Topic):
				codes[i][j] = kerr.GroupSubscribedToTopic.Code
			case p.Partition < 0:
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			default:
				del = append(del, meta.KafkaTopicPartition{Topic: t.Topic, Partition: p.Partition})
			}
		}
	}
	if len(del) > 0 {
		err := c.cfg.Meta.DeleteKafkaOffsets(ctx, ns, req.Group, g.epoch, del)
		code, lost := metaCode(err)
		if lost {
			g.lose()
		} else if err != nil {
			g.loaded = false
		}
		if code != 0 {
			resp.ErrorCode = code
			return resp
		}
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// subscribedTopics lists the topics the group's members subscribe to, sorted.
func (g *group) subscribedTopics() []string {
	set := map[string]bool{}
	if g.kind == kindClassic && g.protocolType == "consumer" {
		for _, m := range g.members {
			proto := g.protocol
			if proto == "" && len(m.protocols) > 0 {
				proto = m.protocols[0].Name
			}
			topics, _ := SubscribedTopics(m.metadata(proto))
			for _, t := range topics {
				set[t] = true
			}
		}
	}
	if g.cg != nil {
		for _, m := range g.cg.members {
			for _, t := range m.subscribed {
				set[t] = true
			}
			for t := range m.matched {
				set[t] = true
			}
		}
	}
	return sortedKeys(set)
}
