package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

// Idempotent producers (format v4). The state of each producer is:
//
//	producers            id u64 → metapb.ProducerRecord (namespace, name, epoch, bumped_from, last_ms)
//	producer_names       ns 0x00 name → id u64 (named producers)
//	producer_lru         ns 0x00 last_ms u64 | id u64 → "" (per namespace, least recently used first)
//	producer_time        last_ms u64 | id u64 → "" (all producers, oldest activity first: expiry)
//	producer_partitions  id u64 | stream u64 | partition u32 → metapb.ProducerPartitionRecord
//	producer_counts      ns → u64 (producers of the namespace, expired ones not yet pruned included)
//	meta                 next_producer_id → u64
//
// A producer whose last_ms is more than meta.ProducerIdleExpiry before the FSM clock is
// expired: every read treats it as absent whether or not it was pruned yet, so when
// pruning runs (at most pruneBatch per applied batch, oldest first) never changes an
// answer. A namespace at its cap evicts its least recently used producer before it gets a
// new one; expired producers are its oldest, so evicting one of them is what pruning
// would have done, and the producers left are the same on every replica.
//
// Bound: per namespace at most the cap (InitProducerCmd.max_producers, default
// meta.DefaultMaxProducers) producers of about 100 bytes each, plus, per producer and
// partition it wrote to, a record of about 20 + 16 x meta.ProducerBatches bytes (partition
// records of a deleted stream stay until their producer is removed). All of it lives in the
// bbolt file; an applied batch holds in memory only the records its commits touch.
var (
	bProducers      = []byte("producers")
	bProducerNames  = []byte("producer_names")
	bProducerLRU    = []byte("producer_lru")
	bProducerTime   = []byte("producer_time")
	bProducerParts  = []byte("producer_partitions")
	bProducerCounts = []byte("producer_counts")
	v4Buckets       = [][]byte{bProducers, bProducerNames, bProducerLRU, bProducerTime, bProducerParts, bProducerCounts}

	kNextPID = []byte("next_producer_id")
)

// migrateV3 adds the producer buckets of format v4.
func migrateV3(tx *bolt.Tx) error {
	for _, b := range v4Buckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return tx.Bucket(bMeta).Put(kFormat, []byte(formatV4))
}

// InitProducer is the command that allocates or bumps a producer (meta.Client.InitProducer),
// with the namespace cap maxProducers (<= 0: meta.DefaultMaxProducers).
func InitProducer(ns, name string, id int64, epoch int16, maxProducers int) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_InitProducer{InitProducer: &metapb.InitProducerCmd{
		Namespace: ns, Name: name, ProducerId: id, Epoch: int32(epoch), MaxProducers: int32(min(max(maxProducers, 0), math.MaxInt32))}}}
}

// activityGranularityMs: a commit moves a producer's last activity (and its place in the
// eviction and expiry orders) only when it is at least this much older than the clock, so
// a producer committing several times a second costs one record write a second.
const activityGranularityMs = 1000

func producerExpired(lastMs, clock int64) bool {
	return lastMs < clock-meta.ProducerIdleExpiry.Milliseconds()
}

func lruKey(ns string, lastMs int64, id int64) []byte {
	k := make([]byte, 0, len(ns)+17)
	k = append(k, ns...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint64(k, uint64(lastMs))
	return binary.BigEndian.AppendUint64(k, uint64(id))
}

func timeKey(lastMs, id int64) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(lastMs))
	return binary.BigEndian.AppendUint64(k, uint64(id))
}

func producerPartKey(id int64, stream uint64, p int32) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 20), uint64(id))
	k = binary.BigEndian.AppendUint64(k, stream)
	return binary.BigEndian.AppendUint32(k, uint32(p))
}

// producer reads producer id's record, or nil when it does not exist or expired.
func (a *applier) producer(id int64) *metapb.ProducerRecord {
	if id <= 0 {
		return nil
	}
	v := a.tx.Bucket(bProducers).Get(u64(uint64(id)))
	if v == nil {
		return nil
	}
	rec := &metapb.ProducerRecord{}
	if err := proto.Unmarshal(v, rec); err != nil {
		a.check(fmt.Errorf("%w: producer record %d: %v", ErrCorrupt, id, err))
		return nil
	}
	if producerExpired(rec.GetLastMs(), a.clock) {
		return nil
	}
	return rec
}

// putProducer stores rec under id, moving its activity keys from oldMs (< 0: none) to
// rec.LastMs.
func (a *applier) putProducer(id int64, rec *metapb.ProducerRecord, oldMs int64) {
	if oldMs >= 0 && oldMs != rec.GetLastMs() {
		a.check(a.tx.Bucket(bProducerLRU).Delete(lruKey(rec.GetNamespace(), oldMs, id)))
		a.check(a.tx.Bucket(bProducerTime).Delete(timeKey(oldMs, id)))
	}
	v, err := proto.Marshal(rec)
	a.check(err)
	a.check(a.tx.Bucket(bProducers).Put(u64(uint64(id)), v))
	a.check(a.tx.Bucket(bProducerLRU).Put(lruKey(rec.GetNamespace(), rec.GetLastMs(), id), nil))
	a.check(a.tx.Bucket(bProducerTime).Put(timeKey(rec.GetLastMs(), id), nil))
}

// removeProducer deletes producer id (its record as read, expired or not): its name, its
// activity keys, its partition records, and one from its namespace's count.
func (a *applier) removeProducer(id int64, rec *metapb.ProducerRecord) {
	ns := rec.GetNamespace()
	if rec.GetName() != "" {
		nk := streamKey(ns, rec.GetName())
		if getU64(a.tx.Bucket(bProducerNames), nk) == uint64(id) {
			a.check(a.tx.Bucket(bProducerNames).Delete(nk))
		}
	}
	a.check(a.tx.Bucket(bProducerLRU).Delete(lruKey(ns, rec.GetLastMs(), id)))
	a.check(a.tx.Bucket(bProducerTime).Delete(timeKey(rec.GetLastMs(), id)))
	a.check(a.tx.Bucket(bProducers).Delete(u64(uint64(id))))
	a.deletePrefix(a.tx.Bucket(bProducerParts), u64(uint64(id)))
	counts := a.tx.Bucket(bProducerCounts)
	if n := getU64(counts, []byte(ns)); n > 1 {
		a.check(putU64(counts, []byte(ns), n-1))
	} else {
		a.check(counts.Delete([]byte(ns)))
	}
}

// rawProducer reads producer id's record whether or not it expired (nil when absent).
func (a *applier) rawProducer(id int64) *metapb.ProducerRecord {
	v := a.tx.Bucket(bProducers).Get(u64(uint64(id)))
	if v == nil {
		return nil
	}
	rec := &metapb.ProducerRecord{}
	if err := proto.Unmarshal(v, rec); err != nil {
		a.check(fmt.Errorf("%w: producer record %d: %v", ErrCorrupt, id, err))
		return nil
	}
	return rec
}

// newProducer allocates the next producer id in ns at epoch 0, evicting the namespace's
// least recently used producers while it is at its cap.
func (a *applier) newProducer(ns, name string, limit int) meta.Producer {
	counts := a.tx.Bucket(bProducerCounts)
	for int(getU64(counts, []byte(ns))) >= limit {
		prefix := streamKey(ns, "")
		k, _ := a.tx.Bucket(bProducerLRU).Cursor().Seek(prefix)
		if k == nil || !bytes.HasPrefix(k, prefix) || len(k) != len(prefix)+16 {
			// The count says more than the index holds: trust the index.
			a.check(counts.Delete([]byte(ns)))
			break
		}
		victim := int64(binary.BigEndian.Uint64(k[len(prefix)+8:]))
		rec := a.rawProducer(victim)
		if rec == nil {
			a.check(fmt.Errorf("%w: producer lru key %x names missing producer %d", ErrCorrupt, k, victim))
			return meta.Producer{}
		}
		a.removeProducer(victim, rec)
		if a.err != nil {
			return meta.Producer{}
		}
	}
	m := a.tx.Bucket(bMeta)
	id := int64(getU64(m, kNextPID))
	if id <= 0 {
		id = 1
	}
	a.check(putU64(m, kNextPID, uint64(id+1)))
	rec := &metapb.ProducerRecord{Namespace: ns, Name: name, Epoch: 0, BumpedFrom: -1, LastMs: a.clock}
	a.putProducer(id, rec, -1)
	if name != "" {
		a.check(putU64(a.tx.Bucket(bProducerNames), streamKey(ns, name), uint64(id)))
	}
	a.check(putU64(counts, []byte(ns), getU64(counts, []byte(ns))+1))
	return meta.Producer{ID: id, Epoch: 0}
}

// initProducer applies an InitProducerCmd (meta.Client.InitProducer).
func (a *applier) initProducer(c *metapb.InitProducerCmd) (meta.Producer, error) {
	ns, name, id := c.GetNamespace(), c.GetName(), c.GetProducerId()
	if c.GetEpoch() < math.MinInt16 || c.GetEpoch() > math.MaxInt16 {
		return meta.Producer{}, fmt.Errorf("%w: init producer: epoch %d is not an int16", meta.ErrInvalidArgument, c.GetEpoch())
	}
	epoch := int16(c.GetEpoch())
	if err := meta.CheckProducerRequest(ns, name, id, epoch); err != nil {
		return meta.Producer{}, err
	}
	if !a.nsExists(ns) {
		return meta.Producer{}, fmt.Errorf("init producer in %s: %w", ns, meta.ErrNamespaceNotFound)
	}
	limit := int(c.GetMaxProducers())
	if limit <= 0 {
		limit = meta.DefaultMaxProducers
	}
	if name != "" {
		pid := int64(getU64(a.tx.Bucket(bProducerNames), streamKey(ns, name)))
		var rec *metapb.ProducerRecord
		if pid > 0 {
			if rec = a.producer(pid); rec == nil {
				if old := a.rawProducer(pid); old != nil {
					a.removeProducer(pid, old) // expired: forget it now
				}
			}
		}
		if rec == nil {
			return a.newProducer(ns, name, limit), nil
		}
		if id > 0 && id != pid {
			return meta.Producer{}, fmt.Errorf("init producer %s/%s: presented producer id %d, the name is held by %d: %w",
				ns, name, id, pid, meta.ErrProducerFenced)
		}
		return a.bumpProducer(pid, rec, limit), nil
	}
	if id <= 0 {
		return a.newProducer(ns, "", limit), nil
	}
	rec := a.producer(id)
	if rec == nil || rec.GetNamespace() != ns {
		if rec == nil {
			if old := a.rawProducer(id); old != nil && old.GetNamespace() == ns {
				a.removeProducer(id, old)
			}
		}
		// Unknown, expired or of another namespace: a fresh producer (Kafka allocates a
		// new id to an idempotent producer whose state is gone).
		return a.newProducer(ns, "", limit), nil
	}
	cur := int16(rec.GetEpoch())
	switch {
	case epoch == cur:
		rec.BumpedFrom = int32(cur)
		return a.bumpProducer(id, rec, limit), nil
	case rec.GetBumpedFrom() >= 0 && int32(epoch) == rec.GetBumpedFrom() && int32(cur) == rec.GetBumpedFrom()+1:
		// A repeat of the last bump (its answer was lost): the same answer.
		old := rec.GetLastMs()
		rec.LastMs = a.clock
		a.putProducer(id, rec, old)
		return meta.Producer{ID: id, Epoch: cur}, nil
	case epoch < cur:
		return meta.Producer{}, fmt.Errorf("init producer %d: epoch %d, current %d: %w", id, epoch, cur, meta.ErrProducerFenced)
	default:
		return meta.Producer{}, fmt.Errorf("init producer %d: epoch %d was never issued (current %d): %w", id, epoch, cur, meta.ErrUnknownProducer)
	}
}

// bumpProducer moves producer id to epoch + 1 (its partitions' sequences restart at 0),
// or to a new id at epoch 0 when the epoch would pass math.MaxInt16 (the name follows).
func (a *applier) bumpProducer(id int64, rec *metapb.ProducerRecord, limit int) meta.Producer {
	if rec.GetEpoch() >= math.MaxInt16 {
		ns, name := rec.GetNamespace(), rec.GetName()
		a.removeProducer(id, rec)
		return a.newProducer(ns, name, limit)
	}
	if rec.GetBumpedFrom() != rec.GetEpoch() {
		rec.BumpedFrom = -1 // a bump by name: no id-presented repeat to recognize
	}
	old := rec.GetLastMs()
	rec.Epoch++
	rec.LastMs = a.clock
	a.putProducer(id, rec, old)
	return meta.Producer{ID: id, Epoch: int16(rec.GetEpoch())}
}

// pruneProducers deletes up to n expired producers, oldest first, and returns how many.
func (a *applier) pruneProducers(n int) int {
	tb := a.tx.Bucket(bProducerTime)
	var victims []int64
	c := tb.Cursor()
	for k, _ := c.First(); k != nil && len(victims) < n; k, _ = c.Next() {
		if len(k) != 16 || !producerExpired(int64(binary.BigEndian.Uint64(k)), a.clock) {
			break
		}
		victims = append(victims, int64(binary.BigEndian.Uint64(k[8:])))
	}
	for _, id := range victims {
		if rec := a.rawProducer(id); rec != nil {
			a.removeProducer(id, rec)
		} else {
			// An orphan key: drop it.
			c := tb.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if len(k) == 16 && int64(binary.BigEndian.Uint64(k[8:])) == id {
					a.check(tb.Delete(bytes.Clone(k)))
					break
				}
			}
		}
	}
	return len(victims)
}

// ---- CommitWal checks ----

// pstate is one producer's state on one partition while a commit is applied: the stored
// record as changed by the commit's earlier chunks. chunk[i] is the commit's chunk that
// added batch i (-1: stored before), whose base offset is known only after assignment.
type pstate struct {
	key   []byte
	rec   *metapb.ProducerPartitionRecord
	chunk []int
	dirty bool
}

// producerCheck is the producer side of one CommitWal's application.
type producerCheck struct {
	states map[string]*pstate
	order  []*pstate
	recs   map[int64]*metapb.ProducerRecord // producers read by the commit (nil: unknown)
	oldMs  map[int64]int64
	dupOf  map[int]int   // chunk -> earlier chunk of the same commit it duplicates
	dupIn  map[int]int64 // chunk -> where its records start in the dupOf chunk
	dupAt  map[int]int64 // chunk -> original base offset
	active map[int64]bool
}

// streamNamespace is the namespace of stream id ("" when it does not exist).
func (a *applier) streamNamespace(id uint64) string {
	sk := a.tx.Bucket(bStreamIDs).Get(u64(id))
	if i := bytes.IndexByte(sk, 0); i >= 0 {
		return string(sk[:i])
	}
	return ""
}

// checkProducers checks every chunk of c that carries a producer and is not refused yet,
// in chunk order, setting its status (allocated when nil) to ChunkDuplicate or a
// producer refusal. It returns nil when no chunk carries a producer.
func (a *applier) checkProducers(c meta.CommitWal, status *[]meta.ChunkStatus) *producerCheck {
	var pc *producerCheck
	nsOf := map[uint64]string{}
	set := func(i int, st meta.ChunkStatus) {
		if *status == nil {
			*status = make([]meta.ChunkStatus, len(c.Chunks))
		}
		(*status)[i] = st
	}
	for i, ch := range c.Chunks {
		p := ch.Producer
		if !p.Has() || (*status != nil && (*status)[i] != meta.ChunkCommitted) {
			continue
		}
		if pc == nil {
			pc = &producerCheck{states: map[string]*pstate{}, recs: map[int64]*metapb.ProducerRecord{},
				oldMs: map[int64]int64{}, dupOf: map[int]int{}, dupIn: map[int]int64{}, dupAt: map[int]int64{}, active: map[int64]bool{}}
		}
		rec, seen := pc.recs[p.ID]
		if !seen {
			rec = a.producer(p.ID)
			pc.recs[p.ID] = rec
			if rec != nil {
				pc.oldMs[p.ID] = rec.GetLastMs()
			}
		}
		ns, ok := nsOf[ch.StreamID]
		if !ok {
			ns = a.streamNamespace(ch.StreamID)
			nsOf[ch.StreamID] = ns
		}
		switch {
		case rec == nil || rec.GetNamespace() != ns:
			set(i, meta.ChunkUnknownProducer)
			continue
		case int32(p.Epoch) < rec.GetEpoch():
			set(i, meta.ChunkProducerFenced)
			continue
		case int32(p.Epoch) > rec.GetEpoch() || p.BaseSequence < 0:
			set(i, meta.ChunkUnknownProducer)
			continue
		}
		k := producerPartKey(p.ID, ch.StreamID, ch.Partition)
		s := pc.states[string(k)]
		if s == nil {
			s = &pstate{key: k, rec: &metapb.ProducerPartitionRecord{Epoch: -1}}
			if v := a.tx.Bucket(bProducerParts).Get(k); v != nil {
				if err := proto.Unmarshal(v, s.rec); err != nil {
					a.check(fmt.Errorf("%w: producer partition record %x: %v", ErrCorrupt, k, err))
					return pc
				}
			}
			s.chunk = make([]int, len(s.rec.GetFirstSeq()))
			for j := range s.chunk {
				s.chunk[j] = -1
			}
			pc.states[string(k)] = s
			pc.order = append(pc.order, s)
		}
		first, last := p.BaseSequence, meta.LastSequence(p.BaseSequence, ch.Records)
		r := s.rec
		if r.GetEpoch() == int32(p.Epoch) {
			// A chunk that follows the newest one is new; else one within a remembered
			// chunk (newest first: after a wrap, sequences repeat) is a duplicate.
			n := len(r.LastSeq)
			dup, in := -1, int64(0)
			for j := n - 1; j >= 0 && !(meta.NextSequence(r.LastSeq[n-1], first)); j-- {
				if d, ok := meta.SequencesWithin(r.FirstSeq[j], r.LastSeq[j], first, last); ok {
					dup, in = j, d
					break
				}
			}
			if dup >= 0 {
				set(i, meta.ChunkDuplicate)
				if s.chunk[dup] >= 0 {
					pc.dupOf[i], pc.dupIn[i] = s.chunk[dup], in
				} else {
					pc.dupAt[i] = r.BaseOffset[dup] + in
				}
				pc.active[p.ID] = true
				continue
			}
			if (n > 0 && !meta.NextSequence(r.LastSeq[n-1], first)) || (n == 0 && first != 0) {
				set(i, meta.ChunkOutOfOrderSequence)
				continue
			}
		} else {
			// The producer's first chunk on this partition, or its first of a new epoch.
			if first != 0 {
				set(i, meta.ChunkOutOfOrderSequence)
				continue
			}
			r.Epoch, r.FirstSeq, r.LastSeq, r.BaseOffset, s.chunk = int32(p.Epoch), nil, nil, nil, nil
		}
		r.FirstSeq, r.LastSeq, r.BaseOffset = append(r.FirstSeq, first), append(r.LastSeq, last), append(r.BaseOffset, -1)
		s.chunk = append(s.chunk, i)
		if n := len(r.FirstSeq); n > meta.ProducerBatches {
			d := n - meta.ProducerBatches
			r.FirstSeq, r.LastSeq, r.BaseOffset, s.chunk = r.FirstSeq[d:], r.LastSeq[d:], r.BaseOffset[d:], s.chunk[d:]
		}
		s.dirty = true
		pc.active[p.ID] = true
	}
	return pc
}

// finish fills the duplicates' base offsets into bases, stores the partition records with
// the base offsets the commit assigned, and marks the active producers used at the clock.
func (pc *producerCheck) finish(a *applier, c meta.CommitWal, bases []int64) {
	for i, at := range pc.dupAt {
		bases[i] = at
	}
	for i, j := range pc.dupOf {
		bases[i] = bases[j] + pc.dupIn[i]
	}
	pb := a.tx.Bucket(bProducerParts)
	for _, s := range pc.order {
		if !s.dirty {
			continue
		}
		for j, ch := range s.chunk {
			if ch >= 0 {
				s.rec.BaseOffset[j] = bases[ch]
			}
		}
		v, err := proto.Marshal(s.rec)
		a.check(err)
		a.check(pb.Put(s.key, v))
	}
	for _, ch := range c.Chunks {
		id := ch.Producer.ID
		if !pc.active[id] {
			continue
		}
		delete(pc.active, id)
		rec := pc.recs[id]
		if a.clock-pc.oldMs[id] < activityGranularityMs {
			continue // recent enough: the activity keys stay (fewer writes per commit)
		}
		rec.LastMs = a.clock
		a.putProducer(id, rec, pc.oldMs[id])
	}
}

// ---- reads ----

// ProducerState is a producer as the state machine holds it (for tools and tests).
type ProducerState struct {
	meta.Producer
	Namespace string
	Name      string
	LastMs    int64
}

// Producer reads producer id, and false when it does not exist or expired.
func (f *FSM) Producer(id int64) (ProducerState, bool) {
	var out ProducerState
	var ok bool
	_ = f.view(func(tx *bolt.Tx) error {
		a := applier{tx: tx, clock: int64(getU64(tx.Bucket(bMeta), kClock))}
		if rec := a.producer(id); rec != nil {
			out = ProducerState{Producer: meta.Producer{ID: id, Epoch: int16(rec.GetEpoch())}, Namespace: rec.GetNamespace(),
				Name: rec.GetName(), LastMs: rec.GetLastMs()}
			ok = true
		}
		return nil
	})
	return out, ok
}

// ProducerCount is the number of producers namespace ns holds (expired ones not yet
// pruned included).
func (f *FSM) ProducerCount(ns string) int {
	var n int
	_ = f.view(func(tx *bolt.Tx) error {
		n = int(getU64(tx.Bucket(bProducerCounts), []byte(ns)))
		return nil
	})
	return n
}

// dropRefusedParts removes from parts (and first) the partitions none of whose chunks is
// left to commit after the producer checks, and renumbers the slots' upd.
func dropRefusedParts(c meta.CommitWal, status []meta.ChunkStatus, slots []slotOf, parts []pkey, first []int) ([]pkey, []int) {
	if status == nil {
		return parts, first
	}
	live := make([]bool, len(parts))
	for i := range c.Chunks {
		if status[i] == meta.ChunkCommitted {
			live[slots[i].upd] = true
		}
	}
	remap := make([]int, len(parts))
	var np []pkey
	var nf []int
	for j, k := range parts {
		remap[j] = -1
		if !live[j] {
			continue
		}
		remap[j] = len(np)
		np = append(np, k)
		nf = append(nf, -1)
	}
	for i := range c.Chunks {
		if status[i] != meta.ChunkCommitted {
			continue
		}
		u := remap[slots[i].upd]
		slots[i].upd = u
		if nf[u] < 0 {
			nf[u] = i
		}
	}
	return np, nf
}
