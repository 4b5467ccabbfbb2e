package server

import (
	"sync"

	"github.com/loamhq/loam/shared/meta"
)

// hub fans applied events out to watchers and keeps a ring of recent ones for replay.
// publish never blocks: a watcher whose queue is full is dropped and later told to Reset.
type hub struct {
	mu     sync.Mutex
	ring   []meta.Event // circular, oldest at head
	head   int
	n      int
	base   uint64 // every event with AppliedIndex > base is in the ring or still to come
	last   uint64 // index of the newest event (or base)
	subs   map[*sub]struct{}
	buffer int
	closed bool
}

type sub struct {
	ch      chan meta.Event
	resetAt uint64 // set when dropped: the index the watcher must reset to
}

func newHub(ring, buffer int, base uint64) *hub {
	return &hub{ring: make([]meta.Event, ring), base: base, last: base, subs: map[*sub]struct{}{}, buffer: buffer}
}

func (h *hub) publish(evs []meta.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range evs {
		if ev.Reset {
			h.n, h.head = 0, 0
			h.base, h.last = ev.AppliedIndex, ev.AppliedIndex
		} else {
			if h.n == len(h.ring) {
				h.base = h.ring[h.head].AppliedIndex
				h.head = (h.head + 1) % len(h.ring)
				h.n--
			}
			h.ring[(h.head+h.n)%len(h.ring)] = ev
			h.n++
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
