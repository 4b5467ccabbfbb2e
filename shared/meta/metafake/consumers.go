package metafake

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/loamhq/loam/shared/meta"
)

// Named consumers, with the sequencer's rules (meta/consumer.go, meta/consumer_admin.go):
// heartbeats balance the leases (a member's share of P partitions among M live members by
// name, releases from the highest, claims from the lowest at the next epoch), commits are
// fenced by the member's live lease epochs, and delete and reset are refused while members
// are live unless forced. Clock: Now. Unlike the sequencer there is no cap on consumers or
// members.

type consumerKey struct{ ns, name string }

type consumerPart struct {
	stream uint64
	p      int32
}

type offsetRec struct {
	offset   int64
	metadata string
	ms       int64
}

type memberRec struct{ expires, joined int64 }

type leaseRec struct {
	holder  string
	epoch   uint64
	expires int64
}

type consumerState struct {
	offsets map[consumerPart]offsetRec
	members map[uint64]map[string]memberRec // by stream id, member
	leases  map[consumerPart]*leaseRec
}

// streamByName finds a stream of ns by name.
func (f *Meta) streamByName(ns, name string) (meta.Stream, error) {
	if ns != meta.DefaultNS {
		return meta.Stream{}, fmt.Errorf("metafake: namespace %q: %w", ns, meta.ErrNamespaceNotFound)
	}
	for _, st := range f.streams {
		if st.Name == name {
			return st, nil
		}
	}
	return meta.Stream{}, fmt.Errorf("metafake: stream %s/%s: %w", ns, name, meta.ErrStreamNotFound)
}

// consumer returns consumer ns/name, creating it when create is set (nil otherwise).
func (f *Meta) consumer(ns, name string, create bool) *consumerState {
	if f.consumers == nil {
		f.consumers = map[consumerKey]*consumerState{}
	}
	k := consumerKey{ns, name}
	c := f.consumers[k]
	if c == nil && create {
		c = &consumerState{offsets: map[consumerPart]offsetRec{}, members: map[uint64]map[string]memberRec{}, leases: map[consumerPart]*leaseRec{}}
		f.consumers[k] = c
	}
	return c
}

func checkConsumerName(name string) error {
	if name == "" || len(name) > meta.MaxNameLength {
		return fmt.Errorf("%w: consumer name %q", meta.ErrInvalidArgument, name)
	}
	return nil
}

// ConsumerHeartbeat records the member live (or removes it), balances the stream's leases
// and answers the member's.
func (f *Meta) ConsumerHeartbeat(ctx context.Context, h meta.ConsumerHeartbeat) (meta.ConsumerAssignment, error) {
	if err := checkConsumerName(h.Consumer); err != nil {
		return meta.ConsumerAssignment{}, err
	}
	if err := meta.CheckConsumerHeartbeat(h); err != nil {
		return meta.ConsumerAssignment{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.streamByName(h.Namespace, h.Stream)
	if err != nil {
		return meta.ConsumerAssignment{}, err
	}
	now := f.Now().UnixMilli()
	c := f.consumer(h.Namespace, h.Consumer, true)
	out := meta.ConsumerAssignment{StreamID: s.ID, Partitions: s.Partitions, Leases: []meta.ConsumerLease{}}
	ms := c.members[s.ID]
	if ms == nil {
		ms = map[string]memberRec{}
		c.members[s.ID] = ms
	}
	self := memberRec{joined: now}
	var live []string
	for m, r := range ms {
		switch {
		case r.expires <= now:
			delete(ms, m)
		case m == h.Member:
			self.joined = r.joined
		default:
			live = append(live, m)
		}
	}
	slices.Sort(live)
	lease := func(p int32) *leaseRec {
		l := c.leases[consumerPart{s.ID, p}]
		if l == nil {
			l = &leaseRec{}
			c.leases[consumerPart{s.ID, p}] = l
		}
		return l
	}
	if h.Leave {
		delete(ms, h.Member)
		for p := range s.Partitions {
			if l := lease(p); l.holder == h.Member && l.expires > now {
				l.expires = 0
			}
		}
		out.Members = int32(len(live))
		return out, nil
	}
	exp := now + h.Session.Milliseconds()
	self.expires = exp
	ms[h.Member] = self
	i, _ := slices.BinarySearch(live, h.Member)
	m := int32(len(live) + 1)
	share := s.Partitions / m
	if int32(i) < s.Partitions%m {
		share++
	}
	var held, free []int32
	for p := range s.Partitions {
		l := lease(p)
		switch {
		case l.expires > now && l.holder == h.Member:
			held = append(held, p)
		case l.expires <= now:
			free = append(free, p)
		}
	}
	for int32(len(held)) > share {
		lease(held[len(held)-1]).expires = 0
		held = held[:len(held)-1]
	}
	for _, p := range free {
		if int32(len(held)) >= share {
			break
		}
		l := lease(p)
		l.epoch++
		l.holder = h.Member
		held = append(held, p)
	}
	slices.Sort(held)
	for _, p := range held {
		l := lease(p)
		l.expires = exp
		out.Leases = append(out.Leases, meta.ConsumerLease{Partition: p, Epoch: l.epoch, ExpiresMs: exp})
	}
	out.Members, out.ExpiresMs = m, exp
	return out, nil
}

// CommitConsumerOffsets commits offsets, all or none, fenced by the member's live leases.
func (f *Meta) CommitConsumerOffsets(ctx context.Context, cc meta.ConsumerCommit) error {
	if err := checkConsumerName(cc.Consumer); err != nil {
		return err
	}
	if err := meta.CheckConsumerCommit(cc); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.streamByName(cc.Namespace, cc.Stream)
	if err != nil {
		return err
	}
	now := f.Now().UnixMilli()
	c := f.consumer(cc.Namespace, cc.Consumer, false)
	for _, o := range cc.Offsets {
		if o.Partition >= s.Partitions {
			return fmt.Errorf("metafake: commit offsets: partition %d of %d: %w", o.Partition, s.Partitions, meta.ErrPartitionNotFound)
		}
		if hwm := f.parts[pkey{s.ID, o.Partition}].hwm; o.Offset > hwm {
			return fmt.Errorf("metafake: commit offsets: partition %d: offset %d past the high watermark %d: %w", o.Partition, o.Offset, hwm, meta.ErrOffsetOutOfRange)
		}
		l := &leaseRec{}
		if c != nil && c.leases[consumerPart{s.ID, o.Partition}] != nil {
			l = c.leases[consumerPart{s.ID, o.Partition}]
		}
		live := l.expires > now
		switch {
		case cc.Member == "" && live:
			return fmt.Errorf("metafake: commit offsets: partition %d is leased to %s at epoch %d: %w", o.Partition, l.holder, l.epoch, meta.ErrStaleConsumerEpoch)
		case cc.Member != "" && (!live || l.holder != cc.Member || l.epoch != o.Epoch):
			return fmt.Errorf("metafake: commit offsets: partition %d: member %s at epoch %d: %w", o.Partition, cc.Member, o.Epoch, meta.ErrStaleConsumerEpoch)
		}
	}
	c = f.consumer(cc.Namespace, cc.Consumer, true)
	for _, o := range cc.Offsets {
		c.offsets[consumerPart{s.ID, o.Partition}] = offsetRec{offset: o.Offset, metadata: o.Metadata, ms: now}
	}
	return nil
}

// DescribeConsumer answers the consumer's offsets, live leases and live members.
func (f *Meta) DescribeConsumer(ctx context.Context, ns, consumer string) (meta.ConsumerState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ns != meta.DefaultNS {
		return meta.ConsumerState{}, fmt.Errorf("metafake: describe consumer: %w", meta.ErrNamespaceNotFound)
	}
	c := f.consumer(ns, consumer, false)
	if c == nil {
		return meta.ConsumerState{}, fmt.Errorf("metafake: describe consumer %s/%s: %w", ns, consumer, meta.ErrConsumerNotFound)
	}
	now := f.Now().UnixMilli()
	st := meta.ConsumerState{Partitions: []meta.ConsumerPartition{}, Members: []meta.ConsumerMember{}, ClockMs: now}
	names := map[uint64]string{}
	for _, s := range f.streams {
		names[s.ID] = s.Name
	}
	parts := map[consumerPart]*meta.ConsumerPartition{}
	get := func(k consumerPart) *meta.ConsumerPartition {
		if cp := parts[k]; cp != nil {
			return cp
		}
		name, ok := names[k.stream]
		if !ok {
			return nil
		}
		cp := &meta.ConsumerPartition{Stream: name, StreamID: k.stream, Partition: k.p, Committed: -1}
		parts[k] = cp
		return cp
	}
	for k, o := range c.offsets {
		if cp := get(k); cp != nil {
			cp.Committed, cp.Metadata, cp.CommittedMs = o.offset, o.metadata, o.ms
		}
	}
	for k, l := range c.leases {
		if l.expires <= now {
			continue
		}
		if cp := get(k); cp != nil {
			cp.Holder, cp.Epoch, cp.LeaseExpiresMs = l.holder, l.epoch, l.expires
		}
	}
	for _, cp := range parts {
		st.Partitions = append(st.Partitions, *cp)
	}
	slices.SortFunc(st.Partitions, func(a, b meta.ConsumerPartition) int {
		return cmp.Or(cmp.Compare(a.StreamID, b.StreamID), cmp.Compare(a.Partition, b.Partition))
	})
	ids := make([]uint64, 0, len(c.members))
	for id := range c.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		name, ok := names[id]
		if !ok {
			continue
		}
		var ms []meta.ConsumerMember
		for m, r := range c.members[id] {
			if r.expires > now {
				ms = append(ms, meta.ConsumerMember{Stream: name, Member: m, ExpiresMs: r.expires})
			}
		}
		slices.SortFunc(ms, func(a, b meta.ConsumerMember) int { return cmp.Compare(a.Member, b.Member) })
		st.Members = append(st.Members, ms...)
	}
	return st, nil
}

// ListConsumers lists ns's consumers in name order.
func (f *Meta) ListConsumers(ctx context.Context, ns string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ns != meta.DefaultNS {
		return nil, fmt.Errorf("metafake: list consumers of %s: %w", ns, meta.ErrNamespaceNotFound)
	}
	out := []string{}
	for k := range f.consumers {
		if k.ns == ns {
			out = append(out, k.name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// liveMembers names the live members of c (on stream id, or any stream when all).
func liveMembers(c *consumerState, id uint64, all bool, now int64) []string {
	var out []string
	for sid, ms := range c.members {
		if !all && sid != id {
			continue
		}
		for m, r := range ms {
			if r.expires > now {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// DeleteConsumer deletes a consumer: refused while a member is live unless force.
func (f *Meta) DeleteConsumer(ctx context.Context, ns, consumer string, force bool) error {
	if err := checkConsumerName(consumer); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ns != meta.DefaultNS {
		return fmt.Errorf("metafake: delete consumer: %w", meta.ErrNamespaceNotFound)
	}
	c := f.consumer(ns, consumer, false)
	if c == nil {
		return fmt.Errorf("metafake: delete consumer %s/%s: %w", ns, consumer, meta.ErrConsumerNotFound)
	}
	if live := liveMembers(c, 0, true, f.Now().UnixMilli()); len(live) > 0 && !force {
		return fmt.Errorf("metafake: delete consumer %s/%s: live members %v: %w", ns, consumer, live, meta.ErrConsumerActive)
	}
	delete(f.consumers, consumerKey{ns, consumer})
	return nil
}

// ResetConsumerOffsets sets the consumer's offsets on one stream (meta.ConsumerReset);
// refused while a member is live on the stream unless r.Force, which drops them.
func (f *Meta) ResetConsumerOffsets(ctx context.Context, r meta.ConsumerReset) ([]meta.ConsumerOffset, error) {
	if err := checkConsumerName(r.Consumer); err != nil {
		return nil, err
	}
	if err := meta.CheckConsumerReset(r); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.streamByName(r.Namespace, r.Stream)
	if err != nil {
		return nil, err
	}
	parts := slices.Clone(r.Partitions)
	if len(parts) == 0 {
		for p := range s.Partitions {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	out := make([]meta.ConsumerOffset, 0, len(parts))
	for _, p := range parts {
		if p >= s.Partitions {
			return nil, fmt.Errorf("metafake: reset consumer offsets: partition %d of %d: %w", p, s.Partitions, meta.ErrPartitionNotFound)
		}
		fp := f.parts[pkey{s.ID, p}]
		var off int64
		switch r.To {
		case meta.ResetEarliest:
			off = fp.logStart
		case meta.ResetLatest:
			off = fp.hwm
		case meta.ResetOffset:
			off = r.Offset
		case meta.ResetTimestamp:
			off = fp.hwm
			for _, e := range fp.entries {
				if e.MaxTimestamp >= r.TimestampMs {
					off = e.BaseOffset
					break
				}
			}
		}
		out = append(out, meta.ConsumerOffset{Partition: p, Offset: min(max(off, fp.logStart), fp.hwm)})
	}
	now := f.Now().UnixMilli()
	c := f.consumer(r.Namespace, r.Consumer, false)
	if c != nil {
		if live := liveMembers(c, s.ID, false, now); len(live) > 0 && !r.Force {
			return nil, fmt.Errorf("metafake: reset consumer %s/%s offsets on %s: live members %v: %w", r.Namespace, r.Consumer, r.Stream, live, meta.ErrConsumerActive)
		}
	}
	c = f.consumer(r.Namespace, r.Consumer, true)
	delete(c.members, s.ID)
	for k, l := range c.leases {
		if k.stream == s.ID {
			l.expires = 0
		}
	}
	for _, o := range out {
		c.offsets[consumerPart{s.ID, o.Partition}] = offsetRec{offset: o.Offset, ms: now}
	}
	return out, nil
}
