package fsm

import "github.com/loamhq/loam/shared/meta"

// eventBuilder gathers the partition updates of one CommitWal or CommitWalBatch entry:
// one per partition, at its first place, with every entry the command added and the last
// high watermark. The added entries are not copied: an update's Added is the run of the
// partition's tail the command appended (tails only grow past what was published, and a
// settled tail is replaced, never changed). Only a partition settled within the command has
// the entries appended before its settle copied out.
type eventBuilder struct {
	parts []evPart
	at    map[uint64][]int32 // stream, partition → 1 + index into parts
}

type evPart struct {
	k        pkey
	logStart int64
	hwm      int64
	from     int               // where the command's entries start in the current tail
	moved    []meta.IndexEntry // the command's entries a settle moved out of the tail
}

func (b *eventBuilder) reset() { b.parts = b.parts[:0] }

// place is partition k's slot in at (grown as needed).
func (b *eventBuilder) place(k pkey) *int32 {
	if b.at == nil {
		b.at = map[uint64][]int32{}
	}
	ps := b.at[k.id]
	if int(k.p) >= len(ps) {
		ps = append(ps, make([]int32, int(k.p)+1-len(ps))...)
		b.at[k.id] = ps
	}
	return &ps[k.p]
}

// touch notes that the command adds entries to partition k, whose log start is logStart.
func (b *eventBuilder) touch(a *applier, k pkey, logStart int64) {
	pl := b.place(k)
	if *pl != 0 {
		return
	}
	b.parts = append(b.parts, evPart{k: k, logStart: logStart, from: len(a.tailOf(k).es)})
	*pl = int32(len(b.parts))
}

func (b *eventBuilder) setHighWatermark(k pkey, hwm int64) {
	b.parts[*b.place(k)-1].hwm = hwm
}

// replacing is told that partition k's tail (pt) is about to be replaced by an empty one.
func (b *eventBuilder) replacing(k pkey, pt ptail) {
	if len(b.parts) == 0 {
		return
	}
	ps := b.at[k.id]
	if k.p < 0 || int(k.p) >= len(ps) || ps[k.p] == 0 {
		return
	}
	e := &b.parts[ps[k.p]-1]
	if e.from < len(pt.es) {
		e.moved = append(e.moved, pt.es[e.from:]...)
	}
	e.from = 0
}

// build returns the updates (nil when none) and resets the builder.
func (b *eventBuilder) build(a *applier) []meta.PartitionUpdate {
	if len(b.parts) == 0 {
		return nil
	}
	out := make([]meta.PartitionUpdate, len(b.parts))
	for i := range b.parts {
		e := &b.parts[i]
		cur := a.tailOf(e.k).es
		added := cur[e.from:len(cur):len(cur)]
		if len(e.moved) > 0 {
			added = append(e.moved, added...)
		}
		out[i] = meta.PartitionUpdate{StreamID: e.k.id, Partition: e.k.p, LogStart: e.logStart, HighWatermark: e.hwm, Added: added}
		*b.place(e.k) = 0
	}
	b.parts = b.parts[:0]
	return out
}

// slotOf is a chunk's partition column and the index of its partition in the commit.
type slotOf struct {
	gr  *group
	i   int
	upd int
}

// scratch holds buffers the applier reuses from one commit to the next.
type scratch struct {
	chunks []meta.Chunk
	slots  []slotOf
	first  []int
}

func (s *scratch) slotsFor(n int) []slotOf {
	if cap(s.slots) < n {
		s.slots = make([]slotOf, n)
	}
	return s.slots[:n]
}
