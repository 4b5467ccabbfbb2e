package metapb

import "github.com/loamhq/loam/shared/meta"

// FromConsumerReset converts a consumer offset reset to its message.
func FromConsumerReset(r meta.ConsumerReset) *ResetConsumerOffsetsRequest {
	return &ResetConsumerOffsetsRequest{Namespace: r.Namespace, Consumer: r.Consumer, Stream: r.Stream, Partitions: r.Partitions,
		To: r.To, Offset: r.Offset, TimestampMs: r.TimestampMs, Force: r.Force}
}

// ToConsumerReset converts a reset message back (its resolved offsets left out).
func ToConsumerReset(m *ResetConsumerOffsetsRequest) meta.ConsumerReset {
	return meta.ConsumerReset{Namespace: m.GetNamespace(), Consumer: m.GetConsumer(), Stream: m.GetStream(), Partitions: m.GetPartitions(),
		To: m.GetTo(), Offset: m.GetOffset(), TimestampMs: m.GetTimestampMs(), Force: m.GetForce()}
}

// FromResetOffsets converts a reset's offsets to their messages.
func FromResetOffsets(os []meta.ConsumerOffset) []*ConsumerResetOffset {
	out := make([]*ConsumerResetOffset, len(os))
	for i, o := range os {
		out[i] = &ConsumerResetOffset{Partition: o.Partition, Offset: o.Offset}
	}
	return out
}

// ToResetOffsets converts reset offset messages back.
func ToResetOffsets(ms []*ConsumerResetOffset) []meta.ConsumerOffset {
	out := make([]meta.ConsumerOffset, len(ms))
	for i, m := range ms {
		out[i] = meta.ConsumerOffset{Partition: m.GetPartition(), Offset: m.GetOffset()}
	}
	return out
}

// ConsumerAdminOf is the ConsumerAdmin client over the connection of s, a client made by
// NewSequencerClient (the service is served beside Sequencer on every voter); ok is false
// for any other SequencerClient. See ConsumersOf.
func ConsumerAdminOf(s SequencerClient) (c ConsumerAdminClient, ok bool) {
	sc, ok := s.(*sequencerClient)
	if !ok {
		return nil, false
	}
	return NewConsumerAdminClient(sc.cc), true
}
