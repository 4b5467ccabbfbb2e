package fsm

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

// Named consumers (meta/consumer.go). State, in buckets created on first use (a database
// without them reads as having no consumers, so the format stays v4):
//
//	consumers          ns 0x00 consumer → created_ms u64 (the namespace's consumers)
//	consumer_offsets   ns 0x00 consumer 0x00 stream u64 | partition u32 → metapb.ConsumerOffsetRecord
//	consumer_members   ns 0x00 consumer 0x00 stream u64 | member → metapb.ConsumerMemberRecord
//	consumer_leases    ns 0x00 consumer 0x00 stream u64 | partition u32 → metapb.ConsumerLeaseRecord
//
// Bound: at most meta.MaxConsumers consumers per namespace; per consumer and stream at most
// meta.MaxConsumerMembers member records (expired ones are pruned by the next heartbeat on
// that stream), and one offset record (about 30 bytes + metadata, at most
// meta.MaxConsumerMetadata) and one lease record (about 40 bytes + the member name) per
// partition. Records of a deleted stream are left out of every answer.
var (
	bConsumers       = []byte("consumers")
	bConsumerOffsets = []byte("consumer_offsets")
	bConsumerMembers = []byte("consumer_members")
	bConsumerLeases  = []byte("consumer_leases")
)

// consumerCommand wraps a consumer operation as a Command (its oneof case consumer).
func consumerCommand(c *metapb.ConsumerCmd) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_Consumer{Consumer: c}}
}

// ConsumerHeartbeat is the command of a member's heartbeat (meta.Client.ConsumerHeartbeat).
func ConsumerHeartbeat(h meta.ConsumerHeartbeat) *metapb.Command {
	return consumerCommand(&metapb.ConsumerCmd{Op: &metapb.ConsumerCmd_Heartbeat{Heartbeat: &metapb.ConsumerHeartbeatRequest{
		Namespace: h.Namespace, Consumer: h.Consumer, Stream: h.Stream, Member: h.Member,
		SessionMs: h.Session.Milliseconds(), Leave: h.Leave}}})
}

// CommitConsumerOffsets is the command that commits a consumer's offsets.
func CommitConsumerOffsets(c meta.ConsumerCommit) *metapb.Command {
	return consumerCommand(&metapb.ConsumerCmd{Op: &metapb.ConsumerCmd_Commit{Commit: metapb.FromConsumerCommit(c)}})
}

// applyConsumer applies a consumer operation into res.
func (a *applier) applyConsumer(c *metapb.ConsumerCmd, res *Result) {
	switch op := c.GetOp().(type) {
	case *metapb.ConsumerCmd_Heartbeat:
		res.Consumer, res.Err = a.consumerHeartbeat(op.Heartbeat)
	case *metapb.ConsumerCmd_Commit:
		res.Err = a.consumerCommit(metapb.ToConsumerCommit(op.Commit))
	case *metapb.ConsumerCmd_Delete:
		res.Err = a.consumerDelete(op.Delete) // consumers_admin.go
	case *metapb.ConsumerCmd_Reset_:
		res.ConsumerOffsets, res.Err = a.consumerReset(op.Reset_)
	default:
		res.Err = fmt.Errorf("%w: unknown consumer operation", ErrBadCommand)
	}
}

func consumerPrefix(ns, consumer string) []byte {
	return append(streamKey(ns, consumer), 0)
}

func consumerStreamPrefix(ns, consumer string, stream uint64) []byte {
	return binary.BigEndian.AppendUint64(consumerPrefix(ns, consumer), stream)
}

func consumerPartKey(ns, consumer string, stream uint64, p int32) []byte {
	return binary.BigEndian.AppendUint32(consumerStreamPrefix(ns, consumer, stream), uint32(p))
}

func (a *applier) bucket(name []byte) *bolt.Bucket {
	b, err := a.tx.CreateBucketIfNotExists(name)
	a.check(err)
	return b
}

// registerConsumer records consumer in ns, refusing a new one past meta.MaxConsumers.
func (a *applier) registerConsumer(ns, consumer string) error {
	b := a.bucket(bConsumers)
	if a.err != nil {
		return a.err
	}
	k := streamKey(ns, consumer)
	if hasKey(b, k) {
		return nil
	}
	n := 0
	prefix := streamKey(ns, "")
	c := b.Cursor()
	for key, _ := c.Seek(prefix); key != nil && bytes.HasPrefix(key, prefix); key, _ = c.Next() {
		n++
	}
	if n >= meta.MaxConsumers {
		return fmt.Errorf("%w: consumer %s/%s: the namespace has %d consumers, at most %d", meta.ErrInvalidArgument, ns, consumer, n, meta.MaxConsumers)
	}
	a.check(putU64(b, k, uint64(a.clock)))
	return nil
}

func decodeInto(v []byte, m proto.Message, what string, k []byte) error {
	if err := proto.Unmarshal(v, m); err != nil {
		return fmt.Errorf("%w: %s %x: %v", ErrCorrupt, what, k, err)
	}
	return nil
}

func (a *applier) consumerLease(b *bolt.Bucket, k []byte) *metapb.ConsumerLeaseRecord {
	rec := &metapb.ConsumerLeaseRecord{}
	if v := b.Get(k); v != nil {
		a.check(decodeInto(v, rec, "consumer lease", k))
	}
	return rec
}

func (a *applier) putRecord(b *bolt.Bucket, k []byte, m proto.Message) {
	v, err := proto.Marshal(m)
	a.check(err)
	a.check(b.Put(k, v))
}

// consumerHeartbeat records the member live (or removes it), balances the stream's leases
// for it and answers its leases (meta/consumer.go has the protocol).
func (a *applier) consumerHeartbeat(r *metapb.ConsumerHeartbeatRequest) (meta.ConsumerAssignment, error) {
	ns, name, member := r.GetNamespace(), r.GetConsumer(), r.GetMember()
	h := meta.ConsumerHeartbeat{Namespace: ns, Consumer: name, Stream: r.GetStream(), Member: member,
		Session: time.Duration(r.GetSessionMs()) * time.Millisecond, Leave: r.GetLeave()}
	where := fmt.Sprintf("consumer %s/%s: heartbeat of %s on %s", ns, name, member, h.Stream)
	if err := checkName("consumer", name); err != nil {
		return meta.ConsumerAssignment{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := meta.CheckConsumerHeartbeat(h); err != nil {
		return meta.ConsumerAssignment{}, fmt.Errorf("%s: %w", where, err)
	}
	s, _, err := a.getStream(ns, h.Stream)
	if err != nil {
		return meta.ConsumerAssignment{}, fmt.Errorf("%s: %w", where, err)
	}
	out := meta.ConsumerAssignment{StreamID: s.ID, Partitions: s.Partitions, Leases: []meta.ConsumerLease{}}
	// Every check runs before the first write.
	mb, lb := a.bucket(bConsumerMembers), a.bucket(bConsumerLeases)
	if a.err != nil {
		return out, a.err
	}
	prefix := consumerStreamPrefix(ns, name, s.ID)
	selfKey := append(bytes.Clone(prefix), member...)
	var live []string
	var expired [][]byte
	self := &metapb.ConsumerMemberRecord{JoinedMs: a.clock}
	c := mb.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var rec metapb.ConsumerMemberRecord
		if err := decodeInto(v, &rec, "consumer member", k); err != nil {
			a.check(err)
			return out, err
		}
		switch {
		case rec.GetExpiresMs() <= a.clock:
			expired = append(expired, bytes.Clone(k))
		case bytes.Equal(k, selfKey):
			self.JoinedMs = rec.GetJoinedMs()
		default:
			live = append(live, string(k[len(prefix):]))
		}
	}
	if !h.Leave && len(live) >= meta.MaxConsumerMembers {
		return out, fmt.Errorf("%w: %s: %d live members, at most %d", meta.ErrInvalidArgument, where, len(live), meta.MaxConsumerMembers)
	}
	if err := a.registerConsumer(ns, name); err != nil {
		return out, err
	}
	a.deleteKeys(mb, expired)
	if h.Leave {
		a.check(mb.Delete(selfKey))
		for p := range s.Partitions {
			k := consumerPartKey(ns, name, s.ID, p)
			if rec := a.consumerLease(lb, k); rec.GetHolder() == member && rec.GetExpiresMs() > a.clock {
				rec.ExpiresMs = 0
				a.putRecord(lb, k, rec)
			}
		}
		out.Members = int32(len(live))
		return out, nil
	}
	exp := a.clock + h.Session.Milliseconds()
	self.ExpiresMs = exp
	a.putRecord(mb, selfKey, self)
	i, _ := slices.BinarySearch(live, member)
	m := int32(len(live) + 1)
	share := s.Partitions / m
	if int32(i) < s.Partitions%m {
		share++
	}
	var held, free []int32
	recs := make(map[int32]*metapb.ConsumerLeaseRecord)
	for p := range s.Partitions {
		rec := a.consumerLease(lb, consumerPartKey(ns, name, s.ID, p))
		switch {
		case rec.GetExpiresMs() > a.clock && rec.GetHolder() == member:
			held = append(held, p)
		case rec.GetExpiresMs() <= a.clock:
			free = append(free, p)
		default:
			continue
		}
		recs[p] = rec
	}
	for int32(len(held)) > share {
		p := held[len(held)-1]
		held = held[:len(held)-1]
		recs[p].ExpiresMs = 0
		a.putRecord(lb, consumerPartKey(ns, name, s.ID, p), recs[p])
	}
	for _, p := range free {
		if int32(len(held)) >= share {
			break
		}
		recs[p].Epoch++
		recs[p].Holder = member
		held = append(held, p)
	}
	slices.Sort(held)
	for _, p := range held {
		recs[p].ExpiresMs = exp
		a.putRecord(lb, consumerPartKey(ns, name, s.ID, p), recs[p])
		out.Leases = append(out.Leases, meta.ConsumerLease{Partition: p, Epoch: recs[p].GetEpoch(), ExpiresMs: exp})
	}
	out.Members, out.ExpiresMs = m, exp
	return out, nil
}

// consumerCommit commits c's offsets, all or none, under the member's live leases.
func (a *applier) consumerCommit(c meta.ConsumerCommit) error {
	where := fmt.Sprintf("consumer %s/%s: commit offsets of %s", c.Namespace, c.Consumer, c.Stream)
	if err := checkName("consumer", c.Consumer); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := meta.CheckConsumerCommit(c); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	s, _, err := a.getStream(c.Namespace, c.Stream)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	lb := a.tx.Bucket(bConsumerLeases)
	for _, o := range c.Offsets {
		if o.Partition >= s.Partitions {
			return fmt.Errorf("%s: partition %d of %d: %w", where, o.Partition, s.Partitions, meta.ErrPartitionNotFound)
		}
		prec, err := a.partition(s.ID, o.Partition)
		if err != nil {
			return fmt.Errorf("%s: partition %d: %w", where, o.Partition, err)
		}
		if o.Offset > prec.GetHighWatermark() {
			return fmt.Errorf("%s: partition %d: offset %d past the high watermark %d: %w", where, o.Partition, o.Offset,
				prec.GetHighWatermark(), meta.ErrOffsetOutOfRange)
		}
		rec := &metapb.ConsumerLeaseRecord{}
		if lb != nil {
			rec = a.consumerLease(lb, consumerPartKey(c.Namespace, c.Consumer, s.ID, o.Partition))
		}
		live := rec.GetExpiresMs() > a.clock
		switch {
		case c.Member == "" && live:
			return fmt.Errorf("%s: partition %d is leased to %s at epoch %d: %w", where, o.Partition, rec.GetHolder(), rec.GetEpoch(), meta.ErrStaleConsumerEpoch)
		case c.Member != "" && (!live || rec.GetHolder() != c.Member || rec.GetEpoch() != o.Epoch):
			cur := "no live lease"
			if live {
				cur = fmt.Sprintf("leased to %s at epoch %d", rec.GetHolder(), rec.GetEpoch())
			}
			return fmt.Errorf("%s: partition %d: member %s at epoch %d, but the partition has %s: %w", where, o.Partition,
				c.Member, o.Epoch, cur, meta.ErrStaleConsumerEpoch)
		}
	}
	if err := a.registerConsumer(c.Namespace, c.Consumer); err != nil {
		return err
	}
	ob := a.bucket(bConsumerOffsets)
	if a.err != nil {
		return a.err
	}
	for _, o := range c.Offsets {
		a.putRecord(ob, consumerPartKey(c.Namespace, c.Consumer, s.ID, o.Partition),
			&metapb.ConsumerOffsetRecord{Offset: o.Offset, Metadata: o.Metadata, CommittedMs: a.clock})
	}
	return nil
}

// ---- reads ----

// ListConsumers lists ns's consumers in name order.
func (f *FSM) ListConsumers(ns string) ([]string, error) {
	out := []string{}
	err := f.view(func(tx *bolt.Tx) error {
		if !hasKey(tx.Bucket(bNS), []byte(ns)) {
			return fmt.Errorf("list consumers of %s: %w", ns, meta.ErrNamespaceNotFound)
		}
		b := tx.Bucket(bConsumers)
		if b == nil {
			return nil
		}
		prefix := streamKey(ns, "")
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			out = append(out, string(k[len(prefix):]))
		}
		return nil
	})
	return out, err
}

// DescribeConsumer answers consumer's committed offsets, live leases and live members.
func (f *FSM) DescribeConsumer(ns, consumer string) (meta.ConsumerState, error) {
	st := meta.ConsumerState{Partitions: []meta.ConsumerPartition{}, Members: []meta.ConsumerMember{}}
	err := f.view(func(tx *bolt.Tx) error {
		where := fmt.Sprintf("describe consumer %s/%s", ns, consumer)
		if !hasKey(tx.Bucket(bNS), []byte(ns)) {
			return fmt.Errorf("%s: %w", where, meta.ErrNamespaceNotFound)
		}
		if b := tx.Bucket(bConsumers); b == nil || !hasKey(b, streamKey(ns, consumer)) {
			return fmt.Errorf("%s: %w", where, meta.ErrConsumerNotFound)
		}
		st.ClockMs = int64(getU64(tx.Bucket(bMeta), kClock))
		prefix := consumerPrefix(ns, consumer)
		names := map[uint64]string{}
		streamName := func(id uint64) (string, bool) {
			if n, ok := names[id]; ok {
				return n, n != ""
			}
			sk := tx.Bucket(bStreamIDs).Get(u64(id))
			n := ""
			if i := bytes.IndexByte(sk, 0); i >= 0 {
				n = string(sk[i+1:])
			}
			names[id] = n
			return n, n != ""
		}
		type pk struct {
			id uint64
			p  int32
		}
		parts := map[pk]*meta.ConsumerPartition{}
		var order []pk
		get := func(k []byte) (*meta.ConsumerPartition, bool) {
			if len(k) != len(prefix)+12 {
				return nil, false
			}
			key := pk{binary.BigEndian.Uint64(k[len(prefix):]), int32(binary.BigEndian.Uint32(k[len(prefix)+8:]))}
			if cp, ok := parts[key]; ok {
				return cp, true
			}
			name, ok := streamName(key.id)
			if !ok {
				return nil, false
			}
			cp := &meta.ConsumerPartition{Stream: name, StreamID: key.id, Partition: key.p, Committed: -1}
			parts[key] = cp
			order = append(order, key)
			return cp, true
		}
		if b := tx.Bucket(bConsumerOffsets); b != nil {
			c := b.Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				var rec metapb.ConsumerOffsetRecord
				if err := decodeInto(v, &rec, "consumer offset", k); err != nil {
					return err
				}
				if cp, ok := get(k); ok {
					cp.Committed, cp.Metadata, cp.CommittedMs = rec.GetOffset(), rec.GetMetadata(), rec.GetCommittedMs()
				}
			}
		}
		if b := tx.Bucket(bConsumerLeases); b != nil {
			c := b.Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				var rec metapb.ConsumerLeaseRecord
				if err := decodeInto(v, &rec, "consumer lease", k); err != nil {
					return err
				}
				if rec.GetExpiresMs() <= st.ClockMs {
					continue
				}
				if cp, ok := get(k); ok {
					cp.Holder, cp.Epoch, cp.LeaseExpiresMs = rec.GetHolder(), rec.GetEpoch(), rec.GetExpiresMs()
				}
			}
		}
		if b := tx.Bucket(bConsumerMembers); b != nil {
			c := b.Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				var rec metapb.ConsumerMemberRecord
				if err := decodeInto(v, &rec, "consumer member", k); err != nil {
					return err
				}
				if rec.GetExpiresMs() <= st.ClockMs || len(k) <= len(prefix)+8 {
					continue
				}
				if name, ok := streamName(binary.BigEndian.Uint64(k[len(prefix):])); ok {
					st.Members = append(st.Members, meta.ConsumerMember{Stream: name, Member: string(k[len(prefix)+8:]), ExpiresMs: rec.GetExpiresMs()})
				}
			}
		}
		slices.SortFunc(order, func(x, y pk) int {
			if x.id != y.id {
				return cmp.Compare(x.id, y.id)
			}
			return cmp.Compare(x.p, y.p)
		})
		for _, k := range order {
			st.Partitions = append(st.Partitions, *parts[k])
		}
		return nil
	})
	return st, err
}
