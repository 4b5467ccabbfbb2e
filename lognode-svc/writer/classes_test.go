package writer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/walfmt"
)

func newTestClasses(t *testing.T, std, exp objstore.Bucket, m meta.Client, stdFlush time.Duration) *Classes {
	t.Helper()
	c, err := NewClasses(ClassesConfig{NodeID: "n1", Meta: m, Registry: prometheus.NewRegistry(),
		Standard: Config{Bucket: std, FlushInterval: stdFlush}, Express: Config{Bucket: exp}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// TestExpressNeverWaitsForStandard: with a standard write buffered for its (long) flush
// interval, an express write commits within a few express intervals.
func TestExpressNeverWaitsForStandard(t *testing.T) {
	std, exp := objstore.Counting(objstore.NewMem()), objstore.Counting(objstore.NewMem())
	c := newTestClasses(t, std, exp, newFakeMeta(), 3*time.Second)
	if c.Express == nil || c.Express.cfg.FlushInterval != ExpressFlushInterval {
		t.Fatalf("express writer %v, want one flushing every %v", c.Express, ExpressFlushInterval)
	}
	ctx := context.Background()
	stdDone := make(chan error, 1)
	go func() {
		_, err := c.Map()[meta.ClassStandard].Write(ctx, []Request{{StreamID: 1, Batches: batchOf(t, 1, "s"), Records: 1}})
		stdDone <- err
	}()
	time.Sleep(20 * time.Millisecond) // the standard write is buffered
	for i := range 20 {
		start := time.Now()
		res, err := c.Map()[meta.ClassExpress].Write(ctx, []Request{{StreamID: 2, Batches: batchOf(t, 1, "e"), Records: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].BaseOffset != int64(i) {
			t.Fatalf("express write %d at offset %d", i, res[0].BaseOffset)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("express write %d took %v: it waited for the standard flush", i, d)
		}
	}
	select {
	case err := <-stdDone:
		t.Fatalf("standard write answered (%v) before its 3 s flush interval", err)
	default:
	}
	if s := std.Stats(); s.Puts != 0 {
		t.Fatalf("standard bucket: %d PUTs during express writes, want 0", s.Puts)
	}
	if s := exp.Stats(); s.Puts != 20 {
		t.Fatalf("express bucket: %d PUTs for 20 sequential express writes, want 20", s.Puts)
	}
	// Every express object is wal/express/<node>/<ulid>.wal and is an express WAL object.
	n := 0
	if err := exp.List(ctx, "", func(o objstore.ObjectInfo) error {
		n++
		class, node, id, err := walfmt.ParseObjectKey(o.Key)
		if err != nil || class != walfmt.ClassExpress || node != "n1" || !strings.HasPrefix(o.Key, objstore.ExpressPrefix+"n1/") || id == (ulid.ULID{}) {
			t.Errorf("express object %q: class %v node %q err %v", o.Key, class, node, err)
		}
		body, err := exp.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if obj, err := walfmt.Decode(body); err != nil || obj.Header.Class != walfmt.ClassExpress {
			t.Errorf("express object %q: %+v, %v", o.Key, obj, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 20 {
		t.Fatalf("%d express objects, want 20", n)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stdDone; err != nil {
		t.Fatalf("standard write flushed on Close: %v", err)
	}
}

// TestIdleExpressMakesNoPuts: an express writer with nothing buffered makes no PUTs over
// a hundred flush intervals, one write makes one, and idling again makes none.
func TestIdleExpressMakesNoPuts(t *testing.T) {
	std, exp := objstore.Counting(objstore.NewMem()), objstore.Counting(objstore.NewMem())
	c := newTestClasses(t, std, exp, newFakeMeta(), 0)
	time.Sleep(100 * ExpressFlushInterval)
	if s := exp.Stats(); s.Puts != 0 {
		t.Fatalf("idle express writer: %d PUTs in %v, want 0", s.Puts, 100*ExpressFlushInterval)
	}
	if _, err := c.Express.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 2, "x"), Records: 2}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * ExpressFlushInterval)
	if s, ss := exp.Stats(), std.Stats(); s.Puts != 1 || ss.Puts != 0 {
		t.Fatalf("after one express write and idling: %d express PUTs (want 1), %d standard (want 0)", s.Puts, ss.Puts)
	}
}

func TestClassesWithoutExpress(t *testing.T) {
	c, err := NewClasses(ClassesConfig{NodeID: "n1", Meta: newFakeMeta(), Standard: Config{Bucket: objstore.NewMem()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, ok := c.Map()[meta.ClassExpress]; ok || c.Express != nil {
		t.Fatal("express served without an express bucket")
	}
	if c.Standard.cfg.FlushInterval != StandardFlushInterval || c.Standard.cfg.Class != walfmt.ClassStandard {
		t.Fatalf("standard writer: flush %v class %v", c.Standard.cfg.FlushInterval, c.Standard.cfg.Class)
	}
	if _, err := NewClasses(ClassesConfig{NodeID: "n1", Meta: newFakeMeta()}); err == nil {
		t.Fatal("no standard bucket: no error")
	}
}
