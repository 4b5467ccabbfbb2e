package fsm

import (
	"encoding/binary"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
	bolt "go.etcd.io/bbolt"
)

// The pending entries in memory. Every partition's entries at or above its settled offset
// (those of pending commits) are kept in memory as its tail, so neither a Lookup nor a
// settle decodes pending records: the pending bucket is their durable copy, read back when
// the database is opened or restored.
//
// A partition is settled (its tail written as one index block) when its tail reaches
// settleAt entries, a per-partition number between blockEntries/2 and blockEntries, so
// partitions written in lockstep (every commit naming the same thousand) settle a few at a
// time instead of all in the same commit. A pending record is deleted when the last of its
// chunks is settled. To bound memory and the pending bucket, when settleCommits records or
// maxPendingChunks chunks are pending, the partitions holding the oldest record's chunks
// are settled whatever their tails' length.
//
// Readers see the committed tails under FSM.tmu (held for the whole read); the applier
// stages the tails it changes and installs them while it holds tmu exclusively around its
// transaction's commit, so a reader's tails always match its bbolt snapshot. A staged tail
// may share its backing array with the committed one (append writes past the committed
// length, which no reader looks at); a settled tail is replaced by a new, empty one.

// maxPendingChunks bounds the chunks of pending records (about 80 bytes of memory each).
var maxPendingChunks = 1 << 20

// pkey names a partition.
type pkey struct {
	id uint64
	p  int32
}

// recKey names a pending record: the Raft index of its command and, for a commit of a
// CommitWalBatch, its position in the batch (-1 otherwise).
type recKey struct {
	index uint64
	sub   int32
}

func (k recKey) bytes() []byte { return pendingKey(k.index, int(k.sub)) }

func recKeyOf(b []byte) (recKey, error) {
	switch len(b) {
	case 8:
		return recKey{binary.BigEndian.Uint64(b), -1}, nil
	case 12:
		return recKey{binary.BigEndian.Uint64(b), int32(binary.BigEndian.Uint32(b[8:]))}, nil
	}
	return recKey{}, fmt.Errorf("%w: pending key of %d bytes", ErrCorrupt, len(b))
}

// ptail is a partition's tail: its pending entries in offset order and the record each
// came from (its slot in tails.slab: the tails hold no pointers for the collector to scan).
type ptail struct {
	es   []meta.IndexEntry
	recs []uint32
}

// precord is a pending record: its chunks not settled yet and the partitions it names.
type precord struct {
	key   recKey
	slot  uint32
	live  int
	parts []pkey
}

// tails is the in-memory state of the pending entries.
type tails struct {
	streams map[uint64][]ptail  // committed tails by stream and partition; read under FSM.tmu
	recs    map[recKey]*precord // live records; the applier's alone
	slab    []*precord          // live records by slot (nil: free)
	free    []uint32            // free slots of slab
	order   []recKey            // records in key order (dead ones leave lazily from the front)
	chunks  int                 // live chunks of all records
}

func newTails() *tails {
	return &tails{streams: map[uint64][]ptail{}, recs: map[recKey]*precord{}}
}

// get is partition k's committed tail.
func (t *tails) get(k pkey) ptail {
	ps := t.streams[k.id]
	if k.p < 0 || int(k.p) >= len(ps) {
		return ptail{}
	}
	return ps[k.p]
}

// put sets partition k's committed tail.
func (t *tails) put(k pkey, pt ptail) {
	ps := t.streams[k.id]
	if int(k.p) >= len(ps) {
		if pt.es == nil {
			return
		}
		ps = append(ps, make([]ptail, int(k.p)+1-len(ps))...)
		t.streams[k.id] = ps
	}
	ps[k.p] = pt
}

// stagedTails are one stream's tails changed by a batch.
type stagedTails struct {
	es      []ptail
	set     []bool
	deleted bool // the stream was deleted: drop all its tails
}

// settleAt is the tail length that settles partition k: between blockEntries/2 and
// blockEntries, by a fixed hash of k (the same on every replica).
func settleAt(k pkey) int {
	half := max(blockEntries/2, 1)
	h := k.id*0x9E3779B97F4A7C15 ^ uint64(uint32(k.p))*0xC2B2AE3D27D4EB4F
	h ^= h >> 31
	return half + int(h%uint64(blockEntries-half+1))
}

// loadTails reads the pending bucket into memory. Chunks of deleted partitions or below
// their partition's settled offset are skipped, and records left with none are deleted.
func loadTails(tx *bolt.Tx) (*tails, error) {
	t := newTails()
	var dead [][]byte
	settled := map[pkey]int64{} // -1: the partition is gone
	lastRec := map[pkey]int{}   // the record that last named the partition (1-based)
	c := tx.Bucket(bPending).Cursor()
	nrec := 0
	for k, v := c.First(); k != nil; k, v = c.Next() {
		rk, err := recKeyOf(k)
		if err != nil {
			return nil, err
		}
		nrec++
		r := t.newRecord(rk, 0, nil)
		var rerr error
		err = pendingChunks(k, v, func(object string, ch meta.Chunk, base int64) bool {
			pk := pkey{ch.StreamID, ch.Partition}
			s, ok := settled[pk]
			if !ok {
				rec, err := readPartition(tx, pk.id, pk.p)
				if err != nil {
					rerr = err
					return false
				}
				s = -1
				if rec != nil {
					s = rec.GetSettled()
				}
				settled[pk] = s
			}
			if s < 0 || base < s {
				return true
			}
			if lastRec[pk] != nrec {
				lastRec[pk] = nrec
				r.parts = append(r.parts, pk)
			}
			pt := t.get(pk)
			t.put(pk, ptail{es: append(pt.es, chunkEntry(object, ch, base)), recs: append(pt.recs, r.slot)})
			r.live++
			return true
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return nil, err
		}
		if r.live == 0 {
			t.slab[r.slot] = nil
			t.free = append(t.free, r.slot)
			dead = append(dead, append([]byte(nil), k...))
			continue
		}
		t.recs[rk] = r
		t.order = append(t.order, rk)
		t.chunks += r.live
	}
	b := tx.Bucket(bPending)
	for _, k := range dead {
		if err := b.Delete(k); err != nil {
			return nil, err
		}
	}
	// The count of pending records that format v3 settled by is not kept any more.
	if m := tx.Bucket(bMeta); m.Get(kPendingN) != nil {
		if err := m.Delete(kPendingN); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// tailForAppend is partition k's tail to append to (then setTail): a new one is allocated
// for the entries that settle it, so it does not grow by copying.
func (a *applier) tailForAppend(k pkey) ptail {
	pt := a.tailOf(k)
	if pt.es == nil {
		// Start small and grow by append: a partition written once must not cost its whole
		// settle length (256 to 512 entries, ~35 KiB) until it settles.
		n := min(settleAt(k), 4)
		pt = ptail{es: make([]meta.IndexEntry, 0, n), recs: make([]uint32, 0, n)}
	}
	return pt
}

// stagedOf is stream id's staged tails (created when create is set, else maybe nil).
func (a *applier) stagedOf(id uint64, create bool) *stagedTails {
	if a.lastStaged != nil && a.lastStagedID == id {
		return a.lastStaged
	}
	st := a.staged[id]
	if st == nil {
		if !create {
			return nil
		}
		if a.staged == nil {
			a.staged = map[uint64]*stagedTails{}
		}
		st = &stagedTails{}
		a.staged[id] = st
	}
	a.lastStaged, a.lastStagedID = st, id
	return st
}

// tailOf is partition k's tail as this batch left it so far.
func (a *applier) tailOf(k pkey) ptail {
	if st := a.stagedOf(k.id, false); st != nil && k.p >= 0 && int(k.p) < len(st.set) && st.set[k.p] {
		return st.es[k.p]
	}
	return a.t.get(k)
}

func (a *applier) setTail(k pkey, pt ptail) {
	st := a.stagedOf(k.id, true)
	if n := int(k.p) + 1; n > len(st.set) {
		n = max(n, len(a.t.streams[k.id]))
		st.es = append(st.es, make([]ptail, n-len(st.es))...)
		st.set = append(st.set, make([]bool, n-len(st.set))...)
	}
	st.es[k.p], st.set[k.p] = pt, true
}

// install makes the staged tails the committed ones (the caller holds FSM.tmu).
func (a *applier) install() {
	for id, st := range a.staged {
		if st.deleted {
			delete(a.t.streams, id)
			continue
		}
		for p, set := range st.set {
			if set {
				a.t.put(pkey{id, int32(p)}, st.es[p])
			}
		}
	}
	a.staged, a.lastStaged = nil, nil
}

// addRecord registers a pending record of n chunks naming parts.
func (a *applier) addRecord(rk recKey, n int, parts []pkey) *precord {
	r := a.t.newRecord(rk, n, parts)
	a.t.recs[rk] = r
	a.t.order = append(a.t.order, rk)
	a.t.chunks += n
	return r
}

// release marks one chunk of each record settled (or dropped), deleting a record with its
// last.
func (a *applier) release(slots []uint32) {
	for _, slot := range slots {
		var r *precord
		if int(slot) < len(a.t.slab) {
			r = a.t.slab[slot]
		}
		if r == nil || r.live <= 0 {
			a.check(fmt.Errorf("%w: pending record in slot %d released but not live", ErrCorrupt, slot))
			return
		}
		if r.live--; r.live == 0 {
			delete(a.t.recs, r.key)
			a.t.slab[slot] = nil
			a.t.free = append(a.t.free, slot)
			a.check(a.tx.Bucket(bPending).Delete(r.key.bytes()))
		}
	}
	a.t.chunks -= len(slots)
}

// dropTail releases partition k's pending entries without settling them (its stream is
// being deleted) and returns them.
func (a *applier) dropTail(k pkey) []meta.IndexEntry {
	pt := a.tailOf(k)
	a.release(pt.recs)
	if len(pt.es) > 0 {
		a.ev.replacing(k, pt)
		a.setTail(k, ptail{})
	}
	return pt.es
}

// settleTail writes partition k's tail into index blocks and empties it. The caller moves
// the partition's settled offset to its high watermark.
func (a *applier) settleTail(k pkey) {
	pt := a.tailOf(k)
	if len(pt.es) == 0 {
		return
	}
	a.release(pt.recs)
	a.appendBlocks(k.id, k.p, pt.es)
	a.ev.replacing(k, pt)
	a.setTail(k, ptail{})
}

// settleGroupSlot settles partition k, whose state is column i of group gr.
func (a *applier) settleGroupSlot(k pkey, gr *group, i int) {
	a.settleTail(k)
	gr.g.Settled[i] = gr.g.HighWatermark[i]
	gr.dirty = true
}

// settleOldest settles the partitions holding the oldest pending record's chunks while
// too many records or chunks are pending.
func (a *applier) settleOldest() {
	for a.err == nil && (len(a.t.recs) >= int(settleCommits) || a.t.chunks > maxPendingChunks) {
		for len(a.t.order) > 0 && a.t.recs[a.t.order[0]] == nil {
			a.t.order = a.t.order[1:]
		}
		if len(a.t.order) == 0 {
			a.check(fmt.Errorf("%w: %d pending records and none in order", ErrCorrupt, len(a.t.recs)))
			return
		}
		r := a.t.recs[a.t.order[0]]
		for _, k := range r.parts {
			if len(a.tailOf(k).es) == 0 {
				continue
			}
			gr, i, err := a.slot(k.id, k.p)
			if err != nil {
				a.check(fmt.Errorf("%w: pending entries of partition %d/%d, which does not exist", ErrCorrupt, k.id, k.p))
				return
			}
			a.settleGroupSlot(k, gr, i)
		}
		if a.t.recs[a.t.order[0]] != nil {
			a.check(fmt.Errorf("%w: pending record %d/%d still live after settling its partitions", ErrCorrupt, a.t.order[0].index, a.t.order[0].sub))
			return
		}
	}
	// Keep the order slice from holding on to a long dead prefix.
	if len(a.t.order) > 0 && cap(a.t.order) > 4*len(a.t.order)+64 {
		a.t.order = append([]recKey(nil), a.t.order...)
	}
}

// keyLess orders partitions by stream, then partition.
func keyLess(x, y pkey) bool { return x.id < y.id || x.id == y.id && x.p < y.p }

// newRecord makes a record and gives it a slot.
func (t *tails) newRecord(rk recKey, live int, parts []pkey) *precord {
	r := &precord{key: rk, live: live, parts: parts}
	if n := len(t.free); n > 0 {
		r.slot, t.free = t.free[n-1], t.free[:n-1]
		t.slab[r.slot] = r
	} else {
		r.slot = uint32(len(t.slab))
		t.slab = append(t.slab, r)
	}
	return r
}
