package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// OffsetFetch: v0-9
//
// Behavior:
// * Answers committed offsets from the sequencer (so a coordinator that took a group over
//   answers what the previous one committed): the partitions asked for, or (v2+, no
//   topics) every committed partition. A partition without a commit answers offset -1.
// * v8+: several groups in one request, each with its own error code.
// * v9: a KIP-848 member that names itself must be known (UNKNOWN_MEMBER_ID) and at its
//   member epoch (STALE_MEMBER_EPOCH).
// * Errors: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE (the sequencer did not answer),
//   INVALID_GROUP_ID; v0-1 carry them per partition.
//
// Ignored: RequireStable (v7; without transactions no offset is pending).
//
// Version notes:
// * v2: top-level ErrorCode, all topics with nil Topics
// * v5: LeaderEpoch
// * v8: Groups
// * v10 (topic ids) is not served

type fetchTopic struct {
	topic string
	parts []int32
}

func (c *Coordinator) offsetFetch(ctx context.Context, ns string, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var topics []fetchTopic
			if rg.Topics != nil {
				topics = []fetchTopic{}
				for _, t := range rg.Topics {
					topics = append(topics, fetchTopic{t.Topic, t.Partitions})
				}
			}
			code, got := c.fetchGroup(ctx, ns, rg.Group, rg.MemberID, rg.MemberEpoch, topics)
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, code
			for _, ft := range got {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = ft.topic
				for _, o := range ft.offs {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Partition, o.Offset, o.LeaderEpoch, strp(o.Metadata)
					rt.Partitions = append(rt.Partitions, rp)
				}
				g.Topics = append(g.Topics, rt)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
	var topics []fetchTopic
	if req.Topics != nil || req.Version < 2 {
		topics = []fetchTopic{}
		for _, t := range req.Topics {
			topics = append(topics, fetchTopic{t.Topic, t.Partitions})
		}
	}
	code, got := c.fetchGroup(ctx, ns, req.Group, nil, -1, topics)
	if req.Version >= 2 {
		resp.ErrorCode = code
	}
	if code != 0 && req.Version < 2 {
		// v0-1 have no group error: every partition asked for carries it.
		got = got[:0]
		for _, t := range topics {
			ft := fetchedTopic{topic: t.topic}
			for _, p := range t.parts {
				ft.offs = append(ft.offs, meta.KafkaOffset{Partition: p, Offset: -1, LeaderEpoch: -1})
			}
			got = append(got, ft)
		}
	}
	for _, ft := range got {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = ft.topic
		for _, o := range ft.offs {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Partition, o.Offset, o.LeaderEpoch, strp(o.Metadata)
			if code != 0 && req.Version < 2 {
				rp.ErrorCode = code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

type fetchedTopic struct {
	topic string
	offs  []meta.KafkaOffset
}

// fetchGroup answers a group's committed offsets of topics (nil: all committed).
func (c *Coordinator) fetchGroup(ctx context.Context, ns, id string, memberID *string, memberEpoch int32, topics []fetchTopic) (int16, []fetchedTopic) {
	if id == "" {
		return kerr.InvalidGroupID.Code, nil
	}
	g, code := c.acquire(ns, id, false)
	if code != 0 {
		return code, nil
	}
	if g != nil {
		if memberID != nil && g.kind == kindConsumer && g.cg != nil && len(g.cg.members) > 0 {
			m := g.cg.members[*memberID]
			switch {
			case m == nil:
				code = kerr.UnknownMemberID.Code
			case memberEpoch != m.epoch:
				code = kerr.StaleMemberEpoch.Code
			}
		}
		g.mu.Unlock()
		if code != 0 {
			return code, nil
		}
	}
	st, err := c.cfg.Meta.DescribeKafkaGroup(ctx, ns, id)
	if err != nil && !isNotFound(err) {
		c.log.Warn("kafka group: fetch offsets", "ns", ns, "group", id, "err", err)
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	committed := map[meta.KafkaTopicPartition]meta.KafkaOffset{}
	for _, o := range st.Offsets {
		committed[meta.KafkaTopicPartition{Topic: o.Topic, Partition: o.Partition}] = o
	}
	var out []fetchedTopic
	if topics == nil {
		for _, o := range st.Offsets {
			if len(out) == 0 || out[len(out)-1].topic != o.Topic {
				out = append(out, fetchedTopic{topic: o.Topic})
			}
			out[len(out)-1].offs = append(out[len(out)-1].offs, o)
		}
		return 0, out
	}
	for _, t := range topics {
		ft := fetchedTopic{topic: t.topic}
		for _, p := range t.parts {
			o, ok := committed[meta.KafkaTopicPartition{Topic: t.topic, Partition: p}]
			if !ok {
				o = meta.KafkaOffset{Partition: p, Offset: -1, LeaderEpoch: -1}
			}
			ft.offs = append(ft.offs, o)
		}
		out = append(out, ft)
	}
	return 0, out
}
