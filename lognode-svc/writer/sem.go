package writer

import (
	"context"
	"sync"
)

// byteSem bounds the bytes buffered and in flight. A single request larger than the limit
// is admitted alone, so no request can wait forever.
type byteSem struct {
	mu    sync.Mutex
	limit int64
	used  int64
	wake  chan struct{}
}

func newByteSem(limit int64) *byteSem { return &byteSem{limit: limit, wake: make(chan struct{})} }

func (s *byteSem) acquire(ctx context.Context, n int64) error {
	for {
		s.mu.Lock()
		if s.used == 0 || s.used+n <= s.limit {
			s.used += n
			s.mu.Unlock()
			return nil
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *byteSem) release(n int64) {
	s.mu.Lock()
	s.used -= n
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}
