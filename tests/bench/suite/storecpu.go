package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/loamhq/loam/shared/objstore"
)

// storeOffCPU is the Loam child's bucket when the suite pins: its Puts store the object on
// threads pinned to the load generator's CPU, so the server CPU pays for a PUT what a log
// node pays for one to S3 (a copy of the body out of the caller's buffer, as a socket
// write makes, and the wait) and not for keeping it: on this machine's VM, the in-memory
// bucket's copies onto fresh pages ran at about 2 GB/s and took half of the server CPU
// in the produce rows, a cost that S3 bears on its own machines. Gets, ranges, lists and
// deletes run on the caller, as they do against S3 (a read lands in a new buffer of the
// caller's).
type storeOffCPU struct {
	objstore.Bucket
	reqs chan *offPut
	pool sync.Pool // staging buffers ([]byte)
}

type offPut struct {
	ctx  context.Context
	key  string
	body []byte
	opts []objstore.PutOption
	err  chan error
}

// newStoreOffCPU starts workers storing threads pinned to the CPUs of list (taskset's
// syntax: "0" or "0,2").
func newStoreOffCPU(b objstore.Bucket, list string, workers int) (*storeOffCPU, error) {
	var set unix.CPUSet
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("suite: -store-cpu %q: %v", list, err)
		}
		set.Set(n)
	}
	s := &storeOffCPU{Bucket: b, reqs: make(chan *offPut)}
	started := make(chan error, workers)
	for range workers {
		go func() {
			runtime.LockOSThread() // the thread stays pinned, and never runs another goroutine
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				started <- fmt.Errorf("suite: pin a storing thread to CPU %s: %w", list, err)
				return
			}
			started <- nil
			for p := range s.reqs {
				p.err <- s.Bucket.Put(p.ctx, p.key, p.body, p.opts...)
			}
		}()
	}
	for range workers {
		if err := <-started; err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *storeOffCPU) Put(ctx context.Context, key string, body []byte, opts ...objstore.PutOption) error {
	buf, _ := s.pool.Get().([]byte)
	if cap(buf) < len(body) {
		buf = make([]byte, len(body))
	}
	buf = buf[:len(body)]
	copy(buf, body) // the caller's side of the transfer
	p := &offPut{ctx: ctx, key: key, body: buf, opts: opts, err: make(chan error, 1)}
	var err error
	select {
	case s.reqs <- p:
		err = <-p.err
	case <-ctx.Done():
		err = fmt.Errorf("objstore: put %s: %w", key, ctx.Err())
	}
	s.pool.Put(buf[:0]) //nolint:staticcheck // a slice header: the allocation is what is reused
	return err
}
