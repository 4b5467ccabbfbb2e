package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
)

// TestClientsBackground runs the background-work script (leases, swaps, trims, the
// retired set) through both clients of one node: every answer and error class must match.
func TestClientsBackground(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	defer n.Close()
	for name, c := range clients(t, n) {
		t.Run(name, func(t *testing.T) { backgroundScript(t, c, name) })
	}
}

func backgroundScript(t *testing.T, c meta.Client, ns string) {
	ctx := ctxT(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	is := func(err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("err %v, want %v", err, want)
		}
	}
	must(c.CreateNamespace(ctx, ns))
	s, err := c.CreateStream(ctx, meta.StreamConfig{Namespace: ns, Name: "bg", Partitions: 2})
	must(err)
	obj1, obj2, seg := "wal/"+ns+"/1.wal", "wal/"+ns+"/2.wal", "seg/"+ns+"/0-1.seg"
	now := time.Now().UnixMilli()
	_, err = c.CommitWal(ctx, meta.CommitWal{Object: obj1, CreatedMs: now, StampMs: now, Chunks: []meta.Chunk{
		{StreamID: s.ID, Partition: 0, Records: 3, Offset: 0, Length: 100, MaxTimestamp: now},
		{StreamID: s.ID, Partition: 1, Records: 2, Offset: 100, Length: 50, MaxTimestamp: now}}})
	must(err)
	_, err = c.CommitWal(ctx, meta.CommitWal{Object: obj2, CreatedMs: now, StampMs: now, Chunks: []meta.Chunk{
		{StreamID: s.ID, Partition: 0, Records: 2, Offset: 0, Length: 10, MaxTimestamp: now}}})
	must(err)

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	events := make(chan meta.Event, 100)
	go c.Watch(wctx, 0, func(ev meta.Event) error { events <- ev; return nil })
	time.Sleep(50 * time.Millisecond) // let the watch subscribe

	// Leases.
	l, err := c.AcquireLease(ctx, s.ID, 0, meta.LeaseSegment, "h1", 30*time.Second)
	must(err)
	if l.Epoch != 1 || l.Holder != "h1" || l.Kind != meta.LeaseSegment || l.ExpiresMs < now+29_000 {
		t.Fatalf("lease %+v", l)
	}
	l2, err := c.AcquireLease(ctx, s.ID, 0, meta.LeaseSegment, "h1", time.Minute)
	must(err)
	if l2.Epoch != 1 || l2.ExpiresMs <= l.ExpiresMs {
		t.Fatalf("renewal %+v after %+v", l2, l)
	}
	_, err = c.AcquireLease(ctx, s.ID, 0, meta.LeaseSegment, "h2", time.Minute)
	is(err, meta.ErrLeaseHeld)
	_, err = c.AcquireLease(ctx, s.ID, 0, meta.LeaseSegment, "h2", 0)
	is(err, meta.ErrInvalidArgument)
	_, err = c.AcquireLease(ctx, s.ID, 5, meta.LeaseSegment, "h2", time.Minute)
	is(err, meta.ErrPartitionNotFound)
	_, err = c.AcquireLease(ctx, s.ID+1000, 0, meta.LeaseSegment, "h2", time.Minute)
	is(err, meta.ErrStreamNotFound)

	// Swaps.
	old, _, err := c.Lookup(ctx, s.ID, 0, 0, 10)
	must(err)
	if len(old) != 2 {
		t.Fatalf("entries %+v", old)
	}
	newE := []meta.IndexEntry{{BaseOffset: 0, Count: 5, Kind: meta.KindSegment, Object: seg, Offset: 0, Length: 90, MaxTimestamp: now}}
	sw := meta.IndexSwap{Lease: l2, Old: old, New: newE, StampMs: time.Now().UnixMilli()}
	changed := sw
	changed.Old = slices.Clone(old)
	changed.Old[1].Length++
	is(c.SwapIndex(ctx, changed), meta.ErrIndexChanged)
	short := sw
	short.New = []meta.IndexEntry{{BaseOffset: 0, Count: 4, Kind: meta.KindSegment, Object: seg, Length: 90}}
	is(c.SwapIndex(ctx, short), meta.ErrInvalidArgument)
	other := sw
	other.Lease.Holder = "h2"
	is(c.SwapIndex(ctx, other), meta.ErrLeaseLost)
	ahead := sw
	ahead.StampMs = time.Now().Add(2 * time.Minute).UnixMilli()
	is(c.SwapIndex(ctx, ahead), meta.ErrClockAhead)
	must(c.SwapIndex(ctx, sw))
	must(c.SwapIndex(ctx, sw)) // a retry of an applied swap
	es, st, err := c.Lookup(ctx, s.ID, 0, 0, 10)
	must(err)
	if len(es) != 1 || es[0] != newE[0] || st.Bytes != 90 || st.HighWatermark != 5 {
		t.Fatalf("after swap %+v %+v", es, st)
	}
	refs, err := c.Referenced(ctx, []string{obj1, obj2, seg, "nope"})
	must(err)
	if !slices.Equal(refs, []bool{true, false, true, false}) {
		t.Fatalf("referenced %v", refs)
	}
	for {
		select {
		case ev := <-events:
			if len(ev.Partitions) == 0 {
				continue
			}
			u := ev.Partitions[0]
			if u.StreamID != s.ID || u.Partition != 0 || !u.Replaced || u.HighWatermark != 5 || len(u.Added) != 0 {
				t.Fatalf("swap event %+v", ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no swap event")
		}
		break
	}

	// Trims.
	_, err = c.TrimPartition(ctx, s.ID, 1, 3)
	is(err, meta.ErrOffsetOutOfRange)
	_, err = c.TrimPartition(ctx, s.ID, 1, -1)
	is(err, meta.ErrInvalidArgument)
	ps, err := c.TrimPartition(ctx, s.ID, 1, 2)
	must(err)
	if ps.LogStart != 2 || ps.HighWatermark != 2 || ps.Bytes != 0 || ps.Partition != 1 || ps.StreamID != s.ID {
		t.Fatalf("trim %+v", ps)
	}
	ps, err = c.TrimPartition(ctx, s.ID, 1, 1) // backward: nothing changes
	must(err)
	if ps.LogStart != 2 {
		t.Fatalf("trim back %+v", ps)
	}
	_, st, err = c.Lookup(ctx, s.ID, 1, 0, 0) // max 0: the state alone
	must(err)
	if st.LogStart != 2 {
		t.Fatalf("state %+v", st)
	}
	_, _, err = c.Lookup(ctx, s.ID, 1, 0, 10)
	is(err, meta.ErrOffsetOutOfRange)
	select {
	case ev := <-events:
		if u := ev.Partitions[0]; u.Partition != 1 || u.LogStart != 2 || !u.Replaced {
			t.Fatalf("trim event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no trim event")
	}

	// The retired set, in key order, paged.
	mine := func(after string, limit int) []meta.RetiredObject {
		t.Helper()
		rs, err := c.ListRetired(ctx, after, limit)
		must(err)
		var out []meta.RetiredObject
		for _, r := range rs {
			if strings.HasPrefix(r.Key, "wal/"+ns+"/") || strings.HasPrefix(r.Key, "seg/"+ns+"/") {
				out = append(out, r)
			}
		}
		return out
	}
	rs := mine("", 0)
	if len(rs) != 2 || rs[0].Key != obj1 || rs[1].Key != obj2 || rs[0].RetiredMs < now {
		t.Fatalf("retired %+v", rs)
	}
	if rs := mine(obj1, 1); len(rs) != 1 || rs[0].Key != obj2 {
		t.Fatalf("retired after %s: %+v", obj1, rs)
	}
	must(c.ForgetRetired(ctx, []string{obj1, "never-retired"}))
	must(c.ForgetRetired(ctx, nil))
	if rs := mine("", 0); len(rs) != 1 || rs[0].Key != obj2 {
		t.Fatalf("after forget %+v", rs)
	}

	// Release: the next grant takes a new epoch; the released grant cannot swap.
	must(c.ReleaseLease(ctx, l2))
	must(c.ReleaseLease(ctx, l2))
	l3, err := c.AcquireLease(ctx, s.ID, 0, meta.LeaseSegment, "h2", time.Minute)
	must(err)
	if l3.Epoch != 2 {
		t.Fatalf("after release %+v", l3)
	}
	sw2 := meta.IndexSwap{Lease: l2, Old: newE, New: []meta.IndexEntry{{BaseOffset: 0, Count: 5, Kind: meta.KindSegment, Object: seg + "2", Length: 1}}}
	is(c.SwapIndex(ctx, sw2), meta.ErrLeaseLost)

	// Deleting the stream retires what it referenced.
	must(c.DeleteStream(ctx, ns, "bg"))
	if rs := mine("", 0); len(rs) != 2 || rs[0].Key != seg || rs[1].Key != obj2 {
		t.Fatalf("after delete %+v", rs)
	}
	refs, err = c.Referenced(ctx, []string{seg})
	must(err)
	if refs[0] {
		t.Fatal("deleted stream's segment still referenced")
	}
}

// TestLeaseRace: several holders (on both clients) race for one partition's lease and
// each swaps the same WAL entries for its own segment, some of them working past their
// lease's expiry. Exactly one swap lands each round; the others are refused with
// ErrLeaseLost or ErrIndexChanged, and the index holds the winner's segment.
func TestLeaseRace(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	defer n.Close()
	cs := clients(t, n)
	ctx := ctxT(t)
	const rounds, holders = 4, 6
	s, err := cs["local"].CreateStream(ctx, meta.StreamConfig{Name: "race", Partitions: rounds})
	if err != nil {
		t.Fatal(err)
	}
	for round := range int32(rounds) {
		for i := range 3 {
			now := time.Now().UnixMilli()
			if _, err := cs["local"].CommitWal(ctx, meta.CommitWal{Object: fmt.Sprintf("wal/race/%d-%d", round, i), CreatedMs: now, StampMs: now,
				Chunks: []meta.Chunk{{StreamID: s.ID, Partition: round, Records: 4, Length: 40}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	landedRounds := 0
	defer func() {
		if landedRounds == 0 && !t.Failed() {
			t.Error("no swap landed in any round")
		}
	}()
	for round := range int32(rounds) {
		old, _, err := cs["grpc"].Lookup(ctx, s.ID, round, 0, fsm.MaxLookup)
		if err != nil || len(old) != 3 {
			t.Fatalf("%+v %v", old, err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var landed []string
		var refused []error
		for h := range holders {
			c := cs[[]string{"local", "grpc"}[h%2]]
			holder := fmt.Sprintf("h%d-%d", round, h)
			rng := rand.New(rand.NewPCG(uint64(round), uint64(h)))
			wg.Go(func() {
				var l meta.Lease
				for {
					var err error
					l, err = c.AcquireLease(ctx, s.ID, round, meta.LeaseSegment, holder, 150*time.Millisecond)
					if err == nil {
						break
					}
					if !errors.Is(err, meta.ErrLeaseHeld) {
						t.Error(err)
						return
					}
					time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
				}
				// Work; sometimes longer than the lease.
				time.Sleep(time.Duration(rng.IntN(250)) * time.Millisecond)
				obj := "seg/race/" + holder
				err := c.SwapIndex(ctx, meta.IndexSwap{Lease: l, Old: old, StampMs: time.Now().UnixMilli(),
					New: []meta.IndexEntry{{BaseOffset: 0, Count: 12, Kind: meta.KindSegment, Object: obj, Length: 100}}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					landed = append(landed, obj)
				case errors.Is(err, meta.ErrLeaseLost), errors.Is(err, meta.ErrIndexChanged):
					refused = append(refused, err)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		// At most one swap lands. None may land when every holder happened to work past
		// its lease (each expired lease is refused, and no later holder took over).
		if len(landed) > 1 || len(landed)+len(refused) != holders {
			t.Fatalf("round %d: %d swaps landed %v, %d refused", round, len(landed), landed, len(refused))
		}
		lost := 0
		for _, err := range refused {
			if errors.Is(err, meta.ErrLeaseLost) {
				lost++
			}
		}
		es, st, err := cs["grpc"].Lookup(ctx, s.ID, round, 0, fsm.MaxLookup)
		if len(landed) == 0 {
			t.Logf("round %d: no swap landed (every holder outlived its lease); refused: %d lease lost, %d index changed", round, lost, len(refused)-lost)
			if err != nil || len(es) != 3 || es[0].Object != old[0].Object || st.HighWatermark != 12 {
				t.Fatalf("round %d: index changed without a landed swap: %+v %+v %v", round, es, st, err)
			}
			continue
		}
		landedRounds++
		t.Logf("round %d: %s landed; refused: %d lease lost, %d index changed", round, landed[0], lost, len(refused)-lost)
		if err != nil || len(es) != 1 || es[0].Object != landed[0] || st.HighWatermark != 12 || st.Bytes != 100 {
			t.Fatalf("round %d: index %+v %+v %v", round, es, st, err)
		}
		keys := []string{landed[0]}
		for h := range holders {
			if k := fmt.Sprintf("seg/race/h%d-%d", round, h); k != landed[0] {
				keys = append(keys, k)
			}
		}
		refs, err := cs["local"].Referenced(ctx, keys)
		if err != nil || !refs[0] || slices.Contains(refs[1:], true) {
			t.Fatalf("round %d: referenced %v %v", round, refs, err)
		}
	}
}
