package objstore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/loamhq/loam/shared/objstore"
)

// TestExpressReadsSkipAFailingZone: once a read of the local zone failed (its endpoint is
// down), the next reads go to the other zones first instead of paying for the dead zone's
// attempts on every read.
func TestExpressReadsSkipAFailingZone(t *testing.T) {
	ctx := context.Background()
	down := &readsDown{}
	a, c := objstore.NewMem(), objstore.NewMem()
	e := newExpress(t, a, down, c)              // zone b, the local one, is down
	for _, z := range []objstore.Bucket{a, c} { // as a Put leaves it, without its background PUT
		if err := z.Put(ctx, "wal/express/n/1.wal", []byte("one")); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := e.Get(ctx, "wal/express/n/1.wal"); err != nil || string(got) != "one" {
		t.Fatalf("first read: %q %v", got, err)
	}
	before := down.reads.Load()
	for range 10 {
		if got, err := e.Get(ctx, "wal/express/n/1.wal"); err != nil || string(got) != "one" {
			t.Fatalf("read: %q %v", got, err)
		}
		if _, err := e.GetRange(ctx, "wal/express/n/1.wal", 1, 2); err != nil {
			t.Fatal(err)
		}
	}
	if n := down.reads.Load() - before; n != 0 {
		t.Fatalf("20 reads after the local zone failed called it %d more times, want 0 (it is tried last for a while)", n)
	}
}

// readsDown is a zone that is down, counting the reads it was asked for (the Put's
// background PUT to it may come at any time and is not counted).
type readsDown struct {
	downBucket
	reads atomic.Int64
}

func (d *readsDown) Get(ctx context.Context, key string) ([]byte, error) {
	d.reads.Add(1)
	return d.downBucket.Get(ctx, key)
}

func (d *readsDown) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	d.reads.Add(1)
	return d.downBucket.GetRange(ctx, key, off, n)
}

func (d *readsDown) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	d.reads.Add(1)
	return d.downBucket.Stat(ctx, key)
}
