package objstore_test

import (
	"context"
	"testing"

	"github.com/loamhq/loam/shared/objstore"
)

// TestExpressReadsSkipAFailingZone: once a read of the local zone failed (its endpoint is
// down), the next reads go to the other zones first instead of paying for the dead zone's
// attempts on every read.
func TestExpressReadsSkipAFailingZone(t *testing.T) {
	ctx := context.Background()
	down := &downBucket{}
	e := newExpress(t, objstore.NewMem(), down, objstore.NewMem()) // zone b, the local one, is down
	if err := e.Put(ctx, "wal/express/n/1.wal", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Get(ctx, "wal/express/n/1.wal"); err != nil || string(got) != "one" {
		t.Fatalf("first read: %q %v", got, err)
	}
	before := down.calls.Load()
	for range 10 {
		if got, err := e.Get(ctx, "wal/express/n/1.wal"); err != nil || string(got) != "one" {
			t.Fatalf("read: %q %v", got, err)
		}
		if _, err := e.GetRange(ctx, "wal/express/n/1.wal", 1, 2); err != nil {
			t.Fatal(err)
		}
	}
	if n := down.calls.Load() - before; n != 0 {
		t.Fatalf("20 reads after the local zone failed called it %d more times, want 0 (it is tried last for a while)", n)
	}
}
