package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// TestConsumerBalance runs members that join, heartbeat every session/3 and leave or die,
// and checks after every heartbeat that no partition is leased to two members, and two
// sessions after each membership change that each of the M live members holds ⌊P/M⌋ to
// ⌈P/M⌉ of the P leases.
func TestConsumerBalance(t *testing.T) {
	const session = 9 * time.Second
	const parts = 10
	h := newHarness(t)
	stamp := t0
	if r := h.apply(stamp, CreateStream(meta.StreamConfig{Namespace: "default", Name: "s", Partitions: parts})); r.Err != nil {
		t.Fatal(r.Err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	type member struct {
		leases map[int32]int64 // partition → expiry, as its last heartbeat answered
	}
	live := map[string]*member{}
	dead := map[string]*member{} // stopped heartbeating, but may read until its leases end
	next := 0
	changedAt := stamp
	beat := func(name string, leave bool) {
		t.Helper()
		r := h.apply(stamp, ConsumerHeartbeat(meta.ConsumerHeartbeat{Namespace: "default", Consumer: "c", Stream: "s",
			Member: name, Session: session, Leave: leave}))
		if r.Err != nil {
			t.Fatalf("heartbeat of %s: %v", name, r.Err)
		}
		m := live[name]
		m.leases = map[int32]int64{}
		for _, l := range r.Consumer.Leases {
			m.leases[l.Partition] = l.ExpiresMs
		}
		// No partition is held by two members whose answered leases are still live.
		owner := map[int32]string{}
		all := map[string]*member{}
		for n, o := range dead {
			all[n] = o
		}
		for n, o := range live {
			all[n] = o
		}
		for n, o := range all {
			for p, exp := range o.leases {
				if exp <= stamp {
					continue
				}
				if prev, ok := owner[p]; ok {
					t.Fatalf("at %s partition %d leased to both %s and %s", rel(stamp), p, prev, n)
				}
				owner[p] = n
			}
		}
	}
	for step := 0; step < 400; step++ {
		switch x := rng.IntN(40); {
		case x == 0 && len(live) < 7: // join
			name := fmt.Sprintf("m%02d", next)
			next++
			live[name] = &member{}
			changedAt = stamp
		case x == 1 && len(live) > 1: // leave
			for n := range live {
				beat(n, true)
				delete(live, n)
				break
			}
			changedAt = stamp
		case x == 2 && len(live) > 1: // die: stops heartbeating
			for n, o := range live {
				dead[n] = o
				delete(live, n)
				break
			}
			changedAt = stamp
		}
		if len(live) == 0 {
			live[fmt.Sprintf("m%02d", next)] = &member{}
			next++
			changedAt = stamp
		}
		for n := range live {
			beat(n, false)
		}
		if stamp-changedAt >= 2*session.Milliseconds() {
			m := int32(len(live))
			for n, o := range live {
				if got := int32(len(o.leases)); got < parts/m || got > (parts+m-1)/m {
					t.Fatalf("at %s, %s after the last change: %s holds %d of %d partitions among %d members",
						rel(stamp), time.Duration(stamp-changedAt)*time.Millisecond, n, got, parts, m)
				}
			}
		}
		stamp += (session / 3).Milliseconds()
	}
}
