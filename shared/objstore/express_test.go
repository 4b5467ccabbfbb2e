package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/objstore/objstoretest"
)

func newExpress(t testing.TB, zones ...objstore.Bucket) *objstore.Express {
	t.Helper()
	for len(zones) < 3 {
		zones = append(zones, objstore.NewMem())
	}
	e, err := objstore.NewExpress(objstore.ExpressConfig{Local: "b", StragglerTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Zones:  []objstore.Zone{{Name: "a", Bucket: zones[0]}, {Name: "b", Bucket: zones[1]}, {Name: "c", Bucket: zones[2]}}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

const expressRace = "concurrent IfAbsent Puts of one key with different bodies can split the three zones so that none wins; Loam's keys are unique per writer (TestExpressQuorum covers a writer's own retry)"

func TestExpressConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return newExpress(t) }, objstoretest.SkipIfAbsentRace(expressRace))
}

// TestExpressConformanceOneZoneDown: with one zone answering every call with an error,
// the bucket still behaves as a bucket.
func TestExpressConformanceOneZoneDown(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return newExpress(t, &downBucket{}) }, objstoretest.SkipIfAbsentRace(expressRace))
}

// downBucket fails every call, as a zone whose endpoint is unreachable.
type downBucket struct{ calls atomic.Int64 }

var errDown = errors.New("connect: connection refused")

func (d *downBucket) Put(context.Context, string, []byte, ...objstore.PutOption) error {
	d.calls.Add(1)
	return errDown
}
func (d *downBucket) Get(context.Context, string) ([]byte, error) {
	d.calls.Add(1)
	return nil, errDown
}
func (d *downBucket) GetRange(context.Context, string, int64, int64) ([]byte, error) {
	d.calls.Add(1)
	return nil, errDown
}
func (d *downBucket) Stat(context.Context, string) (objstore.ObjectInfo, error) {
	d.calls.Add(1)
	return objstore.ObjectInfo{}, errDown
}
func (d *downBucket) List(context.Context, string, func(objstore.ObjectInfo) error) error {
	d.calls.Add(1)
	return errDown
}
func (d *downBucket) Delete(context.Context, string) error { d.calls.Add(1); return errDown }
func (d *downBucket) Close() error                         { return nil }

// slowBucket delays Puts until release is closed.
type slowBucket struct {
	objstore.Bucket
	release chan struct{}
}

func (s *slowBucket) Put(ctx context.Context, key string, body []byte, opts ...objstore.PutOption) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Bucket.Put(ctx, key, body, opts...)
}

func TestExpressQuorum(t *testing.T) {
	ctx := context.Background()
	t.Run("slow zone does not delay the answer, and catches up", func(t *testing.T) {
		slow := &slowBucket{Bucket: objstore.NewMem(), release: make(chan struct{})}
		e := newExpress(t, objstore.NewMem(), slow, objstore.NewMem())
		start := time.Now()
		if err := e.Put(ctx, "wal/x", []byte("abc"), objstore.IfAbsent()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Put waited %v for the slow zone", d)
		}
		// The local zone (b) is the slow one: reads fall through to the others.
		if got, err := e.Get(ctx, "wal/x"); err != nil || string(got) != "abc" {
			t.Fatalf("get: %q %v", got, err)
		}
		close(slow.release)
		if err := e.Close(); err != nil { // waits for the straggler
			t.Fatal(err)
		}
		if got, err := slow.Bucket.Get(ctx, "wal/x"); err != nil || string(got) != "abc" {
			t.Fatalf("the slow zone never got its copy: %q %v", got, err)
		}
	})
	t.Run("two zones down: nothing acknowledged", func(t *testing.T) {
		third := objstore.NewMem()
		e := newExpress(t, &downBucket{}, &downBucket{}, third)
		err := e.Put(ctx, "wal/y", []byte("abc"), objstore.IfAbsent())
		if err == nil || errors.Is(err, objstore.ErrPreconditionFailed) {
			t.Fatalf("put with two zones down: %v (want a retriable failure)", err)
		}
		if _, err := e.Get(ctx, "wal/never"); err == nil || errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("get with two zones down: %v (one NotFound is not authoritative)", err)
		}
		if err := e.Delete(ctx, "wal/y"); err == nil {
			t.Fatal("delete succeeded in one zone of three")
		}
	})
	t.Run("one zone refusing", func(t *testing.T) {
		down := &downBucket{}
		e := newExpress(t, objstore.NewMem(), down, objstore.NewMem())
		if err := e.Put(ctx, "wal/z", []byte("abc"), objstore.IfAbsent()); err != nil {
			t.Fatal(err)
		}
		if got, err := e.Get(ctx, "wal/z"); err != nil || string(got) != "abc" {
			t.Fatalf("get: %q %v", got, err)
		}
		if err := e.Delete(ctx, "wal/z"); err != nil {
			t.Fatalf("delete in two zones of three: %v", err)
		}
		if down.calls.Load() == 0 {
			t.Fatal("the down zone was never tried")
		}
	})
	t.Run("retry of our own PUT succeeds; another body conflicts", func(t *testing.T) {
		zones := []objstore.Bucket{objstore.NewMem(), objstore.NewMem(), objstore.NewMem()}
		e := newExpress(t, zones...)
		// An earlier attempt reached two zones before its answer was lost.
		for _, z := range zones[:2] {
			if err := z.Put(ctx, "wal/r", []byte("ours")); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.Put(ctx, "wal/r", []byte("ours"), objstore.IfAbsent()); err != nil {
			t.Fatalf("retry of our own object: %v", err)
		}
		if err := e.Put(ctx, "wal/r", []byte("theirs"), objstore.IfAbsent()); !errors.Is(err, objstore.ErrPreconditionFailed) {
			t.Fatalf("another writer's key: %v", err)
		}
	})
	t.Run("NotFound needs two zones", func(t *testing.T) {
		zones := []objstore.Bucket{objstore.NewMem(), objstore.NewMem(), objstore.NewMem()}
		e := newExpress(t, zones...)
		if err := zones[0].Put(ctx, "wal/only-a", []byte("1")); err != nil {
			t.Fatal(err)
		}
		// Local zone b says NotFound, c says NotFound: absent (a lone copy was never acknowledged).
		if _, err := e.Get(ctx, "wal/only-a"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("want NotFound from two zones, got %v", err)
		}
		if err := zones[2].Put(ctx, "wal/a-and-c", []byte("2")); err != nil {
			t.Fatal(err)
		}
		if err := zones[0].Put(ctx, "wal/a-and-c", []byte("2")); err != nil {
			t.Fatal(err)
		}
		if got, err := e.Get(ctx, "wal/a-and-c"); err != nil || string(got) != "2" {
			t.Fatalf("an object in two zones, not the local one: %q %v", got, err)
		}
	})
	t.Run("list merges zones and survives one failing", func(t *testing.T) {
		zones := []objstore.Bucket{objstore.NewMem(), objstore.NewMem(), &downBucket{}}
		e := newExpress(t, zones...)
		for i := range 5 {
			if err := e.Put(ctx, fmt.Sprintf("wal/%d", i), []byte("x"), objstore.IfAbsent()); err != nil {
				t.Fatal(err)
			}
		}
		var keys []string
		if err := e.List(ctx, "wal/", func(o objstore.ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(keys) != "[wal/0 wal/1 wal/2 wal/3 wal/4]" {
			t.Fatalf("keys %v", keys)
		}
	})
	if _, err := objstore.NewExpress(objstore.ExpressConfig{Zones: []objstore.Zone{{Name: "a", Bucket: objstore.NewMem()}}}); err == nil {
		t.Error("one zone accepted")
	}
}
