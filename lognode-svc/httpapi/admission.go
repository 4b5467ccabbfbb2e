package httpapi

import (
	"sync"
	"sync/atomic"
)

// Admission is a log node's admission counters, shared by its HTTP and gRPC APIs:
// requests and calls served at once (at most Limits.MaxConcurrent, HTTP requests and
// loam.v1 calls together) and request body bytes held (at most
// Limits.MaxInflightBodyBytes, HTTP bodies and gRPC produce messages together). Past
// either, the API answers overloaded. Safe for concurrent use.
type Admission struct {
	lim      Limits
	requests atomic.Int64
	mu       sync.Mutex
	bodies   int64
}

// NewAdmission returns counters for lim (zero fields: the defaults).
func NewAdmission(lim Limits) *Admission { return &Admission{lim: lim.WithDefaults()} }

// Limits are the limits the counters apply.
func (a *Admission) Limits() Limits { return a.lim }

// Enter takes one request slot; false when MaxConcurrent are taken (nothing taken).
func (a *Admission) Enter() bool {
	if n := a.requests.Add(1); n > int64(a.lim.MaxConcurrent) {
		a.requests.Add(-1)
		return false
	}
	return true
}

// Leave gives back a slot Enter took.
func (a *Admission) Leave() { a.requests.Add(-1) }

// Hold reserves n body bytes; false (with the bytes held) when they would pass
// MaxInflightBodyBytes (nothing reserved).
func (a *Admission) Hold(n int64) (held int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bodies+n > a.lim.MaxInflightBodyBytes {
		return a.bodies, false
	}
	a.bodies += n
	return a.bodies, true
}

// Drop gives back n bytes Hold reserved.
func (a *Admission) Drop(n int64) {
	a.mu.Lock()
	a.bodies -= n
	a.mu.Unlock()
}

// Held reports the slots taken and the bytes reserved.
func (a *Admission) Held() (requests, bytes int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests.Load(), a.bodies
}
