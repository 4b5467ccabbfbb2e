package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
)

// Kafka consumer groups (meta/kafkagroup.go). State, in buckets created on first use (a
// database without them reads as having no groups, so the format stays v4):
//
//	kafka_groups         ns 0x00 group → metapb.KafkaGroupRecord (generation, epoch)
//	kafka_group_offsets  ns 0x00 group 0x00 topic 0x00 partition u32 → metapb.KafkaOffsetRecord
//
// Group ids hold no NUL (meta.CheckKafkaGroupID) and topic names are stream names, so the
// keys are unambiguous and a group's offsets are one key range. An offset record names the
// stream id it was committed on: once that stream is deleted (or another stream holds its
// name) the record is left out of every answer, as Kafka drops a deleted topic's offsets,
// and the next commit of the partition overwrites it.
//
// Bound: at most meta.MaxKafkaGroups groups per namespace, one record each (about 40 bytes
// + the protocol type); one offset record (about 30 bytes + metadata, at most
// meta.MaxKafkaOffsetMetadata) per (group, topic, partition) committed, and commits name
// existing partitions only.
var (
	bKafkaGroups       = []byte("kafka_groups")
	bKafkaGroupOffsets = []byte("kafka_group_offsets")
)

// kafkaGroupCommand wraps a group operation as a Command (its oneof case kafka_group).
func kafkaGroupCommand(c *metapb.KafkaGroupCmd) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_KafkaGroup{KafkaGroup: c}}
}

// AdvanceKafkaGroup is the command that moves a group to its next generation (epoch 0:
// claims it).
func AdvanceKafkaGroup(ns, group string, epoch uint64, protocolType string) *metapb.Command {
	return kafkaGroupCommand(&metapb.KafkaGroupCmd{Op: &metapb.KafkaGroupCmd_Advance{Advance: &metapb.AdvanceKafkaGroupRequest{
		Namespace: ns, Group: group, Epoch: epoch, ProtocolType: protocolType}}})
}

// CommitKafkaOffsets is the command that commits a group's offsets.
func CommitKafkaOffsets(c meta.KafkaOffsetCommit) *metapb.Command {
	return kafkaGroupCommand(&metapb.KafkaGroupCmd{Op: &metapb.KafkaGroupCmd_Commit{Commit: metapb.FromKafkaOffsetCommit(c)}})
}

// DeleteKafkaOffsets is the command that drops offsets of a group.
func DeleteKafkaOffsets(ns, group string, epoch uint64, parts []meta.KafkaTopicPartition) *metapb.Command {
	return kafkaGroupCommand(&metapb.KafkaGroupCmd{Op: &metapb.KafkaGroupCmd_DeleteOffsets{DeleteOffsets: &metapb.DeleteKafkaOffsetsRequest{
		Namespace: ns, Group: group, Epoch: epoch, Partitions: metapb.FromKafkaTopicPartitions(parts)}}})
}

// DeleteKafkaGroup is the command that drops a group and its offsets.
func DeleteKafkaGroup(ns, group string, epoch uint64) *metapb.Command {
	return kafkaGroupCommand(&metapb.KafkaGroupCmd{Op: &metapb.KafkaGroupCmd_DeleteGroup{DeleteGroup: &metapb.DeleteKafkaGroupRequest{
		Namespace: ns, Group: group, Epoch: epoch}}})
}

// applyKafkaGroup applies a group operation of the entry at index.
func (a *applier) applyKafkaGroup(index uint64, c *metapb.KafkaGroupCmd) (meta.KafkaGroupGeneration, error) {
	switch op := c.GetOp().(type) {
	case *metapb.KafkaGroupCmd_Advance:
		return a.kafkaAdvance(index, op.Advance)
	case *metapb.KafkaGroupCmd_Commit:
		return meta.KafkaGroupGeneration{}, a.kafkaCommit(metapb.ToKafkaOffsetCommit(op.Commit))
	case *metapb.KafkaGroupCmd_DeleteOffsets:
		d := op.DeleteOffsets
		return meta.KafkaGroupGeneration{}, a.kafkaDeleteOffsets(d.GetNamespace(), d.GetGroup(), d.GetEpoch(),
			metapb.ToKafkaTopicPartitions(d.GetPartitions()))
	case *metapb.KafkaGroupCmd_DeleteGroup:
		d := op.DeleteGroup
		return meta.KafkaGroupGeneration{}, a.kafkaDeleteGroup(d.GetNamespace(), d.GetGroup(), d.GetEpoch())
	}
	return meta.KafkaGroupGeneration{}, fmt.Errorf("%w: unknown kafka group operation", ErrBadCommand)
}

func kafkaOffsetPrefix(ns, group string) []byte {
	return append(streamKey(ns, group), 0)
}

func kafkaOffsetKey(ns, group, topic string, p int32) []byte {
	k := append(kafkaOffsetPrefix(ns, group), topic...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(p))
}

// kafkaGroup reads a group's record; nil when absent (or the bucket does not exist yet).
func kafkaGroupRecord(tx *bolt.Tx, ns, group string) (*metapb.KafkaGroupRecord, error) {
	b := tx.Bucket(bKafkaGroups)
	if b == nil {
		return nil, nil
	}
	k := streamKey(ns, group)
	v := b.Get(k)
	if v == nil {
		return nil, nil
	}
	rec := &metapb.KafkaGroupRecord{}
	if err := decodeInto(v, rec, "kafka group", k); err != nil {
		return nil, err
	}
	return rec, nil
}

// kafkaFence answers the group's record when epoch (and, gen >= 0, generation) is its
// current one, else ErrStaleGroupGeneration (ErrKafkaGroupNotFound wrapped beside it for
// a group that does not exist).
func (a *applier) kafkaFence(where, ns, group string, gen int32, epoch uint64) (*metapb.KafkaGroupRecord, error) {
	if err := meta.CheckKafkaGroupID(group); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if !a.nsExists(ns) {
		return nil, fmt.Errorf("%s: %w", where, meta.ErrNamespaceNotFound)
	}
	rec, err := kafkaGroupRecord(a.tx, ns, group)
	if err != nil {
		a.check(err)
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("%s: epoch %d: %w: %w", where, epoch, meta.ErrStaleGroupGeneration, meta.ErrKafkaGroupNotFound)
	}
	if rec.GetEpoch() != epoch || (gen >= 0 && rec.GetGeneration() != gen) {
		return nil, fmt.Errorf("%s: generation %d epoch %d, but the group is at generation %d epoch %d: %w", where, gen, epoch,
			rec.GetGeneration(), rec.GetEpoch(), meta.ErrStaleGroupGeneration)
	}
	return rec, nil
}

// kafkaAdvance moves a group to its next generation; its epoch becomes index.
func (a *applier) kafkaAdvance(index uint64, r *metapb.AdvanceKafkaGroupRequest) (meta.KafkaGroupGeneration, error) {
	ns, group := r.GetNamespace(), r.GetGroup()
	where := fmt.Sprintf("kafka group %s/%s: advance", ns, group)
	if err := meta.CheckKafkaGroupID(group); err != nil {
		return meta.KafkaGroupGeneration{}, fmt.Errorf("%s: %w", where, err)
	}
	if len(r.GetProtocolType()) > meta.MaxNameLength {
		return meta.KafkaGroupGeneration{}, fmt.Errorf("%w: %s: protocol type of %d bytes: at most %d", meta.ErrInvalidArgument, where,
			len(r.GetProtocolType()), meta.MaxNameLength)
	}
	if !a.nsExists(ns) {
		return meta.KafkaGroupGeneration{}, fmt.Errorf("%s: %w", where, meta.ErrNamespaceNotFound)
	}
	rec, err := kafkaGroupRecord(a.tx, ns, group)
	if err != nil {
		a.check(err)
		return meta.KafkaGroupGeneration{}, err
	}
	if rec == nil {
		if r.GetEpoch() != 0 {
			return meta.KafkaGroupGeneration{}, fmt.Errorf("%s: epoch %d: %w: %w", where, r.GetEpoch(), meta.ErrStaleGroupGeneration, meta.ErrKafkaGroupNotFound)
		}
		if n := a.countKafkaGroups(ns); n >= meta.MaxKafkaGroups {
			return meta.KafkaGroupGeneration{}, fmt.Errorf("%w: %s: the namespace has %d kafka groups, at most %d", meta.ErrInvalidArgument, where, n, meta.MaxKafkaGroups)
		}
		rec = &metapb.KafkaGroupRecord{CreatedMs: a.clock}
	} else if r.GetEpoch() != 0 && r.GetEpoch() != rec.GetEpoch() {
		return meta.KafkaGroupGeneration{}, fmt.Errorf("%s: epoch %d, but the group is at generation %d epoch %d: %w", where, r.GetEpoch(),
			rec.GetGeneration(), rec.GetEpoch(), meta.ErrStaleGroupGeneration)
	}
	gen := rec.GetGeneration() + 1
	if rec.GetGeneration() == math.MaxInt32 {
		gen = 1
	}
	rec.Generation, rec.Epoch, rec.UpdatedMs = gen, index, a.clock
	if r.GetProtocolType() != "" {
		rec.ProtocolType = r.GetProtocolType()
	}
	b := a.bucket(bKafkaGroups)
	if a.err != nil {
		return meta.KafkaGroupGeneration{}, a.err
	}
	a.putRecord(b, streamKey(ns, group), rec)
	return meta.KafkaGroupGeneration{Generation: gen, Epoch: index}, nil
}

func (a *applier) countKafkaGroups(ns string) int {
	b := a.tx.Bucket(bKafkaGroups)
	if b == nil {
		return 0
	}
	n := 0
	prefix := streamKey(ns, "")
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n
}

// kafkaCommit commits c's offsets, all or none, under the group's current generation.
func (a *applier) kafkaCommit(c meta.KafkaOffsetCommit) error {
	where := fmt.Sprintf("kafka group %s/%s: commit offsets", c.Namespace, c.Group)
	if err := meta.CheckKafkaOffsetCommit(c); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	rec, err := a.kafkaFence(where, c.Namespace, c.Group, c.Generation, c.Epoch)
	if err != nil {
		return err
	}
	ids := make(map[string]uint64)
	for _, o := range c.Offsets {
		s, _, err := a.getStream(c.Namespace, o.Topic)
		if err != nil {
			return fmt.Errorf("%s: topic %s: %w", where, o.Topic, err)
		}
		if o.Partition >= s.Partitions {
			return fmt.Errorf("%s: topic %s partition %d of %d: %w", where, o.Topic, o.Partition, s.Partitions, meta.ErrPartitionNotFound)
		}
		ids[o.Topic] = s.ID
	}
	ob := a.bucket(bKafkaGroupOffsets)
	gb := a.bucket(bKafkaGroups)
	if a.err != nil {
		return a.err
	}
	for _, o := range c.Offsets {
		a.putRecord(ob, kafkaOffsetKey(c.Namespace, c.Group, o.Topic, o.Partition),
			&metapb.KafkaOffsetRecord{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommittedMs: a.clock, StreamId: ids[o.Topic]})
	}
	rec.UpdatedMs = a.clock
	a.putRecord(gb, streamKey(c.Namespace, c.Group), rec)
	return nil
}

func (a *applier) kafkaDeleteOffsets(ns, group string, epoch uint64, parts []meta.KafkaTopicPartition) error {
	where := fmt.Sprintf("kafka group %s/%s: delete offsets", ns, group)
	if len(parts) > meta.MaxKafkaCommitOffsets {
		return fmt.Errorf("%w: %s: %d partitions, at most %d", meta.ErrInvalidArgument, where, len(parts), meta.MaxKafkaCommitOffsets)
	}
	if _, err := a.kafkaFence(where, ns, group, -1, epoch); err != nil {
		return err
	}
	ob := a.tx.Bucket(bKafkaGroupOffsets)
	if ob == nil {
		return nil
	}
	for _, p := range parts {
		a.check(ob.Delete(kafkaOffsetKey(ns, group, p.Topic, p.Partition)))
	}
	return nil
}

func (a *applier) kafkaDeleteGroup(ns, group string, epoch uint64) error {
	where := fmt.Sprintf("kafka group %s/%s: delete", ns, group)
	if _, err := a.kafkaFence(where, ns, group, -1, epoch); err != nil {
		return err
	}
	a.check(a.tx.Bucket(bKafkaGroups).Delete(streamKey(ns, group)))
	if ob := a.tx.Bucket(bKafkaGroupOffsets); ob != nil {
		var keys [][]byte
		prefix := kafkaOffsetPrefix(ns, group)
		c := ob.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		a.deleteKeys(ob, keys)
	}
	return nil
}

// ---- reads ----

// DescribeKafkaGroup answers a group's generation and committed offsets.
func (f *FSM) DescribeKafkaGroup(ns, group string) (meta.KafkaGroupState, error) {
	st := meta.KafkaGroupState{Group: group, Offsets: []meta.KafkaOffset{}}
	err := f.view(func(tx *bolt.Tx) error {
		where := fmt.Sprintf("describe kafka group %s/%s", ns, group)
		if !hasKey(tx.Bucket(bNS), []byte(ns)) {
			return fmt.Errorf("%s: %w", where, meta.ErrNamespaceNotFound)
		}
		rec, err := kafkaGroupRecord(tx, ns, group)
		if err != nil {
			return err
		}
		if rec == nil {
			return fmt.Errorf("%s: %w", where, meta.ErrKafkaGroupNotFound)
		}
		st.Generation, st.Epoch, st.ProtocolType = rec.GetGeneration(), rec.GetEpoch(), rec.GetProtocolType()
		st.CreatedMs, st.UpdatedMs = rec.GetCreatedMs(), rec.GetUpdatedMs()
		b := tx.Bucket(bKafkaGroupOffsets)
		if b == nil {
			return nil
		}
		prefix := kafkaOffsetPrefix(ns, group)
		streamIDs := map[string]uint64{}
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			rest := k[len(prefix):]
			i := bytes.IndexByte(rest, 0)
			if i < 0 || len(rest) != i+5 {
				return fmt.Errorf("%w: kafka offset key %x", ErrCorrupt, k)
			}
			var o metapb.KafkaOffsetRecord
			if err := decodeInto(v, &o, "kafka offset", k); err != nil {
				return err
			}
			topic := string(rest[:i])
			if id := o.GetStreamId(); id != 0 {
				// Left out when the stream is gone or another stream holds its name now.
				cur, ok := streamIDs[topic]
				if !ok {
					cur = 0
					if sv := tx.Bucket(bStreams).Get(streamKey(ns, topic)); sv != nil {
						s, err := decodeStream(sv)
						if err != nil {
							return err
						}
						cur = s.ID
					}
					streamIDs[topic] = cur
				}
				if cur != id {
					continue
				}
			}
			st.Offsets = append(st.Offsets, meta.KafkaOffset{Topic: topic, Partition: int32(binary.BigEndian.Uint32(rest[i+1:])),
				Offset: o.GetOffset(), LeaderEpoch: o.GetLeaderEpoch(), Metadata: o.GetMetadata(), CommittedMs: o.GetCommittedMs()})
		}
		return nil
	})
	return st, err
}

// ListKafkaGroups lists ns's groups by id, offsets left out.
func (f *FSM) ListKafkaGroups(ns string) ([]meta.KafkaGroupState, error) {
	out := []meta.KafkaGroupState{}
	err := f.view(func(tx *bolt.Tx) error {
		if !hasKey(tx.Bucket(bNS), []byte(ns)) {
			return fmt.Errorf("list kafka groups of %s: %w", ns, meta.ErrNamespaceNotFound)
		}
		b := tx.Bucket(bKafkaGroups)
		if b == nil {
			return nil
		}
		prefix := streamKey(ns, "")
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var rec metapb.KafkaGroupRecord
			if err := decodeInto(v, &rec, "kafka group", k); err != nil {
				return err
			}
			out = append(out, meta.KafkaGroupState{Group: string(k[len(prefix):]), Generation: rec.GetGeneration(), Epoch: rec.GetEpoch(),
				ProtocolType: rec.GetProtocolType(), CreatedMs: rec.GetCreatedMs(), UpdatedMs: rec.GetUpdatedMs()})
		}
		return nil
	})
	return out, err
}
