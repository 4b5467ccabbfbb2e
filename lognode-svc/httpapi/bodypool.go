package httpapi

import (
	"io"
	"math/bits"
	"net/http"
	"sync"

	"github.com/loamhq/loam/shared/streamapi"
)

// A JSON produce body is read, decoded (the decoded records own their bytes: encoding/json
// copies strings and raw values) and dropped before the produce is written. Its buffer
// goes back to a bodyPool for the next body to be read into, so a node under JSON load
// does not allocate and clear a fresh buffer per request. (A binary produce body is not
// pooled: its bytes are the writer's request, encoded into the WAL object as they are and
// kept by the tail cache.)

// bodyPoolIdleRequests is how many largest request bodies the idle buffers of a pool
// may add up to: the pool holds at most bodyPoolIdleRequests × MaxRequestBytes idle bytes
// (32 MiB with the default 8 MiB limit), whatever the load.
const bodyPoolIdleRequests = 4

// bodyPoolMinSize is the smallest buffer the pool keeps; smaller bodies are cheap to
// allocate and are not pooled.
const bodyPoolMinSize = 4 << 10

// bodyPool is a free list of body buffers in size classes: four per power of two (a
// buffer is at most 25 % larger than the body read into it), each class a stack. Idle
// buffers add up to at most maxIdle bytes; a buffer returned past that is left to the
// garbage collector. In-use buffers are bounded by the request admission
// (Limits.MaxInflightBodyBytes reserves each body's length; a buffer is at most 1.25 ×
// that).
type bodyPool struct {
	mu      sync.Mutex
	maxIdle int64
	idle    int64
	classes map[int][][]byte
	maxSize int   // the largest buffer kept: the class of MaxRequestBytes + 1
	misses  int64 // buffers allocated because none of the class was idle
}

func newBodyPool(maxRequestBytes int) *bodyPool {
	return &bodyPool{maxIdle: int64(bodyPoolIdleRequests) * int64(maxRequestBytes), classes: map[int][][]byte{},
		maxSize: classSize(sizeClass(maxRequestBytes + 1))}
}

// sizeClass is the class of a buffer of n bytes (n >= 1): 4 classes per power of two.
func sizeClass(n int) int {
	if n <= bodyPoolMinSize {
		return 0
	}
	e := bits.Len(uint(n-1)) - 1 // 2^e < n <= 2^(e+1)
	q := (n - 1 - (1 << e)) >> (e - 2)
	return 4*e + q + 1
}

// classSize is the capacity of a buffer of class c: the smallest size of the class's
// range, rounded up to hold every n of the class.
func classSize(c int) int {
	if c == 0 {
		return bodyPoolMinSize
	}
	e, q := (c-1)/4, (c-1)%4
	return 1<<e + (q+1)<<(e-2)
}

// get returns a buffer of length n (its bytes not cleared when reused).
func (p *bodyPool) get(n int) []byte {
	c := sizeClass(n)
	size := classSize(c)
	if size > p.maxSize {
		return make([]byte, n)
	}
	p.mu.Lock()
	if s := p.classes[c]; len(s) > 0 {
		b := s[len(s)-1]
		p.classes[c] = s[:len(s)-1]
		p.idle -= int64(cap(b))
		p.mu.Unlock()
		return b[:n]
	}
	p.misses++
	p.mu.Unlock()
	return make([]byte, n, size)
}

// put returns a buffer from get; nothing may use it afterwards.
func (p *bodyPool) put(b []byte) {
	c := sizeClass(cap(b))
	if cap(b) != classSize(c) || cap(b) > p.maxSize {
		return // not one of the pool's sizes
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle+int64(cap(b)) > p.maxIdle {
		return
	}
	p.idle += int64(cap(b))
	p.classes[c] = append(p.classes[c], b[:0])
}

// readPooled reads a request body as readRaw does, into a pooled buffer when its length
// is announced. release returns the buffer: call it once nothing refers to the body any
// more (it may be called more than once; it is never nil).
func (s *Server) readPooled(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err error) {
	if r.ContentLength <= 0 || r.ContentLength > int64(s.cfg.Limits.MaxRequestBytes) {
		body, err = s.readRaw(w, r)
		return body, func() {}, err
	}
	buf := s.bodies.get(int(r.ContentLength) + 1)
	done := false
	release = func() {
		if !done {
			done = true
			s.bodies.put(buf)
		}
	}
	mb := http.MaxBytesReader(w, r.Body, int64(s.cfg.Limits.MaxRequestBytes))
	n, err := io.ReadFull(mb, buf)
	switch {
	case err == io.ErrUnexpectedEOF && int64(n) == r.ContentLength:
		return buf[:n], release, nil
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		release()
		return nil, release, badInput(400, streamapi.CodeBadRequest, "the request body ended after %d of its %d announced bytes", n, r.ContentLength)
	case err != nil:
		release()
		return nil, release, bodyError(err)
	}
	// A body longer than announced (net/http stops a body at its Content-Length, so only
	// a handler called directly sees one): read it whole within the limit, unpooled.
	rest, err := io.ReadAll(mb)
	body = append(append([]byte(nil), buf[:n]...), rest...)
	release()
	return body, release, bodyError(err)
}
