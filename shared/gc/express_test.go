package gc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/objstore"
)

// switchable is a zone that can be taken down: every call fails while down is set.
type switchable struct {
	objstore.Bucket
	down atomic.Bool
}

var errZoneDown = errors.New("zone down")

func (s *switchable) Delete(ctx context.Context, key string) error {
	if s.down.Load() {
		return errZoneDown
	}
	return s.Bucket.Delete(ctx, key)
}

func (s *switchable) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	if s.down.Load() {
		return errZoneDown
	}
	return s.Bucket.List(ctx, prefix, fn)
}

// TestExpressCopiesDeleted: gc, given the Routed bucket, deletes a retired express WAL
// object from all three zonal buckets after grace; a zone that was down at that moment
// keeps its copy until the orphan sweep finds it (listings merge the zones) and deletes it
// after grace.
func TestExpressCopiesDeleted(t *testing.T) {
	ctx := context.Background()
	var zs [3]*switchable
	var zones []objstore.Zone
	for i := range zs {
		zs[i] = &switchable{Bucket: objstore.NewMem()}
		zones = append(zones, objstore.Zone{Name: string(rune('a' + i)), Bucket: zs[i]})
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := objstore.NewExpress(objstore.ExpressConfig{Zones: zones, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b, err := objstore.NewRouted(objstore.NewMem(), e)
	if err != nil {
		t.Fatal(err)
	}
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	const k1, k2 = "wal/express/n/01.wal", "wal/express/n/02.wal"
	for _, k := range []string{k1, k2, "wal/standard/n/03.wal"} {
		if err := b.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	e.Close() // waits for the background PUTs: every zone holds both express objects
	t0 := time.Now()
	m := &fakeMeta{refs: map[string]bool{"wal/standard/n/03.wal": true},
		retired: map[string]int64{k1: t0.UnixMilli(), k2: t0.UnixMilli()}}
	now := t0
	g, err := New(Config{Bucket: b, Meta: m, Coord: store, Grace: time.Minute, OrphanAge: 10 * time.Minute, OrphanInterval: time.Minute,
		Now: func() time.Time { return now }, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	held := func(k string) (n int) {
		for _, z := range zs {
			if _, err := z.Bucket.Stat(ctx, k); err == nil {
				n++
			}
		}
		return n
	}
	if st, err := g.Run(ctx); err != nil || st.Deleted != 0 || held(k1) != 3 {
		t.Fatalf("within grace: %+v %v, %d copies", st, err, held(k1))
	}
	zs[2].down.Store(true) // zone c is down when grace has passed
	now = t0.Add(time.Minute + time.Second)
	if st, err := g.Run(ctx); err != nil || st.Deleted != 2 {
		t.Fatalf("after grace: %+v %v", st, err)
	}
	if n1, n2 := held(k1), held(k2); n1 != 1 || n2 != 1 {
		t.Fatalf("after grace with zone c down: %d and %d copies left, want only zone c's", n1, n2)
	}
	zs[2].down.Store(false)
	// The orphan sweep finds zone c's copies (older than OrphanAge) and deletes them once
	// they stayed orphans for grace.
	now = t0.Add(time.Hour)
	if _, err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(2 * time.Hour)
	if _, err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n1, n2 := held(k1), held(k2); n1 != 0 || n2 != 0 {
		t.Fatalf("after the orphan sweeps: %d and %d copies left, want 0", n1, n2)
	}
	if held := keys(t, b); len(held) != 1 || held[0] != "wal/standard/n/03.wal" {
		t.Fatalf("left: %q", held)
	}
}

// TestExpressGrace: a retired express WAL object is deleted after ExpressGrace, a standard
// one retired at the same moment only after Grace.
func TestExpressGrace(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMem()
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	const exp, std = "wal/express/n/01.wal", "wal/standard/n/02.wal"
	for _, k := range []string{exp, std} {
		b.Put(ctx, k, []byte(k))
	}
	t0 := time.Now()
	m := &fakeMeta{refs: map[string]bool{}, retired: map[string]int64{exp: t0.UnixMilli(), std: t0.UnixMilli()}}
	now := t0
	g, err := New(Config{Bucket: b, Meta: m, Coord: store, Grace: 10 * time.Minute, OrphanInterval: -1,
		Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(DefaultExpressGrace + time.Second)
	if st, err := g.Run(ctx); err != nil || st.Deleted != 1 {
		t.Fatalf("after the express grace: %+v %v", st, err)
	}
	if _, err := b.Stat(ctx, exp); err == nil {
		t.Fatal("express object kept past its grace")
	}
	if _, err := b.Stat(ctx, std); err != nil {
		t.Fatal("standard object deleted before its grace")
	}
	now = t0.Add(10*time.Minute + time.Second)
	if st, err := g.Run(ctx); err != nil || st.Deleted != 1 {
		t.Fatalf("after the grace: %+v %v", st, err)
	}
}
