package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// OffsetCommit: v0-9
//
// Behavior:
// * Commits offsets, each with its leader epoch and metadata, in the sequencer under the
//   group's generation and fencing epoch: if another coordinator claimed the group since,
//   the sequencer refuses and every partition answers NOT_COORDINATOR (the group is
//   dropped here).
// * A commit with generation -1 and no member id (an admin or a consumer outside any group)
//   is accepted by an Empty group, or a group this node does not hold yet (it is claimed).
//   Otherwise the member must be known and at the group's generation (classic) or its
//   member epoch (KIP-848).
// * Partitions of unknown topics, or past a topic's partition count, answer
//   UNKNOWN_TOPIC_OR_PARTITION and are not committed; metadata over 4096 bytes answers
//   OFFSET_METADATA_TOO_LARGE. The others commit together, all or none.
// * Errors (every partition): UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID,
//   REBALANCE_IN_PROGRESS (CompletingRebalance), STALE_MEMBER_EPOCH (KIP-848),
//   NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT (the sequencer did not
//   answer: the commit may have happened).
//
// Ignored: RetentionTimeMillis (v2-4; offsets are kept until deleted), Timestamp (v1).
//
// Version notes:
// * v1: Generation, MemberID
// * v6: LeaderEpoch
// * v7: InstanceID
// * v10 (topic ids) is not served

func (c *Coordinator) offsetCommit(ctx context.Context, ns string, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	answer := func(all int16) *kmsg.OffsetCommitResponse {
		for i, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
				if all != 0 {
					rp.ErrorCode = all
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if req.Group == "" {
		return answer(kerr.InvalidGroupID.Code)
	}
	generation := req.Generation
	if req.Version == 0 {
		generation = -1
	}
	admin := generation < 0 && req.MemberID == "" && (req.InstanceID == nil || *req.InstanceID == "")
	g, code := c.acquire(ns, req.Group, admin)
	if g == nil {
		if code == 0 {
			code = kerr.UnknownMemberID.Code
		}
		return answer(code)
	}
	defer g.mu.Unlock()
	if admin {
		if code := g.load(ctx); code != 0 {
			return answer(code)
		}
	}
	if !g.loaded {
		return answer(kerr.UnknownMemberID.Code)
	}
	if code := g.checkCommitter(admin, req.MemberID, req.InstanceID, generation); code != 0 {
		return answer(code)
	}
	// Per-partition checks, then one commit of the rest.
	parts := map[string]int32{}
	var offs []meta.KafkaOffset
	for i, t := range req.Topics {
		n, ok := parts[t.Topic]
		if !ok {
			n = -1
			if s, _, err := c.cfg.Meta.GetStream(ctx, ns, t.Topic); err == nil {
				n = s.Partitions
			}
			parts[t.Topic] = n
		}
		for j, p := range t.Partitions {
			md := ""
			if p.Metadata != nil {
				md = *p.Metadata
			}
			switch {
			case p.Partition < 0 || p.Partition >= n:
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			case len(md) > meta.MaxKafkaOffsetMetadata:
				codes[i][j] = kerr.OffsetMetadataTooLarge.Code
			case p.Offset < 0:
				codes[i][j] = kerr.InvalidCommitOffsetSize.Code
			default:
				le := p.LeaderEpoch
				if req.Version < 6 {
					le = -1
				}
				offs = append(offs, meta.KafkaOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: le, Metadata: md})
			}
		}
	}
	if len(offs) == 0 {
		return answer(0)
	}
	offs = dedupeOffsets(offs)
	if code := g.commitOffsets(ctx, offs); code != 0 {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = code
				}
			}
		}
	}
	return answer(0)
}

// dedupeOffsets keeps the last offset of a partition named twice (a request may repeat
// one; the sequencer wants each once).
func dedupeOffsets(offs []meta.KafkaOffset) []meta.KafkaOffset {
	idx := make(map[meta.KafkaTopicPartition]int, len(offs))
	out := offs[:0]
	for _, o := range offs {
		k := meta.KafkaTopicPartition{Topic: o.Topic, Partition: o.Partition}
		if i, ok := idx[k]; ok {
			out[i] = o
			continue
		}
		idx[k] = len(out)
		out = append(out, o)
	}
	return out
}

// checkCommitter validates who commits: NONE or the code every partition answers.
func (g *group) checkCommitter(admin bool, memberID string, instance *string, generation int32) int16 {
	if g.kind == kindConsumer && g.cg != nil && len(g.cg.members) > 0 {
		if admin {
			return kerr.UnknownMemberID.Code
		}
		m := g.cg.members[memberID]
		switch {
		case m == nil:
			return kerr.UnknownMemberID.Code
		case generation != m.epoch:
			return kerr.StaleMemberEpoch.Code
		}
		return 0
	}
	if admin {
		if g.state == stEmpty || g.idle() {
			return 0
		}
		return kerr.UnknownMemberID.Code
	}
	if _, code := g.classicMember(memberID, instance, generation); code != 0 {
		return code
	}
	if g.state == stCompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}
