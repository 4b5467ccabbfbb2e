package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

func TestWatchReplayAndReset(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.WatchRing = 4
	n := startNode(t, cfg)
	defer n.Close()
	ctx := ctxT(t)
	c := NewLocalClient(n)
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "s", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	var idx []uint64
	for i := range 8 {
		r, err := commitOne(ctx, c, s.ID, fmt.Sprint("o", i))
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, r.AppliedIndex)
	}
	for name, c := range clients(t, n) {
		// From inside the ring: the later events are replayed in order.
		got := collect(t, c, idx[4], 3)
		for i, ev := range got {
			if ev.Reset || ev.AppliedIndex != idx[5+i] || ev.Partitions[0].HighWatermark != int64(10*(6+i)) {
				t.Fatalf("%s: replay %d: %+v", name, i, ev)
			}
		}
		// From before the ring: one Reset at the newest index.
		got = collect(t, c, idx[1], 1)
		if !got[0].Reset || got[0].AppliedIndex != idx[7] {
			t.Fatalf("%s: want reset at %d, got %+v", name, idx[7], got[0])
		}
	}
}

// collect watches from `from` and returns the first n events.
func collect(t *testing.T, c meta.Client, from uint64, n int) []meta.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []meta.Event
	done := errors.New("done")
	err := c.Watch(ctx, from, func(ev meta.Event) error {
		out = append(out, ev)
		if len(out) == n {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		t.Fatalf("watch from %d: %v after %d events", from, err, len(out))
	}
	return out
}

// TestSlowWatcherIsDropped: a watcher that stops reading never blocks commits; when it
// reads again it gets a Reset, then live events.
func TestSlowWatcherIsDropped(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.WatchBuffer = 2
	n := startNode(t, cfg)
	defer n.Close()
	ctx := ctxT(t)
	c := NewLocalClient(n)
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "s", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	evs := make(chan meta.Event, 100)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go c.Watch(wctx, 0, func(ev meta.Event) error {
		evs <- ev
		<-release // blocks on the first event until released
		return nil
	})
	time.Sleep(20 * time.Millisecond)
	var last meta.CommitResult
	for i := range 10 {
		commitCtx, cc := context.WithTimeout(ctx, 2*time.Second)
		last, err = commitOne(commitCtx, c, s.ID, fmt.Sprint("o", i))
		cc()
		if err != nil {
			t.Fatalf("commit %d blocked or failed behind a slow watcher: %v", i, err)
		}
	}
	close(release)
	first := <-evs
	if first.Reset {
		t.Fatalf("first event %+v", first)
	}
	var reset meta.Event
	for !reset.Reset {
		select {
		case reset = <-evs:
		case <-time.After(5 * time.Second):
			t.Fatal("no reset event")
		}
	}
	if reset.AppliedIndex < first.AppliedIndex || reset.AppliedIndex > last.AppliedIndex {
		t.Fatalf("reset %+v (last commit %d)", reset, last.AppliedIndex)
	}
	r, err := commitOne(ctx, c, s.ID, "after")
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev := <-evs:
			if ev.AppliedIndex == r.AppliedIndex {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no live event after the reset")
		}
	}
}

// TestGRPCWatchReconnects: the gRPC client's Watch survives a sequencer restart and
// resumes after the last event it delivered, with no Reset and no gap.
func TestGRPCWatchReconnects(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	n := startNode(t, cfg)
	ctx := ctxT(t)
	s, err := NewLocalClient(n).CreateStream(ctx, meta.StreamConfig{Name: "s", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := clients(t, n)["grpc"]
	evs := make(chan meta.Event, 10)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go g.Watch(wctx, 0, func(ev meta.Event) error { evs <- ev; return nil })
	time.Sleep(50 * time.Millisecond)
	r1, err := commitOne(ctx, NewLocalClient(n), s.ID, "o1")
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-evs; ev.AppliedIndex != r1.AppliedIndex {
		t.Fatalf("%+v", ev)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the stream breaks; the client retries
	n = startNode(t, cfg)
	defer n.Close()
	r2, err := commitOne(ctx, NewLocalClient(n), s.ID, "o2")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-evs:
		if ev.Reset || ev.AppliedIndex != r2.AppliedIndex || ev.Partitions[0].HighWatermark != 20 {
			t.Fatalf("after reconnect: %+v (want index %d)", ev, r2.AppliedIndex)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not reconnect")
	}
}

// TestHubRingBoundedByEntries: the ring drops its oldest events when their index entries
// would pass the bound (keeping the newest event whatever its size), and a watcher from
// before the ring is told to Reset.
func TestHubRingBoundedByEntries(t *testing.T) {
	h := newHub(100, 10, 8, 0)
	ev := func(idx uint64, entries int) meta.Event {
		return meta.Event{AppliedIndex: idx, Partitions: []meta.PartitionUpdate{{StreamID: 1, Added: make([]meta.IndexEntry, entries)}}}
	}
	h.publish([]meta.Event{ev(1, 4), ev(2, 4)})
	if h.n != 2 || h.entries != 8 {
		t.Fatalf("ring %d events %d entries", h.n, h.entries)
	}
	h.publish([]meta.Event{ev(3, 4)}) // 12 > 10: event 1 goes
	if h.n != 2 || h.entries != 8 || h.base != 1 {
		t.Fatalf("ring %d events %d entries, base %d", h.n, h.entries, h.base)
	}
	h.publish([]meta.Event{ev(4, 25)}) // larger than the bound: kept alone
	if h.n != 1 || h.entries != 25 || h.base != 3 {
		t.Fatalf("ring %d events %d entries, base %d", h.n, h.entries, h.base)
	}
	_, replay, _, reset := h.subscribe(1)
	if !reset || len(replay) != 0 {
		t.Fatalf("watch from 1: reset %v, replay %d", reset, len(replay))
	}
}
