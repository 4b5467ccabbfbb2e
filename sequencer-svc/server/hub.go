package server

import (
	"sync"

	"github.com/loamhq/loam/shared/meta"
)

// hub fans applied events out to watchers and keeps a ring of recent ones for replay.
// publish never blocks: a watcher whose queue is full is dropped and later told to Reset.
// The ring is bounded by events and by the index entries they add: a commit naming a
// thousand partitions makes one event of a thousand updates, and a group commit of 32 of
// them one event of 32,000 entries.
type hub struct {
	mu         sync.Mutex
	ring       []meta.Event // circular, oldest at head
	head       int
	n          int
	entries    int // index entries added by the ring's events
	maxEntries int
	base       uint64 // every event with AppliedIndex > base is in the ring or still to come
	last       uint64 // index of the newest event (or base)
	subs       map[*sub]struct{}
	buffer     int
	closed     bool
}

type sub struct {
	ch      chan meta.Event
	resetAt uint64 // set when dropped: the index the watcher must reset to
}

func newHub(ring, ringEntries, buffer int, base uint64) *hub {
	return &hub{ring: make([]meta.Event, ring), maxEntries: ringEntries, base: base, last: base, subs: map[*sub]struct{}{}, buffer: buffer}
}

// eventEntries counts the index entries an event adds.
func eventEntries(ev meta.Event) int {
	n := 0
	for _, u := range ev.Partitions {
		n += len(u.Added)
	}
	return n
}

func (h *hub) publish(evs []meta.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range evs {
		if ev.Reset {
			clear(h.ring)
			h.n, h.head, h.entries = 0, 0, 0
			h.base, h.last = ev.AppliedIndex, ev.AppliedIndex
		} else {
			size := eventEntries(ev)
			for h.n > 0 && (h.n == len(h.ring) || h.entries+size > h.maxEntries) {
				old := &h.ring[h.head]
				h.base = old.AppliedIndex
				h.entries -= eventEntries(*old)
				*old = meta.Event{} // let its entries go
				h.head = (h.head + 1) % len(h.ring)
				h.n--
			}
			h.ring[(h.head+h.n)%len(h.ring)] = ev
			h.n++
			h.entries += size
			h.last = ev.AppliedIndex
		}
		for s := range h.subs {
			select {
			case s.ch <- ev:
			default:
				h.drop(s)
			}
		}
	}
}

// drop closes a slow watcher's queue; it resets to the newest index (mu held).
func (h *hub) drop(s *sub) {
	s.resetAt = h.last
	delete(h.subs, s)
	close(s.ch)
}

// subscribe registers a watcher for events after from (0: after the newest). It returns
// the events to replay first, and reset = true when from is older than the ring (the
// watcher must Reset to start first). start is the index the watcher is at once it has
// handled the replay (or the reset).
func (h *hub) subscribe(from uint64) (s *sub, replay []meta.Event, start uint64, reset bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s = &sub{ch: make(chan meta.Event, h.buffer)}
	if h.closed {
		close(s.ch)
		return s, nil, h.last, false
	}
	h.subs[s] = struct{}{}
	switch {
	case from == 0:
		return s, nil, h.last, false
	case from < h.base:
		return s, nil, h.last, true
	}
	for i := 0; i < h.n; i++ {
		ev := h.ring[(h.head+i)%len(h.ring)]
		if ev.AppliedIndex > from {
			replay = append(replay, ev)
		}
	}
	return s, replay, max(from, h.last), false
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.ch)
	}
}

func (h *hub) lastIndex() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// close ends every watcher.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.ch)
	}
}

func (h *hub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}
