package metafake

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

func TestLeases(t *testing.T) {
	ctx := context.Background()
	f := New()
	f.AddStream(1, 1)
	now := time.UnixMilli(1_000_000)
	f.Now = func() time.Time { return now }
	a, err := f.AcquireLease(ctx, 1, 0, "segment", "a", time.Second)
	if err != nil || a.Epoch != 1 || a.ExpiresMs != now.UnixMilli()+1000 {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := f.AcquireLease(ctx, 1, 0, "segment", "b", time.Second); !errors.Is(err, meta.ErrLeaseHeld) {
		t.Fatalf("b while a holds: %v", err)
	}
	if r, err := f.AcquireLease(ctx, 1, 0, "segment", "a", time.Second); err != nil || r.Epoch != 1 {
		t.Fatalf("renewal keeps the epoch: %+v %v", r, err)
	}
	if _, err := f.AcquireLease(ctx, 1, 0, "compact", "b", time.Second); err != nil {
		t.Fatalf("another kind is another lease: %v", err)
	}
	now = now.Add(2 * time.Second)
	b, err := f.AcquireLease(ctx, 1, 0, "segment", "b", time.Second)
	if err != nil || b.Epoch != 2 {
		t.Fatalf("after expiry: %+v %v", b, err)
	}
	if err := f.ReleaseLease(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AcquireLease(ctx, 1, 0, "segment", "a", time.Second); !errors.Is(err, meta.ErrLeaseHeld) {
		t.Fatalf("a stale release dropped b's lease: %v", err)
	}
	if err := f.ReleaseLease(ctx, b); err != nil {
		t.Fatal(err)
	}
	if c, err := f.AcquireLease(ctx, 1, 0, "segment", "a", time.Second); err != nil || c.Epoch != 3 {
		t.Fatalf("after release: %+v %v", c, err)
	}
}

func TestSwapIndex(t *testing.T) {
	ctx := context.Background()
	f := New()
	f.AddStream(7, 2)
	for i := range 3 {
		if base := f.Commit(7, 1, meta.IndexEntry{Count: 2, Kind: meta.KindWAL, Object: "w" + string(rune('0'+i)), Length: 10}); base != int64(2*i) {
			t.Fatalf("commit %d at %d", i, base)
		}
	}
	if f.HighWatermark(7, 1) != 6 || f.HighWatermark(7, 0) != 0 {
		t.Fatal("high watermarks")
	}
	es := f.Entries(7, 1)
	seg := meta.IndexEntry{BaseOffset: 0, Count: 4, Kind: meta.KindSegment, Object: "s", Length: 15}
	l, err := f.AcquireLease(ctx, 7, 1, "segment", "h", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    meta.IndexSwap
		want error
	}{
		{meta.IndexSwap{Lease: l, Old: es[1:2], New: []meta.IndexEntry{seg}}, meta.ErrInvalidArgument},
		// Old entries that are not contiguous are malformed, as the sequencer says.
		{meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{es[0], es[2]}, New: []meta.IndexEntry{seg}}, meta.ErrInvalidArgument},
		{meta.IndexSwap{Lease: l, Old: []meta.IndexEntry{es[0], {BaseOffset: 2, Count: 2, Kind: meta.KindWAL, Object: "w9", Length: 10}}, New: []meta.IndexEntry{seg}}, meta.ErrIndexChanged},
		{meta.IndexSwap{Lease: l, Old: es[:2]}, meta.ErrInvalidArgument},
		{meta.IndexSwap{Lease: meta.Lease{StreamID: 7, Partition: 1, Kind: "segment", Holder: "h", Epoch: l.Epoch + 1}, Old: es[:2], New: []meta.IndexEntry{seg}}, meta.ErrLeaseLost},
	} {
		if err := f.SwapIndex(ctx, c.s); !errors.Is(err, c.want) {
			t.Fatalf("%+v: %v, want %v", c.s, err, c.want)
		}
	}
	if f.Swaps() != 0 || !slices.Equal(es, f.Entries(7, 1)) {
		t.Fatal("a refused swap changed the index")
	}
	var hooked int
	f.BeforeSwap = func(meta.IndexSwap) { hooked++; _ = f.Entries(7, 1) } // the hook runs unlocked
	if err := f.SwapIndex(ctx, meta.IndexSwap{Lease: l, Old: es[:2], New: []meta.IndexEntry{seg}}); err != nil {
		t.Fatal(err)
	}
	if got := f.Entries(7, 1); f.Swaps() != 1 || hooked != 1 || len(got) != 2 || got[0] != seg || got[1] != es[2] {
		t.Fatalf("after the swap: %d swaps, %d hooks, %+v", f.Swaps(), hooked, got)
	}
	ref, _ := f.Referenced(ctx, []string{"w0", "w2", "s"})
	if !slices.Equal(ref, []bool{false, true, true}) {
		t.Fatalf("referenced %v", ref)
	}
	got, st, err := f.Lookup(ctx, 7, 1, 4, 10)
	if err != nil || st.HighWatermark != 6 || st.Bytes != 25 || len(got) != 1 || got[0] != es[2] {
		t.Fatalf("lookup from 4: %+v %+v %v", got, st, err)
	}
	if _, _, err := f.Lookup(ctx, 7, 1, 7, 10); !errors.Is(err, meta.ErrOffsetOutOfRange) {
		t.Fatalf("lookup past the end: %v", err)
	}
	if _, _, err := f.Lookup(ctx, 8, 0, 0, 10); !errors.Is(err, meta.ErrStreamNotFound) {
		t.Fatalf("unknown stream: %v", err)
	}
	f.DropLeases()
	seg2 := meta.IndexEntry{BaseOffset: 4, Count: 2, Kind: meta.KindSegment, Object: "s2", Length: 10}
	if err := f.SwapIndex(ctx, meta.IndexSwap{Lease: l, Old: got, New: []meta.IndexEntry{seg2}}); !errors.Is(err, meta.ErrLeaseLost) {
		t.Fatalf("after DropLeases: %v", err)
	}
}
