package objstore

import (
	"sync/atomic"
	"time"
)

// ZoneRetryAfter is how long a zone whose read failed (not a NotFound: an error such as a
// refused connection) is tried last by reads, so reads do not pay for a dead zone's
// attempts every time; the first read after it goes to it in its usual place again.
const ZoneRetryAfter = 5 * time.Second

// zoneHealth is when each zone's last read failed (Unix nanoseconds; 0: it answered since).
type zoneHealth [3]atomic.Int64

// readOrder is the zones in read order, those whose read failed within ZoneRetryAfter last.
func (e *Express) readOrder() [3]int {
	now := time.Now().UnixNano()
	var out [3]int
	n := 0
	for pass := range 2 {
		for _, i := range e.order {
			failed := e.health[i].Load()
			late := failed != 0 && now-failed < int64(ZoneRetryAfter)
			if late == (pass == 1) {
				out[n] = i
				n++
			}
		}
	}
	return out
}

func (e *Express) readFailed(i int) { e.health[i].Store(time.Now().UnixNano()) }

func (e *Express) readOK(i int) {
	if e.health[i].Load() != 0 {
		e.health[i].Store(0)
	}
}
