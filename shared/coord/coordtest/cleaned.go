package coordtest

import (
	"errors"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/coord"
)

// RunCleanPoints runs the conformance tests of coord.CleanPoints on newStore's stores.
func RunCleanPoints(t *testing.T, newStore NewStore) {
	t.Run("CleanPoints", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, coord.WithClock(NewClock(time.Unix(1_900_000_000, 0)).Now))
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		testCleanPoints(t, s)
	})
}

func testCleanPoints(t *testing.T, s coord.Store) {
	ctx := ctxFor(t)
	cp := coord.CleanPoints{Store: s}
	p := coord.Partition{StreamID: 7, Partition: 3}
	other := coord.Partition{StreamID: 7, Partition: 4}
	if pt, err := cp.Get(ctx, p); err != nil || pt != (coord.CleanPoint{}) {
		t.Fatalf("unset: %+v %v", pt, err)
	}
	want := coord.CleanPoint{Offset: 1 << 40, RecheckMs: 1_900_000_000_123}
	if err := cp.Set(ctx, p, want); err != nil {
		t.Fatal(err)
	}
	if pt, err := cp.Get(ctx, p); err != nil || pt != want {
		t.Fatalf("get: %+v %v, want %+v", pt, err, want)
	}
	// The item layout (documented on CleanPoints): pk "clean/" + stream, sk the partition
	// in 10 digits, two counters.
	if it, err := s.Get(ctx, "clean/7", "0000000003"); err != nil || len(it.Attrs) != 0 || len(it.Counters) != 2 ||
		it.Counters["offset"] != want.Offset || it.Counters["recheck_ms"] != want.RecheckMs || !it.ExpiresAt.IsZero() {
		t.Fatalf("stored item: %+v %v", it, err)
	}
	if pt, err := cp.Get(ctx, other); err != nil || pt != (coord.CleanPoint{}) {
		t.Fatalf("other partition: %+v %v", pt, err)
	}
	// Set replaces, including a recheck going back to none and the offset moving back.
	want = coord.CleanPoint{Offset: 5}
	if err := cp.Set(ctx, p, want); err != nil {
		t.Fatal(err)
	}
	if pt, err := cp.Get(ctx, p); err != nil || pt != want {
		t.Fatalf("replaced: %+v %v, want %+v", pt, err, want)
	}
	// It lives beside the other helpers' items without touching them.
	if _, err := (coord.Work{Store: s}).Add(ctx, p, coord.WorkCompact, 9); err != nil {
		t.Fatal(err)
	}
	if pt, err := cp.Get(ctx, p); err != nil || pt != want {
		t.Fatalf("after work add: %+v %v", pt, err)
	}
	if err := cp.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	if pt, err := cp.Get(ctx, p); err != nil || pt != (coord.CleanPoint{}) {
		t.Fatalf("deleted: %+v %v", pt, err)
	}
	if n, err := (coord.Work{Store: s}).Pending(ctx, p, coord.WorkCompact); err != nil || n != 9 {
		t.Fatalf("work count after delete: %d %v", n, err)
	}
	if err := cp.Delete(ctx, p); err != nil {
		t.Fatalf("delete missing: %v", err)
	}
	// Bad input is refused before anything is written.
	for _, bad := range []coord.CleanPoint{{Offset: -1}, {RecheckMs: -1}} {
		if err := cp.Set(ctx, p, bad); !errors.Is(err, coord.ErrInvalid) {
			t.Fatalf("set %+v: %v, want ErrInvalid", bad, err)
		}
	}
	neg := coord.Partition{StreamID: 7, Partition: -1}
	if err := cp.Set(ctx, neg, coord.CleanPoint{}); !errors.Is(err, coord.ErrInvalid) {
		t.Fatalf("negative partition: %v", err)
	}
	if _, err := cp.Get(ctx, neg); !errors.Is(err, coord.ErrInvalid) {
		t.Fatalf("negative partition get: %v", err)
	}
	// A corrupt item (negative offset written around the helper) is reported.
	if _, err := s.Put(ctx, coord.Item{PK: "clean/7", SK: "0000000003", Counters: map[string]int64{"offset": -3}}, coord.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Get(ctx, p); !errors.Is(err, coord.ErrCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
}
