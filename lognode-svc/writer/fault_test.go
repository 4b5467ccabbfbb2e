package writer

import (
	"context"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
)

func faultBucket(t *testing.T, profile string) *objstore.FaultBucket {
	t.Helper()
	p, err := objstore.ParseFaultProfile([]byte(profile))
	if err != nil {
		t.Fatal(err)
	}
	return objstore.WithFaults(objstore.NewMem(), p)
}

// TestLostAnswerVerifyReadFailsIsRetried: a WAL PUT lands but its answer is lost, and the
// GET that would prove the retry's 412 is our own object fails too. The put must go on
// retrying (the next 412 and GET prove it), not give the write up.
func TestLostAnswerVerifyReadFailsIsRetried(t *testing.T) {
	b := faultBucket(t, `{"rules": [{"op": "put", "fault": "lost_answer", "max": 1}, {"op": "get", "fault": "internal_error", "max": 1}]}`)
	m := newFakeMeta()
	w := newTestWriter(t, b, m, nil)
	res, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 2, "x"), Records: 2}})
	if err != nil || res[0].Err != nil || res[0].BaseOffset != 0 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if b.Count("put", "lost_answer") != 1 || b.Count("get", "internal_error") != 1 {
		t.Fatalf("faults %v", b.Counts())
	}
}

// TestUnprovenPutNeverCommits: every WAL PUT lands but answers an error, and every GET of
// it comes back short, so no attempt can prove the object is this writer's: the write
// fails and nothing is committed.
func TestUnprovenPutNeverCommits(t *testing.T) {
	for _, profile := range []string{
		`{"rules": [{"op": "put", "fault": "lost_answer"}, {"op": "get", "fault": "short_read"}]}`,
		`{"rules": [{"op": "put", "fault": "slowdown"}]}`,
		`{"rules": [{"op": "put", "fault": "timeout", "ms": 50}]}`,
	} {
		b := faultBucket(t, profile)
		m := newFakeMeta()
		w := newTestWriter(t, b, m, func(c *Config) { c.Budget = 700 * time.Millisecond })
		res, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 2, "x"), Records: 2}})
		if err == nil && res[0].Err == nil {
			t.Fatalf("%s: acknowledged at %d", profile, res[0].BaseOffset)
		}
		m.mu.Lock()
		attempts := m.attempts
		m.mu.Unlock()
		if attempts != 0 {
			t.Fatalf("%s: %d commit attempts of an object not proven written", profile, attempts)
		}
		if len(b.Counts()) == 0 {
			t.Fatalf("%s: no fault fired", profile)
		}
	}
}

// TestSlowClockPutsAndCommits: a node whose clock runs two minutes slow computes its
// writer budget on its own clock; the deadlines it gives the bucket and the sequencer are
// read against the real clock, so they must be moved onto it. Otherwise every PUT fails at
// once with "context deadline exceeded" until the (skewed) budget runs out, and the
// request hangs for the whole budget.
func TestSlowClockPutsAndCommits(t *testing.T) {
	for _, off := range []time.Duration{-2 * time.Minute, 2 * time.Minute} {
		m := newFakeMeta()
		w := newTestWriter(t, objstore.NewMem(), m, func(c *Config) {
			c.Budget = 5 * time.Second
			c.Now = func() time.Time { return time.Now().Add(off) }
		})
		start := time.Now()
		res, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 2, "x"), Records: 2}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("clock %s: res %+v err %v after %s", off, res, err, time.Since(start))
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("clock %s: the write took %s", off, d)
		}
	}
}
