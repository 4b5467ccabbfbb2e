package objstore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loamhq/loam/shared/objstore"
)

func TestWithLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := objstore.WithLatency(objstore.NewMem(), 30*time.Millisecond, 10*time.Millisecond)
		step := func(name string, want time.Duration, f func() error) {
			t.Helper()
			start := time.Now()
			if err := f(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := time.Since(start); got != want {
				t.Errorf("%s took %v, want %v", name, got, want)
			}
		}
		step("Put", 30*time.Millisecond, func() error { return b.Put(ctx, "k", []byte("v")) })
		step("Get", 10*time.Millisecond, func() error { _, err := b.Get(ctx, "k"); return err })
		step("GetRange", 10*time.Millisecond, func() error { _, err := b.GetRange(ctx, "k", 0, 1); return err })
		step("Stat", 10*time.Millisecond, func() error { _, err := b.Stat(ctx, "k"); return err })
		step("List", 10*time.Millisecond, func() error {
			return b.List(ctx, "", func(objstore.ObjectInfo) error { return nil })
		})
		step("Delete", 30*time.Millisecond, func() error { return b.Delete(ctx, "k") })

		// A context that ends during the wait ends the call, which does not happen.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := b.Put(ctx, "late", []byte("v"))
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Millisecond {
			t.Errorf("Put past its deadline: err %v after %v", err, time.Since(start))
		}
		if _, err := b.Stat(context.Background(), "late"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("the late Put happened: %v", err)
		}
	})
}

func TestCounting(t *testing.T) {
	ctx := context.Background()
	c := objstore.Counting(objstore.NewMem())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Put(ctx, "a", []byte("12345")))
	must(c.Put(ctx, "b", []byte("123")))
	before := c.Stats()
	_, err := c.Get(ctx, "a")
	must(err)
	_, err = c.GetRange(ctx, "a", 1, 2)
	must(err)
	_, err = c.Get(ctx, "missing") // failed calls count too
	if !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal(err)
	}
	_, err = c.Stat(ctx, "b")
	must(err)
	must(c.List(ctx, "", func(objstore.ObjectInfo) error { return nil }))
	must(c.Delete(ctx, "b"))
	must(c.Close())

	want := objstore.Stats{Puts: 2, Gets: 2, GetRanges: 1, Stats: 1, Lists: 1, Deletes: 1, Listed: 2, PutBytes: 8, GetBytes: 7}
	if got := c.Stats(); got != want {
		t.Errorf("Stats = %+v\nwant    %+v", got, want)
	}
	if got, want := c.Stats().Sub(before), (objstore.Stats{Gets: 2, GetRanges: 1, Stats: 1, Lists: 1, Deletes: 1, Listed: 2, GetBytes: 7}); got != want {
		t.Errorf("Sub = %+v\nwant  %+v", got, want)
	}
}
