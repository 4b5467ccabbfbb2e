package metapb

import "github.com/loamhq/loam/shared/meta"

// FromConsumerCommit converts a consumer offset commit to its message.
func FromConsumerCommit(c meta.ConsumerCommit) *CommitConsumerOffsetsRequest {
	r := &CommitConsumerOffsetsRequest{Namespace: c.Namespace, Consumer: c.Consumer, Stream: c.Stream, Member: c.Member,
		Offsets: make([]*ConsumerOffset, len(c.Offsets))}
	for i, o := range c.Offsets {
		r.Offsets[i] = &ConsumerOffset{Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata, Epoch: o.Epoch}
	}
	return r
}

// ToConsumerCommit converts a commit message back.
func ToConsumerCommit(r *CommitConsumerOffsetsRequest) meta.ConsumerCommit {
	c := meta.ConsumerCommit{Namespace: r.GetNamespace(), Consumer: r.GetConsumer(), Stream: r.GetStream(), Member: r.GetMember(),
		Offsets: make([]meta.ConsumerOffset, len(r.GetOffsets()))}
	for i, o := range r.GetOffsets() {
		c.Offsets[i] = meta.ConsumerOffset{Partition: o.GetPartition(), Offset: o.GetOffset(), Metadata: o.GetMetadata(), Epoch: o.GetEpoch()}
	}
	return c
}

// FromConsumerAssignment converts a heartbeat's answer to its message.
func FromConsumerAssignment(a meta.ConsumerAssignment) *ConsumerHeartbeatResponse {
	r := &ConsumerHeartbeatResponse{StreamId: a.StreamID, Partitions: a.Partitions, Members: a.Members, ExpiresMs: a.ExpiresMs,
		Leases: make([]*ConsumerLease, len(a.Leases))}
	for i, l := range a.Leases {
		r.Leases[i] = &ConsumerLease{Partition: l.Partition, Epoch: l.Epoch, ExpiresMs: l.ExpiresMs}
	}
	return r
}

// ToConsumerAssignment converts a heartbeat's answer back.
func ToConsumerAssignment(r *ConsumerHeartbeatResponse) meta.ConsumerAssignment {
	a := meta.ConsumerAssignment{StreamID: r.GetStreamId(), Partitions: r.GetPartitions(), Members: r.GetMembers(), ExpiresMs: r.GetExpiresMs(),
		Leases: make([]meta.ConsumerLease, len(r.GetLeases()))}
	for i, l := range r.GetLeases() {
		a.Leases[i] = meta.ConsumerLease{Partition: l.GetPartition(), Epoch: l.GetEpoch(), ExpiresMs: l.GetExpiresMs()}
	}
	return a
}

// FromConsumerState converts a consumer's state to its message.
func FromConsumerState(s meta.ConsumerState) *DescribeConsumerResponse {
	r := &DescribeConsumerResponse{ClockMs: s.ClockMs, Partitions: make([]*ConsumerPartition, len(s.Partitions)),
		Members: make([]*ConsumerMember, len(s.Members))}
	for i, p := range s.Partitions {
		r.Partitions[i] = &ConsumerPartition{Stream: p.Stream, StreamId: p.StreamID, Partition: p.Partition, Committed: p.Committed,
			Metadata: p.Metadata, CommittedMs: p.CommittedMs, Holder: p.Holder, Epoch: p.Epoch, LeaseExpiresMs: p.LeaseExpiresMs}
	}
	for i, m := range s.Members {
		r.Members[i] = &ConsumerMember{Stream: m.Stream, Member: m.Member, ExpiresMs: m.ExpiresMs}
	}
	return r
}

// ToConsumerState converts a consumer's state back.
func ToConsumerState(r *DescribeConsumerResponse) meta.ConsumerState {
	s := meta.ConsumerState{ClockMs: r.GetClockMs(), Partitions: make([]meta.ConsumerPartition, len(r.GetPartitions())),
		Members: make([]meta.ConsumerMember, len(r.GetMembers()))}
	for i, p := range r.GetPartitions() {
		s.Partitions[i] = meta.ConsumerPartition{Stream: p.GetStream(), StreamID: p.GetStreamId(), Partition: p.GetPartition(),
			Committed: p.GetCommitted(), Metadata: p.GetMetadata(), CommittedMs: p.GetCommittedMs(), Holder: p.GetHolder(),
			Epoch: p.GetEpoch(), LeaseExpiresMs: p.GetLeaseExpiresMs()}
	}
	for i, m := range r.GetMembers() {
		s.Members[i] = meta.ConsumerMember{Stream: m.GetStream(), Member: m.GetMember(), ExpiresMs: m.GetExpiresMs()}
	}
	return s
}

// ConsumersOf is the Consumers client over the connection of s, a client made by
// NewSequencerClient (the Consumers service is served beside Sequencer on every voter), so
// code that holds a Sequencer client (forwarding, retries) reaches Consumers the same way.
// ok is false for any other SequencerClient.
func ConsumersOf(s SequencerClient) (c ConsumersClient, ok bool) {
	sc, ok := s.(*sequencerClient)
	if !ok {
		return nil, false
	}
	return NewConsumersClient(sc.cc), true
}
