package fault

import (
	"testing"
	"time"

	"github.com/loamhq/loam/tests/cluster"
)

// objstoreFaults are the object-store faults the suite injects into both log nodes of a
// cluster under load. survives: the write path gets through while the fault is on, so at
// least half the requests sent during it must be acknowledged.
var objstoreFaults = []struct {
	name, fault, profile string
	survives             bool
}{
	{"slowdown", "slowdown", `{"rules": [{"op": "put", "fault": "slowdown", "p": 0.3}]}`, true},
	{"internal_error", "internal_error", `{"rules": [{"op": "*", "fault": "internal_error", "p": 0.3}]}`, true},
	{"timeout", "timeout", `{"rules": [{"op": "put", "fault": "timeout", "p": 0.2, "ms": 1500}, {"op": "get", "fault": "timeout", "p": 0.2, "ms": 1500}]}`, true},
	{"latency", "latency", `{"rules": [{"op": "*", "fault": "latency", "ms": 150, "jitter_ms": 100}]}`, true},
	{"reset", "reset", `{"rules": [{"op": "*", "fault": "reset", "p": 0.3}]}`, true},
	{"lost_answer", "lost_answer", `{"rules": [{"op": "put", "fault": "lost_answer", "p": 0.5}]}`, true},
	{"short_read", "short_read", `{"rules": [{"op": "get", "fault": "short_read", "p": 0.5}]}`, true},
	// Every PUT refused: nothing can be written; what matters is that every request is
	// refused cleanly (or unknown) and that produce resumes once the store answers again.
	{"slowdown_outage", "slowdown", `{"rules": [{"op": "put", "fault": "slowdown"}]}`, false},
}

// TestObjectStoreFaults injects each fault of the profile format into every log node of a
// one-voter, two-node cluster under load, for faultWindow, then lifts it.
func TestObjectStoreFaults(t *testing.T) {
	for _, tc := range objstoreFaults {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, 1, 2, "f", 4, cluster.Options{})
			l := cluster.NewLedger()
			load := e.load(l)
			time.Sleep(time.Second)
			e.setProfile(tc.profile)
			from := time.Now()
			e.waitFired(tc.fault, 10*time.Second)
			time.Sleep(faultWindow())
			e.setProfile(noFaults)
			end := time.Now()
			fired := e.faultCount(tc.fault)
			rec := recovery(t, l, end, 30*time.Second)
			time.Sleep(1500 * time.Millisecond)
			during := countOutcomes(l, from, end)
			rep := e.finish(load, l)
			t.Logf("FIGURE fault=%s fired=%.0f during: %s; recovery %s after the fault ended; lost: none (%d acknowledged attempts all present)",
				tc.name, fired, during, rec.Round(time.Millisecond), rep.Acked)
			if tc.survives && during.Acked*2 < during.total() {
				t.Fatalf("%s acknowledged under %s, want at least half", during, tc.name)
			}
		})
	}
}
