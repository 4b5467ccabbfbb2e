package otlp

import (
	"fmt"
	"sync"

	"github.com/loamhq/loam/lognode-svc/httpapi"
)

// admission bounds one transport's Exports: at most lim.MaxConcurrent at once, holding at
// most lim.MaxInflightBodyBytes of body bytes between them.
type admission struct {
	lim httpapi.Limits

	mu       sync.Mutex
	requests int
	bytes    int64
}

func newAdmission(lim httpapi.Limits) *admission { return &admission{lim: lim} }

// overloadError refuses an Export at admission (retryable).
type overloadError struct{ msg string }

func (e *overloadError) Error() string { return e.msg }

// enter admits one Export, or refuses it with *overloadError.
func (a *admission) enter() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.requests >= a.lim.MaxConcurrent {
		return &overloadError{fmt.Sprintf("the node serves %d OTLP exports at once, its limit: retry later", a.requests)}
	}
	a.requests++
	return nil
}

func (a *admission) leave() {
	a.mu.Lock()
	a.requests--
	a.mu.Unlock()
}

// reserve takes n bytes of the body budget, or refuses with *overloadError.
func (a *admission) reserve(n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bytes+n > a.lim.MaxInflightBodyBytes {
		return &overloadError{fmt.Sprintf("the node holds %d bytes of request bodies, its limit is %d: retry later", a.bytes, a.lim.MaxInflightBodyBytes)}
	}
	a.bytes += n
	return nil
}

func (a *admission) release(n int64) {
	a.mu.Lock()
	a.bytes -= n
	a.mu.Unlock()
}
