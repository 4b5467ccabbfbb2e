package reader

import (
	"context"
	"sync"
)

// applied tracks the highest sequencer applied index this node's read path covers: every
// watch event up to it has been applied (Apply), so a partition state or index entry
// committed at or below it is visible to fetches here. A consistency token names such an
// index (the commit of a produce); a fetch that presents one waits for it (WaitApplied).
type applied struct {
	mu    sync.Mutex
	index uint64
	ch    chan struct{} // closed and replaced when index moves
}

func (a *applied) get() (uint64, chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ch == nil {
		a.ch = make(chan struct{})
	}
	return a.index, a.ch
}

func (a *applied) advance(index uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if index <= a.index {
		return
	}
	a.index = index
	if a.ch != nil {
		close(a.ch)
		a.ch = nil
	}
}

// Applied is the highest sequencer applied index whose watch event this reader has
// applied (0 before the first).
func (r *Reader) Applied() uint64 {
	i, _ := r.applied.get()
	return i
}

// WaitApplied waits until the reader has applied the watch events up to index (Applied()
// >= index), and reports whether it got there before ctx ended. It holds no lock while it
// waits and allocates nothing per waiter beyond the shared channel.
func (r *Reader) WaitApplied(ctx context.Context, index uint64) bool {
	for {
		i, ch := r.applied.get()
		if i >= index {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// Refresh drops what the reader knows of one partition (bounds and cached entries), so the
// next fetch looks its state up from the sequencer again; its long-polls wake and do so.
// A fetch whose consistency token the watch has not reached in time calls it: the
// sequencer's answer covers every commit it acknowledged.
func (r *Reader) Refresh(streamID uint64, partition int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.parts[pkey{streamID, partition}]; p != nil {
		r.removeLocked(p)
	}
}
