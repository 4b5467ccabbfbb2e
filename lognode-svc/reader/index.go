package reader

import (
	"container/list"
	"context"
	"fmt"
	"unsafe"

	"github.com/loamhq/loam/shared/meta"
)

// The reader's view of partitions: a bounded map of partition states (bounds, a notify
// channel, a run of cached index entries) kept only for partitions fetched here or written
// here recently, and one byte budget for the runs of all of them. Everything here is
// guarded by Reader.mu.

type partition struct {
	key           pkey
	logStart, hwm int64
	entries       []meta.IndexEntry // a contiguous run of the index, or empty
	notify        chan struct{}     // closed when hwm or logStart moves, and when the state is dropped
	// gen counts the times entries were dropped (a swap, a NotFound): a Lookup begun
	// before must not install its run.
	gen      uint64
	objBytes int64         // bytes of the Object strings of entries
	runBytes int64         // what entries cost against IndexCacheBytes
	el       *list.Element // in Reader.lru
	runEl    *list.Element // in Reader.runs while entries is non-empty
}

// pending is a partition whose bounds are being looked up: watch events for it that
// arrive meanwhile raise these, so the loaded state is not older than what was applied.
type pending struct {
	logStart, hwm int64
	loads         int
}

const entrySize = int64(unsafe.Sizeof(meta.IndexEntry{}))

func (p *partition) cost() int64 { return int64(cap(p.entries))*entrySize + p.objBytes }

// insertLocked starts tracking k, evicting the least recently used partition over the
// limit. An evicted partition's waiters are woken and re-resolve it.
func (r *Reader) insertLocked(k pkey, logStart, hwm int64) *partition {
	p := &partition{key: k, logStart: logStart, hwm: hwm, notify: make(chan struct{})}
	p.el = r.lru.PushFront(p)
	r.parts[k] = p
	for r.lru.Len() > r.cfg.MaxPartitions {
		r.removeLocked(r.lru.Back().Value.(*partition))
	}
	return p
}

func (r *Reader) removeLocked(p *partition) {
	r.dropRunLocked(p)
	r.lru.Remove(p.el)
	delete(r.parts, p.key)
	close(p.notify)
}

func (r *Reader) touchLocked(p *partition) { r.lru.MoveToFront(p.el) }

// dropRunLocked forgets p's cached entries.
func (r *Reader) dropRunLocked(p *partition) {
	if p.runEl != nil {
		r.runs.Remove(p.runEl)
		p.runEl = nil
	}
	r.indexBytes -= p.runBytes
	p.entries, p.objBytes, p.runBytes = nil, 0, 0
}

// accountLocked brings p's run into the budget after a change, evicting the runs used
// least recently; a run alone over the budget keeps its newest entries.
func (r *Reader) accountLocked(p *partition) {
	if len(p.entries) == 0 {
		r.dropRunLocked(p)
		return
	}
	c := p.cost()
	r.indexBytes += c - p.runBytes
	p.runBytes = c
	if p.runEl == nil {
		p.runEl = r.runs.PushFront(p)
	} else {
		r.runs.MoveToFront(p.runEl)
	}
	for r.indexBytes > r.cfg.IndexCacheBytes {
		victim := r.runs.Back().Value.(*partition)
		if victim != p {
			r.dropRunLocked(victim)
			continue
		}
		// p alone is over the budget: keep the newest half until it fits.
		if len(p.entries) <= 1 {
			r.dropRunLocked(p)
			return
		}
		r.trimFrontLocked(p, len(p.entries)/2)
	}
}

// trimFrontLocked drops p's first n entries, into a new array so the dropped ones are freed.
func (r *Reader) trimFrontLocked(p *partition, n int) {
	for _, e := range p.entries[:n] {
		p.objBytes -= int64(len(e.Object))
	}
	p.entries = append([]meta.IndexEntry(nil), p.entries[n:]...)
	c := p.cost()
	r.indexBytes += c - p.runBytes
	p.runBytes = c
}

func (r *Reader) addEntriesLocked(p *partition, added []meta.IndexEntry) {
	changed := false
	for _, e := range added {
		n := len(p.entries)
		switch {
		case n == 0:
			// Only a run that reaches the high watermark is kept: start one at the head.
			if e.BaseOffset == p.hwm || e.BaseOffset <= p.hwm && e.End() > p.hwm {
				p.entries = append(p.entries, e)
				p.objBytes += int64(len(e.Object))
				changed = true
			}
		case e.BaseOffset == p.entries[n-1].End():
			p.entries = append(p.entries, e)
			p.objBytes += int64(len(e.Object))
			changed = true
		case e.End() <= p.entries[n-1].End():
			// Already known (a local commit and its watch event).
		default:
			// A gap: the run no longer reaches the head. Look up again.
			r.dropRunLocked(p)
			p.gen++
			changed = false
		}
	}
	if over := len(p.entries) - r.cfg.IndexEntries; over > 0 {
		// Trim a quarter more than needed, so a long run is copied once every
		// IndexEntries/4 appends, not on each one.
		r.trimFrontLocked(p, min(len(p.entries), over+r.cfg.IndexEntries/4))
	}
	if changed {
		r.accountLocked(p)
	}
}

// setRunLocked installs a run read from the sequencer.
func (r *Reader) setRunLocked(p *partition, entries []meta.IndexEntry) {
	r.dropRunLocked(p)
	if len(entries) > r.cfg.IndexEntries {
		entries = entries[len(entries)-r.cfg.IndexEntries:]
	}
	p.entries = append([]meta.IndexEntry(nil), entries...)
	for _, e := range p.entries {
		p.objBytes += int64(len(e.Object))
	}
	r.accountLocked(p)
}

func (r *Reader) advanceLocked(p *partition, logStart, hwm int64) {
	moved := false
	if hwm > p.hwm {
		p.hwm = hwm
		moved = true
	}
	if logStart > p.logStart {
		p.logStart = logStart
		moved = true
		n := 0
		for n < len(p.entries) && p.entries[n].End() <= logStart {
			n++
		}
		if n == len(p.entries) {
			r.dropRunLocked(p)
		} else if n > 0 {
			r.trimFrontLocked(p, n)
			r.accountLocked(p)
		}
	}
	if moved {
		close(p.notify)
		p.notify = make(chan struct{})
	}
}

// state returns the partition's bounds and its notify channel, loading them if the
// partition is not tracked.
func (r *Reader) state(ctx context.Context, k pkey) (logStart, hwm int64, notify chan struct{}, err error) {
	r.mu.Lock()
	if p := r.parts[k]; p != nil {
		r.touchLocked(p)
		defer r.mu.Unlock()
		return p.logStart, p.hwm, p.notify, nil
	}
	pl := r.loading[k]
	if pl == nil {
		pl = &pending{logStart: -1, hwm: -1}
		r.loading[k] = pl
	}
	pl.loads++
	r.mu.Unlock()

	_, st, err := r.cfg.Meta.Lookup(ctx, k.stream, k.partition, 0, 0)

	r.mu.Lock()
	defer r.mu.Unlock()
	if pl.loads--; pl.loads == 0 {
		delete(r.loading, k)
	}
	if err != nil {
		return 0, 0, nil, err
	}
	logStart, hwm = max(st.LogStart, pl.logStart), max(st.HighWatermark, pl.hwm)
	p := r.parts[k]
	if p == nil {
		p = r.insertLocked(k, logStart, hwm)
	} else {
		r.touchLocked(p)
		r.advanceLocked(p, logStart, hwm)
	}
	return p.logStart, p.hwm, p.notify, nil
}

// entryFor returns the index entry holding offset: from the cached run, else a Lookup
// (whose run is kept when it reaches the head of the partition).
func (r *Reader) entryFor(ctx context.Context, k pkey, offset int64) (meta.IndexEntry, error) {
	r.mu.Lock()
	p := r.parts[k]
	var gen uint64
	if p != nil {
		gen = p.gen
		if es := p.entries; len(es) > 0 && offset >= es[0].BaseOffset {
			lo, hi := 0, len(es)
			for lo < hi {
				m := (lo + hi) / 2
				if es[m].End() <= offset {
					lo = m + 1
				} else {
					hi = m
				}
			}
			if lo < len(es) && es[lo].BaseOffset <= offset {
				e := es[lo]
				r.runs.MoveToFront(p.runEl)
				r.mu.Unlock()
				return e, nil
			}
		}
	}
	r.mu.Unlock()
	entries, st, err := r.cfg.Meta.Lookup(ctx, k.stream, k.partition, offset, 64)
	if err != nil {
		return meta.IndexEntry{}, err
	}
	if n := len(entries); n > 0 && entries[n-1].End() >= st.HighWatermark {
		// The run reaches the head of the partition: keep it, so the node can serve these
		// offsets without the sequencer (watch events extend it).
		r.mu.Lock()
		if p != nil && r.parts[k] == p && p.gen == gen && len(p.entries) == 0 && st.HighWatermark >= p.hwm {
			r.setRunLocked(p, entries)
		}
		r.mu.Unlock()
	}
	if len(entries) == 0 || entries[0].BaseOffset > offset || entries[0].End() <= offset {
		return meta.IndexEntry{}, fmt.Errorf("reader: stream %d partition %d: no index entry holds offset %d", k.stream, k.partition, offset)
	}
	return entries[0], nil
}

// dropEntries forgets the cached entries of k (they named an object that is gone).
func (r *Reader) dropEntries(k pkey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.parts[k]; p != nil {
		r.dropRunLocked(p)
		p.gen++
	}
}
