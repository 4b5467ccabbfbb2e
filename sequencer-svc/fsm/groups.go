package fsm

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

// Partition states of format v3: one PartitionGroup value per 256 partitions of a stream,
// so a commit touching a thousand partitions of a stream reads and writes four values.

// groupSize is the number of partitions of one PartitionGroup.
const groupSize = 256

func groupKey(id uint64, g uint32) []byte {
	k := make([]byte, 12)
	binary.BigEndian.PutUint64(k, id)
	binary.BigEndian.PutUint32(k[8:], g)
	return k
}

// gkey names a partition group in an applier's cache.
type gkey struct {
	id uint64
	g  uint32
}

// group is a PartitionGroup loaded by an applier; dirty ones are written back by
// flushGroups at the end of the batch.
type group struct {
	g     *metapb.PartitionGroup
	dirty bool
}

func decodeGroup(k, v []byte) (*metapb.PartitionGroup, error) {
	g := &metapb.PartitionGroup{}
	if len(k) != 12 {
		return nil, fmt.Errorf("%w: partition group key of %d bytes", ErrCorrupt, len(k))
	}
	if err := proto.Unmarshal(v, g); err != nil {
		return nil, fmt.Errorf("%w: partition group %x: %v", ErrCorrupt, k, err)
	}
	n := len(g.HighWatermark)
	if len(g.LogStart) != n || len(g.Bytes) != n || len(g.Settled) != n || n > groupSize {
		return nil, fmt.Errorf("%w: partition group %x: columns of different lengths", ErrCorrupt, k)
	}
	return g, nil
}

// groupStates expands group k/v into partition states.
func groupStates(k, v []byte, out []meta.PartitionState) ([]meta.PartitionState, error) {
	g, err := decodeGroup(k, v)
	if err != nil {
		return out, err
	}
	id, first := binary.BigEndian.Uint64(k), int32(binary.BigEndian.Uint32(k[8:]))*groupSize
	for i := range g.HighWatermark {
		out = append(out, meta.PartitionState{StreamID: id, Partition: first + int32(i), LogStart: g.LogStart[i],
			HighWatermark: g.HighWatermark[i], Bytes: g.Bytes[i]})
	}
	return out, nil
}

// readPartition reads one partition's record in a read transaction (nil: no such
// partition).
func readPartition(tx *bolt.Tx, id uint64, p int32) (*metapb.PartitionRecord, error) {
	if p < 0 {
		return nil, nil
	}
	k := groupKey(id, uint32(p)/groupSize)
	v := tx.Bucket(bGroups).Get(k)
	if v == nil {
		return nil, nil
	}
	g, err := decodeGroup(k, v)
	if err != nil {
		return nil, err
	}
	return recordOf(g, int(p%groupSize)), nil
}

func recordOf(g *metapb.PartitionGroup, i int) *metapb.PartitionRecord {
	if i >= len(g.HighWatermark) {
		return nil
	}
	return &metapb.PartitionRecord{LogStart: g.LogStart[i], HighWatermark: g.HighWatermark[i], Bytes: g.Bytes[i], Settled: g.Settled[i]}
}

// loadGroup returns group g of stream id, loading it once per batch (nil: none).
func (a *applier) loadGroup(id uint64, gi uint32) *group {
	if a.lastGroup != nil && a.lastGroupKey == (gkey{id, gi}) {
		return a.lastGroup
	}
	if gr, ok := a.groups[gkey{id, gi}]; ok {
		a.lastGroup, a.lastGroupKey = gr, gkey{id, gi}
		return gr
	}
	k := groupKey(id, gi)
	v := a.tx.Bucket(bGroups).Get(k)
	if v == nil {
		return nil
	}
	g, err := decodeGroup(k, v)
	if err != nil {
		a.check(err)
		return nil
	}
	if a.groups == nil {
		a.groups = map[gkey]*group{}
	}
	gr := &group{g: g}
	a.groups[gkey{id, gi}] = gr
	a.lastGroup, a.lastGroupKey = gr, gkey{id, gi}
	return gr
}

// partition reads a partition's record for a command (a copy: putPartition stores it); a
// missing one is ErrStreamNotFound or ErrPartitionNotFound.
func (a *applier) partition(id uint64, p int32) (*metapb.PartitionRecord, error) {
	gr, i, err := a.slot(id, p)
	if err != nil {
		return nil, err
	}
	return recordOf(gr.g, i), nil
}

// slot finds partition (id, p)'s column in its group, loaded for this batch; a missing
// one is ErrStreamNotFound or ErrPartitionNotFound.
func (a *applier) slot(id uint64, p int32) (*group, int, error) {
	if p >= 0 {
		if gr := a.loadGroup(id, uint32(p)/groupSize); gr != nil && int(p%groupSize) < len(gr.g.HighWatermark) {
			return gr, int(p % groupSize), nil
		}
	}
	if a.err != nil {
		return nil, 0, fmt.Errorf("%w: partition %d/%d", ErrCorrupt, id, p)
	}
	if a.tx.Bucket(bStreamIDs).Get(u64(id)) == nil {
		return nil, 0, meta.ErrStreamNotFound
	}
	return nil, 0, meta.ErrPartitionNotFound
}

// putPartition stores a partition's record (the partition exists).
func (a *applier) putPartition(id uint64, p int32, rec *metapb.PartitionRecord) {
	gr := a.loadGroup(id, uint32(p)/groupSize)
	i := int(p % groupSize)
	if gr == nil || i >= len(gr.g.HighWatermark) {
		a.check(fmt.Errorf("fsm: put partition %d/%d: no such partition", id, p))
		return
	}
	g := gr.g
	g.LogStart[i], g.HighWatermark[i], g.Bytes[i], g.Settled[i] = rec.GetLogStart(), rec.GetHighWatermark(), rec.GetBytes(), rec.GetSettled()
	gr.dirty = true
}

// addPartitions creates partitions [from, to) of stream id, empty.
func (a *applier) addPartitions(id uint64, from, to int32) {
	for p := from; p < to; p++ {
		gi := uint32(p) / groupSize
		gr := a.loadGroup(id, gi)
		if gr == nil {
			if a.groups == nil {
				a.groups = map[gkey]*group{}
			}
			gr = &group{g: &metapb.PartitionGroup{}}
			a.groups[gkey{id, gi}] = gr
		}
		g := gr.g
		if int(p%groupSize) != len(g.HighWatermark) {
			a.check(fmt.Errorf("%w: add partition %d/%d: group holds %d", ErrCorrupt, id, p, len(g.HighWatermark)))
			return
		}
		g.LogStart, g.HighWatermark = append(g.LogStart, 0), append(g.HighWatermark, 0)
		g.Bytes, g.Settled = append(g.Bytes, 0), append(g.Settled, 0)
		gr.dirty = true
	}
}

// dropGroups deletes every partition group of stream id (stored and loaded).
func (a *applier) dropGroups(id uint64) {
	a.lastGroup = nil
	for k := range a.groups {
		if k.id == id {
			delete(a.groups, k)
		}
	}
	a.deletePrefix(a.tx.Bucket(bGroups), u64(id))
}

// flushGroups writes the dirty groups back, in key order.
func (a *applier) flushGroups() {
	keys := make([]gkey, 0, len(a.groups))
	for k, gr := range a.groups {
		if gr.dirty {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y gkey) int {
		if x.id != y.id {
			return cmp.Compare(x.id, y.id)
		}
		return cmp.Compare(x.g, y.g)
	})
	b := a.tx.Bucket(bGroups)
	for _, k := range keys {
		v, err := proto.Marshal(a.groups[k].g)
		a.check(err)
		a.check(b.Put(groupKey(k.id, k.g), v))
		a.groups[k].dirty = false
	}
}
