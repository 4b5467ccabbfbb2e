package journal

import (
	"container/list"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
)

// Errors of the journal (besides the producer errors of meta).
var (
	// ErrBadBatches: an append's batches do not parse (framing, magic, CRC) or hold no
	// records. Nothing was written.
	ErrBadBatches = errors.New("journal: bad batches")
	// ErrOffloaded: the offset is below the journal's first retained offset; it is in a
	// segment (SegmentRef) or was trimmed.
	ErrOffloaded = errors.New("journal: offset offloaded")
	// ErrMoved: the partition is sealed in this journal: it is moving to another journal
	// (or moved). Nothing was written; retry on the journal the placement names.
	ErrMoved = errors.New("journal: partition moved")
)

// DefaultMaxProducerStates is the default bound on producer states per journal.
const DefaultMaxProducerStates = 100000

// Request ids: the journal remembers the result of each committed append that carries a
// request id for RequestIDWindow on its clock, and at most MaxRequestIDs of them (oldest
// forgotten first; about 50 bytes each, 13 MiB at the bound), so a node may retry an
// append whose outcome it does not know (its forward's connection broke, the leader
// changed) without writing it twice.
const (
	RequestIDWindow = time.Minute
	MaxRequestIDs   = 1 << 18
)

type reqRec struct {
	id          uint64
	base, count int64
	dup         bool
	ms          int64
}

// Result is the outcome of one applied Append.
type Result struct {
	Base      int64 // the first assigned offset (a duplicate's: the original's)
	Count     int64 // offsets the batches take
	Duplicate bool  // an idempotent retry: nothing was written
	Err       error // a refusal: nothing was written (meta.ErrOutOfOrderSequence, meta.ErrProducerFenced, ErrBadBatches)
	Index     uint64
}

// stored is one applied append: its batches, base offsets written in.
type stored struct {
	base, count int64
	data        []byte
}

type partState struct {
	start    int64 // first offset the journal still holds
	next     int64 // next offset to assign
	entries  []stored
	bytes    int64
	segments []SegmentRef
	sealed   bool // appends are refused (ErrMoved): the partition is moving away
}

type prodKey struct {
	id int64
	Partition
}

type prodState struct {
	key         prodKey
	epoch       int16
	first, last []int32
	base        []int64
	lastMs      int64
	elem        *list.Element
}

// State is a journal's state machine: deterministic, applied in log order on every member.
// It is not safe for concurrent use; Member guards it.
type State struct {
	parts        map[Partition]*partState
	prods        map[prodKey]*prodState
	lru          *list.List // of *prodState, least recently used first
	clock        int64
	retained     int64
	maxProducers int
	reqs         map[uint64]reqRec
	reqQ         []uint64 // request ids, oldest first, from reqHead on
	reqHead      int
}

// NewState returns an empty state holding at most maxProducers producer states
// (<= 0: DefaultMaxProducerStates). Every member of a journal must use the same bound.
func NewState(maxProducers int) *State {
	if maxProducers <= 0 {
		maxProducers = DefaultMaxProducerStates
	}
	return &State{parts: map[Partition]*partState{}, prods: map[prodKey]*prodState{}, lru: list.New(), maxProducers: maxProducers,
		reqs: map[uint64]reqRec{}}
}

// Retained is the bytes of batches the state holds.
func (s *State) Retained() int64 { return s.retained }

// Producers is the number of producer states held.
func (s *State) Producers() int { return len(s.prods) }

func (s *State) part(p Partition) *partState {
	ps := s.parts[p]
	if ps == nil {
		ps = &partState{}
		s.parts[p] = ps
	}
	return ps
}

func (s *State) tick(ms int64) {
	if ms > s.clock {
		s.clock = ms
	}
	// Forget idle producers, oldest first (their lastMs only grows along the list).
	for n := 0; n < 16; n++ {
		e := s.lru.Front()
		if e == nil {
			return
		}
		ps := e.Value.(*prodState)
		if ps.lastMs >= s.clock-meta.ProducerIdleExpiry.Milliseconds() {
			return
		}
		s.dropProducer(ps)
	}
}

// expireRequests forgets request ids past the window or the bound.
func (s *State) expireRequests() {
	for s.reqHead < len(s.reqQ) {
		id := s.reqQ[s.reqHead]
		if r := s.reqs[id]; len(s.reqs) <= MaxRequestIDs && r.ms >= s.clock-RequestIDWindow.Milliseconds() {
			break
		}
		delete(s.reqs, id)
		s.reqHead++
	}
	if s.reqHead > 1024 && s.reqHead*2 > len(s.reqQ) {
		s.reqQ = append(s.reqQ[:0], s.reqQ[s.reqHead:]...)
		s.reqHead = 0
	}
}

func (s *State) remember(id uint64, r Result) {
	if id == 0 {
		return
	}
	s.reqs[id] = reqRec{id: id, base: r.Base, count: r.Count, dup: r.Duplicate, ms: s.clock}
	s.reqQ = append(s.reqQ, id)
	s.expireRequests()
}

// Requests is the number of request ids remembered.
func (s *State) Requests() int { return len(s.reqs) }

func (s *State) dropProducer(ps *prodState) {
	s.lru.Remove(ps.elem)
	delete(s.prods, ps.key)
}

// ApplyAppend applies an Append entry. A retry of a committed request id is answered
// with the first result.
func (s *State) ApplyAppend(a Append) Result {
	s.tick(a.ClockMs)
	s.expireRequests()
	if r, ok := s.reqs[a.RequestID]; ok && a.RequestID != 0 {
		return Result{Base: r.base, Count: r.count, Duplicate: r.dup}
	}
	r := s.applyAppend(a)
	if r.Err == nil {
		s.remember(a.RequestID, r)
	}
	return r
}

func (s *State) applyAppend(a Append) Result {
	if pt := s.parts[a.Partition]; pt != nil && pt.sealed {
		return Result{Err: fmt.Errorf("%s is sealed for its move to another journal: %w", a.Partition, ErrMoved)}
	}
	var count int64
	for rest := a.Batches; len(rest) > 0; {
		b, r, err := recordbatch.Parse(rest)
		if err != nil {
			return Result{Err: fmt.Errorf("%w: %s: %v", ErrBadBatches, a.Partition, err)}
		}
		if b.LastOffsetDelta < 0 || b.NumRecords <= 0 {
			return Result{Err: fmt.Errorf("%w: %s: a batch of %d records, lastOffsetDelta %d", ErrBadBatches, a.Partition, b.NumRecords, b.LastOffsetDelta)}
		}
		count += b.OffsetCount()
		rest = r
	}
	if count == 0 {
		return Result{Err: fmt.Errorf("%w: %s: no batches", ErrBadBatches, a.Partition)}
	}
	var ps *prodState
	var seqFirst, seqLast int32
	if p := a.Producer; p.Has() {
		if p.BaseSequence < 0 {
			return Result{Err: fmt.Errorf("%s: producer %d base sequence %d: %w", a.Partition, p.ID, p.BaseSequence, meta.ErrOutOfOrderSequence)}
		}
		k := prodKey{p.ID, a.Partition}
		ps = s.prods[k]
		first, last := p.BaseSequence, meta.LastSequence(p.BaseSequence, count)
		switch {
		case ps != nil && p.Epoch < ps.epoch:
			return Result{Err: fmt.Errorf("%s: producer %d epoch %d, the partition saw %d: %w", a.Partition, p.ID, p.Epoch, ps.epoch, meta.ErrProducerFenced)}
		case ps != nil && p.Epoch == ps.epoch:
			for j := range ps.first {
				if ps.first[j] == first && ps.last[j] == last {
					s.touch(ps)
					return Result{Base: ps.base[j], Count: count, Duplicate: true}
				}
			}
			if n := len(ps.last); (n > 0 && !meta.NextSequence(ps.last[n-1], first)) || (n == 0 && first != 0) {
				return Result{Err: fmt.Errorf("%s: producer %d epoch %d base sequence %d after %d: %w", a.Partition, p.ID, p.Epoch, first, ps.lastSeq(), meta.ErrOutOfOrderSequence)}
			}
		default: // the producer's first chunk on the partition, or the first of a newer epoch
			if first != 0 {
				return Result{Err: fmt.Errorf("%s: producer %d epoch %d starts at sequence %d, want 0: %w", a.Partition, p.ID, p.Epoch, first, meta.ErrOutOfOrderSequence)}
			}
			if ps == nil {
				for len(s.prods) >= s.maxProducers {
					s.dropProducer(s.lru.Front().Value.(*prodState))
				}
				ps = &prodState{key: k}
				ps.elem = s.lru.PushBack(ps)
				s.prods[k] = ps
			}
			ps.epoch, ps.first, ps.last, ps.base = p.Epoch, ps.first[:0], ps.last[:0], ps.base[:0]
		}
		seqFirst, seqLast = first, last
	}
	pt := s.part(a.Partition)
	data := append([]byte(nil), a.Batches...)
	if err := recordbatch.SetBaseOffsets(data, pt.next); err != nil {
		// Parsed above, so it frames; kept as a guard.
		return Result{Err: fmt.Errorf("%w: %s: %v", ErrBadBatches, a.Partition, err)}
	}
	base := pt.next
	pt.entries = append(pt.entries, stored{base: base, count: count, data: data})
	pt.next += count
	pt.bytes += int64(len(data))
	s.retained += int64(len(data))
	if ps != nil {
		ps.first, ps.last, ps.base = append(ps.first, seqFirst), append(ps.last, seqLast), append(ps.base, base)
		if n := len(ps.first); n > meta.ProducerBatches {
			d := n - meta.ProducerBatches
			ps.first, ps.last, ps.base = append(ps.first[:0], ps.first[d:]...), append(ps.last[:0], ps.last[d:]...), append(ps.base[:0], ps.base[d:]...)
		}
		s.touch(ps)
	}
	return Result{Base: base, Count: count}
}

func (ps *prodState) lastSeq() int32 {
	if n := len(ps.last); n > 0 {
		return ps.last[n-1]
	}
	return -1
}

func (s *State) touch(ps *prodState) {
	ps.lastMs = s.clock
	s.lru.MoveToBack(ps.elem)
}

// ApplyTrim applies a Trim entry: the partition's entries wholly below t.Offset leave the
// journal and the segment is recorded. A trim beyond the next offset is refused.
func (s *State) ApplyTrim(t Trim) Result {
	s.tick(t.ClockMs)
	pt := s.part(t.Partition)
	if t.Offset > pt.next {
		return Result{Err: fmt.Errorf("%w: trim %s to %d beyond its next offset %d", meta.ErrInvalidArgument, t.Partition, t.Offset, pt.next)}
	}
	if t.Offset <= pt.start {
		return Result{Base: pt.start}
	}
	i := 0
	for i < len(pt.entries) && pt.entries[i].base+pt.entries[i].count <= t.Offset {
		pt.bytes -= int64(len(pt.entries[i].data))
		s.retained -= int64(len(pt.entries[i].data))
		i++
	}
	pt.entries = append(pt.entries[:0:0], pt.entries[i:]...)
	if len(pt.entries) > 0 {
		pt.start = pt.entries[0].base
	} else {
		pt.start = t.Offset
	}
	pt.segments = append(pt.segments, t.Segment)
	if n := len(pt.segments); n > MaxSegmentRefs {
		// The offset index holds every segment; the journal keeps the latest pointers.
		pt.segments = append(pt.segments[:0:0], pt.segments[n-MaxSegmentRefs:]...)
	}
	return Result{Base: pt.start}
}

// MaxSegmentRefs bounds the segment pointers a partition's state keeps (the latest;
// about 100 bytes each).
const MaxSegmentRefs = 64

// ApplyAssign applies an Assign entry: the stream's partitions below a.Partitions exist
// (empty ones are created), and those at or above it are dropped with their batches.
func (s *State) ApplyAssign(a Assign) Result {
	s.tick(a.ClockMs)
	for k, pt := range s.parts {
		if k.Stream == a.Stream && k.Partition >= a.Partitions {
			s.retained -= pt.bytes
			delete(s.parts, k)
		}
	}
	for p := uint32(0); p < a.Partitions; p++ {
		s.part(Partition{Stream: a.Stream, Partition: p})
	}
	return Result{}
}

// ApplySeal applies a Seal entry: the partition (created if absent) refuses appends with
// ErrMoved, or takes them again.
func (s *State) ApplySeal(e Seal) Result {
	s.tick(e.ClockMs)
	pt := s.part(e.Partition)
	pt.sealed = e.Sealed
	return Result{Base: pt.next}
}

// ApplyAdopt applies an Adopt entry: the partition starts at a.Start, open, with the
// carried producer states in place of any it had. A partition that holds batches not
// offloaded is refused (meta.ErrInvalidArgument: they would be lost); one whose next offset
// is past a.Start was adopted and written to already, and the entry changes nothing.
func (s *State) ApplyAdopt(a Adopt) Result {
	s.tick(a.ClockMs)
	pt := s.parts[a.Partition]
	switch {
	case pt != nil && pt.next > a.Start:
		return Result{Base: pt.next}
	case pt != nil && len(pt.entries) > 0:
		return Result{Err: fmt.Errorf("%w: adopt %s at %d: the journal holds [%d, %d) of it", meta.ErrInvalidArgument, a.Partition, a.Start, pt.start, pt.next)}
	}
	pt = s.part(a.Partition)
	pt.start, pt.next, pt.sealed = a.Start, a.Start, false
	for e := s.lru.Front(); e != nil; {
		ps := e.Value.(*prodState)
		e = e.Next()
		if ps.key.Partition == a.Partition {
			s.dropProducer(ps)
		}
	}
	for _, c := range a.Producers {
		for len(s.prods) >= s.maxProducers {
			s.dropProducer(s.lru.Front().Value.(*prodState))
		}
		ps := &prodState{key: prodKey{c.ID, a.Partition}, epoch: c.Epoch, first: append([]int32(nil), c.First...),
			last: append([]int32(nil), c.Last...), base: append([]int64(nil), c.Base...), lastMs: s.clock}
		ps.elem = s.lru.PushBack(ps)
		s.prods[ps.key] = ps
	}
	return Result{Base: pt.next}
}

// Sealed reports whether the partition refuses appends for a move.
func (s *State) Sealed(p Partition) bool {
	pt := s.parts[p]
	return pt != nil && pt.sealed
}

// ProducersOf is the partition's producer states, most recently used first, at most
// meta.MaxMoveProducers of them (what a move carries).
func (s *State) ProducersOf(p Partition) []meta.ProducerCarry {
	var out []meta.ProducerCarry
	for e := s.lru.Back(); e != nil && len(out) < meta.MaxMoveProducers; e = e.Prev() {
		ps := e.Value.(*prodState)
		if ps.key.Partition == p {
			out = append(out, meta.ProducerCarry{ID: ps.key.id, Epoch: ps.epoch, First: append([]int32(nil), ps.first...),
				Last: append([]int32(nil), ps.last...), Base: append([]int64(nil), ps.base...)})
		}
	}
	return out
}

// Has reports whether the partition is in the journal (assigned or written).
func (s *State) Has(p Partition) bool { return s.parts[p] != nil }

// ReadResult is what Read returns.
type ReadResult struct {
	Batches       []byte // whole batches, the first one holding the offset asked for
	Next          int64  // the offset after the last batch returned
	HighWatermark int64  // the partition's next offset
	Start         int64  // the first offset the journal holds
}

// Read returns the partition's committed batches from offset on, at least one batch when
// there is one and then more while they fit in maxBytes. An offset below Start is
// ErrOffloaded, beyond the high watermark meta.ErrOffsetOutOfRange; at the high
// watermark it returns no batches.
func (s *State) Read(p Partition, offset int64, maxBytes int) (ReadResult, error) {
	pt := s.parts[p]
	if pt == nil {
		pt = &partState{}
	}
	r := ReadResult{Next: offset, HighWatermark: pt.next, Start: pt.start}
	switch {
	case offset < pt.start:
		return r, fmt.Errorf("%s offset %d, the journal starts at %d: %w", p, offset, pt.start, ErrOffloaded)
	case offset > pt.next:
		return r, fmt.Errorf("%s offset %d beyond the high watermark %d: %w", p, offset, pt.next, meta.ErrOffsetOutOfRange)
	case offset == pt.next:
		return r, nil
	}
	i := sort.Search(len(pt.entries), func(i int) bool { return pt.entries[i].base+pt.entries[i].count > offset })
	var out []byte
	for ; i < len(pt.entries); i++ {
		e := pt.entries[i]
		if len(out) > 0 && len(out)+len(e.data) > maxBytes {
			break
		}
		out = append(out, e.data...)
		r.Next = e.base + e.count
	}
	r.Batches = out
	return r, nil
}

// Next is the partition's next offset (its high watermark).
func (s *State) Next(p Partition) int64 {
	if pt := s.parts[p]; pt != nil {
		return pt.next
	}
	return 0
}

// Segments lists the partition's offloaded segments, oldest first.
func (s *State) Segments(p Partition) []SegmentRef {
	if pt := s.parts[p]; pt != nil {
		return append([]SegmentRef(nil), pt.segments...)
	}
	return nil
}

// clone is a copy sharing the immutable batch bytes, for a snapshot taken while the
// state moves on.
func (s *State) clone() *State {
	c := NewState(s.maxProducers)
	c.clock, c.retained = s.clock, s.retained
	for k, pt := range s.parts {
		c.parts[k] = &partState{start: pt.start, next: pt.next, bytes: pt.bytes, sealed: pt.sealed,
			entries: append([]stored(nil), pt.entries...), segments: append([]SegmentRef(nil), pt.segments...)}
	}
	for e := s.lru.Front(); e != nil; e = e.Next() {
		ps := e.Value.(*prodState)
		cp := &prodState{key: ps.key, epoch: ps.epoch, lastMs: ps.lastMs,
			first: append([]int32(nil), ps.first...), last: append([]int32(nil), ps.last...), base: append([]int64(nil), ps.base...)}
		cp.elem = c.lru.PushBack(cp)
		c.prods[cp.key] = cp
	}
	for _, id := range s.reqQ[s.reqHead:] {
		c.reqs[id] = s.reqs[id]
		c.reqQ = append(c.reqQ, id)
	}
	return c
}
