package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Deleting a named consumer and resetting its offsets (meta/consumer_admin.go). Both
// travel as cases of ConsumerCmd (delete, reset) and touch only the consumer buckets of
// consumers.go: no new state, the format stays v4.
//
// A delete removes the consumer's registry key and every offset, member and lease record
// under its prefix. A reset writes one offset record per partition named (all of the
// stream's when none is); forced over live members of the stream, it deletes their member
// records and ends their leases (ExpiresMs 0, Holder and Epoch kept, so the next claim is
// at Epoch+1 and the dropped members' commits are refused as stale). A timestamp reset
// carries the offsets the leader resolved (ResolveTimestamp) and applies them like an
// offset reset: every offset is clamped to the partition's log start..high watermark.

// DeleteConsumer is the command that deletes a consumer.
func DeleteConsumer(ns, consumer string, force bool) *metapb.Command {
	return consumerCommand(&metapb.ConsumerCmd{Op: &metapb.ConsumerCmd_Delete{Delete: &metapb.DeleteConsumerRequest{
		Namespace: ns, Consumer: consumer, Force: force}}})
}

// ResetConsumerOffsets is the command that resets a consumer's offsets on one stream;
// resolved holds, for a timestamp reset, the offset of each partition (its Offset field).
func ResetConsumerOffsets(r meta.ConsumerReset, resolved []meta.ConsumerOffset) *metapb.Command {
	m := metapb.FromConsumerReset(r)
	m.Resolved = metapb.FromResetOffsets(resolved)
	return consumerCommand(&metapb.ConsumerCmd{Op: &metapb.ConsumerCmd_Reset_{Reset_: m}})
}

// liveMembers lists the live member keys under prefix in the members bucket (nil bucket:
// none), and all member keys under it.
func (a *applier) liveMembers(prefix []byte) (live, all [][]byte, err error) {
	mb := a.tx.Bucket(bConsumerMembers)
	if mb == nil {
		return nil, nil, nil
	}
	c := mb.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var rec metapb.ConsumerMemberRecord
		if err := decodeInto(v, &rec, "consumer member", k); err != nil {
			a.check(err)
			return nil, nil, err
		}
		all = append(all, bytes.Clone(k))
		if rec.GetExpiresMs() > a.clock {
			live = append(live, bytes.Clone(k))
		}
	}
	return live, all, nil
}

// memberNames names the members of member keys (prefix ns 0x00 consumer 0x00 stream u64).
func memberNames(keys [][]byte, prefixLen int) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if len(k) > prefixLen+8 {
			out = append(out, string(k[prefixLen+8:]))
		}
	}
	return out
}

// consumerDelete deletes a consumer (see the file comment).
func (a *applier) consumerDelete(r *metapb.DeleteConsumerRequest) error {
	ns, name := r.GetNamespace(), r.GetConsumer()
	where := fmt.Sprintf("delete consumer %s/%s", ns, name)
	if err := checkName("consumer", name); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if !a.nsExists(ns) {
		return fmt.Errorf("%s: %w", where, meta.ErrNamespaceNotFound)
	}
	reg := a.tx.Bucket(bConsumers)
	if reg == nil || !hasKey(reg, streamKey(ns, name)) {
		return fmt.Errorf("%s: %w", where, meta.ErrConsumerNotFound)
	}
	prefix := consumerPrefix(ns, name)
	live, _, err := a.liveMembers(prefix)
	if err != nil {
		return err
	}
	if len(live) > 0 && !r.GetForce() {
		return fmt.Errorf("%s: %d live members (%v): stop them or force: %w", where, len(live),
			memberNames(live[:min(len(live), 5)], len(prefix)), meta.ErrConsumerActive)
	}
	for _, name := range [][]byte{bConsumerOffsets, bConsumerMembers, bConsumerLeases} {
		if b := a.tx.Bucket(name); b != nil {
			a.deletePrefix(b, prefix)
		}
	}
	a.check(reg.Delete(streamKey(ns, name)))
	return a.err
}

// consumerReset resets a consumer's offsets on one stream (see the file comment) and
// answers them in partition order.
func (a *applier) consumerReset(r *metapb.ResetConsumerOffsetsRequest) ([]meta.ConsumerOffset, error) {
	rs := metapb.ToConsumerReset(r)
	where := fmt.Sprintf("reset consumer %s/%s offsets on %s", rs.Namespace, rs.Consumer, rs.Stream)
	if err := checkName("consumer", rs.Consumer); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := meta.CheckConsumerReset(rs); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	s, _, err := a.getStream(rs.Namespace, rs.Stream)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	parts := rs.Partitions
	if len(parts) == 0 {
		parts = make([]int32, s.Partitions)
		for p := range s.Partitions {
			parts[p] = p
		}
	}
	parts = slices.Sorted(slices.Values(parts))
	resolved := map[int32]int64{}
	for _, o := range r.GetResolved() {
		resolved[o.GetPartition()] = o.GetOffset()
	}
	// Every check runs before the first write.
	out := make([]meta.ConsumerOffset, 0, len(parts))
	for _, p := range parts {
		if p >= s.Partitions {
			return nil, fmt.Errorf("%s: partition %d of %d: %w", where, p, s.Partitions, meta.ErrPartitionNotFound)
		}
		prec, err := a.partition(s.ID, p)
		if err != nil {
			return nil, fmt.Errorf("%s: partition %d: %w", where, p, err)
		}
		lo, hi := prec.GetLogStart(), prec.GetHighWatermark()
		var off int64
		switch rs.To {
		case meta.ResetEarliest:
			off = lo
		case meta.ResetLatest:
			off = hi
		case meta.ResetOffset:
			off = rs.Offset
		case meta.ResetTimestamp:
			v, ok := resolved[p]
			if !ok {
				return nil, fmt.Errorf("%s: partition %d: a timestamp reset without its resolved offset: %w", where, p, meta.ErrInvalidArgument)
			}
			off = v
		}
		out = append(out, meta.ConsumerOffset{Partition: p, Offset: min(max(off, lo), hi)})
	}
	prefix := consumerStreamPrefix(rs.Namespace, rs.Consumer, s.ID)
	live, all, err := a.liveMembers(prefix)
	if err != nil {
		return nil, err
	}
	if len(live) > 0 && !rs.Force {
		return nil, fmt.Errorf("%s: %d live members on the stream (%v): stop them or force: %w", where, len(live),
			memberNames(live[:min(len(live), 5)], len(consumerPrefix(rs.Namespace, rs.Consumer))), meta.ErrConsumerActive)
	}
	if err := a.registerConsumer(rs.Namespace, rs.Consumer); err != nil {
		return nil, err
	}
	if len(all) > 0 {
		a.deleteKeys(a.tx.Bucket(bConsumerMembers), all)
	}
	if lb := a.tx.Bucket(bConsumerLeases); lb != nil {
		c := lb.Cursor()
		var ended [][]byte
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var rec metapb.ConsumerLeaseRecord
			if err := decodeInto(v, &rec, "consumer lease", k); err != nil {
				a.check(err)
				return nil, err
			}
			if rec.GetExpiresMs() > 0 {
				ended = append(ended, bytes.Clone(k))
			}
		}
		for _, k := range ended {
			rec := a.consumerLease(lb, k)
			rec.ExpiresMs = 0
			a.putRecord(lb, k, rec)
		}
	}
	ob := a.bucket(bConsumerOffsets)
	if a.err != nil {
		return nil, a.err
	}
	for _, o := range out {
		a.putRecord(ob, consumerPartKey(rs.Namespace, rs.Consumer, s.ID, o.Partition),
			&metapb.ConsumerOffsetRecord{Offset: o.Offset, CommittedMs: a.clock})
	}
	return out, a.err
}

// ResolveTimestamp answers, for a timestamp reset, the offset of partition p of streamID:
// the base offset of the first index entry whose largest timestamp is at or after ts, or
// the high watermark when none is. It reads the index MaxLookup entries at a time.
func (f *FSM) ResolveTimestamp(streamID uint64, p int32, ts int64) (int64, error) {
	_, st, err := f.Lookup(streamID, p, 0, 0)
	if err != nil {
		return 0, err
	}
	for from := st.LogStart; from < st.HighWatermark; {
		es, st2, err := f.Lookup(streamID, p, from, MaxLookup)
		if errors.Is(err, meta.ErrOffsetOutOfRange) && st2.LogStart > from {
			from = st2.LogStart // trimmed meanwhile
			continue
		}
		if err != nil {
			return 0, err
		}
		if len(es) == 0 {
			return st2.HighWatermark, nil
		}
		for _, e := range es {
			if e.MaxTimestamp >= ts {
				return max(e.BaseOffset, st2.LogStart), nil
			}
		}
		from = es[len(es)-1].End()
		st = st2
	}
	return st.HighWatermark, nil
}
