package metapb

import "github.com/loamhq/loam/shared/meta"

// FromKafkaOffsets converts committed offsets to their messages.
func FromKafkaOffsets(os []meta.KafkaOffset) []*KafkaOffset {
	out := make([]*KafkaOffset, len(os))
	for i, o := range os {
		out[i] = &KafkaOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch,
			Metadata: o.Metadata, CommittedMs: o.CommittedMs}
	}
	return out
}

// ToKafkaOffsets converts offset messages back.
func ToKafkaOffsets(os []*KafkaOffset) []meta.KafkaOffset {
	out := make([]meta.KafkaOffset, len(os))
	for i, o := range os {
		out[i] = meta.KafkaOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(),
			LeaderEpoch: o.GetLeaderEpoch(), Metadata: o.GetMetadata(), CommittedMs: o.GetCommittedMs()}
	}
	return out
}

// FromKafkaOffsetCommit converts a group offset commit to its message.
func FromKafkaOffsetCommit(c meta.KafkaOffsetCommit) *CommitKafkaOffsetsRequest {
	return &CommitKafkaOffsetsRequest{Namespace: c.Namespace, Group: c.Group, Generation: c.Generation, Epoch: c.Epoch,
		Offsets: FromKafkaOffsets(c.Offsets)}
}

// ToKafkaOffsetCommit converts a commit message back.
func ToKafkaOffsetCommit(r *CommitKafkaOffsetsRequest) meta.KafkaOffsetCommit {
	return meta.KafkaOffsetCommit{Namespace: r.GetNamespace(), Group: r.GetGroup(), Generation: r.GetGeneration(), Epoch: r.GetEpoch(),
		Offsets: ToKafkaOffsets(r.GetOffsets())}
}

// FromKafkaTopicPartitions converts partitions to their messages.
func FromKafkaTopicPartitions(ps []meta.KafkaTopicPartition) []*KafkaTopicPartition {
	out := make([]*KafkaTopicPartition, len(ps))
	for i, p := range ps {
		out[i] = &KafkaTopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	return out
}

// ToKafkaTopicPartitions converts partition messages back.
func ToKafkaTopicPartitions(ps []*KafkaTopicPartition) []meta.KafkaTopicPartition {
	out := make([]meta.KafkaTopicPartition, len(ps))
	for i, p := range ps {
		out[i] = meta.KafkaTopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
	}
	return out
}

// FromKafkaGroupState converts a group's state to its message.
func FromKafkaGroupState(s meta.KafkaGroupState) *DescribeKafkaGroupResponse {
	return &DescribeKafkaGroupResponse{Group: s.Group, Generation: s.Generation, Epoch: s.Epoch, ProtocolType: s.ProtocolType,
		CreatedMs: s.CreatedMs, UpdatedMs: s.UpdatedMs, Offsets: FromKafkaOffsets(s.Offsets)}
}

// ToKafkaGroupState converts a group's state message back.
func ToKafkaGroupState(r *DescribeKafkaGroupResponse) meta.KafkaGroupState {
	return meta.KafkaGroupState{Group: r.GetGroup(), Generation: r.GetGeneration(), Epoch: r.GetEpoch(), ProtocolType: r.GetProtocolType(),
		CreatedMs: r.GetCreatedMs(), UpdatedMs: r.GetUpdatedMs(), Offsets: ToKafkaOffsets(r.GetOffsets())}
}
