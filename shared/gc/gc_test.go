package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// fakeMeta holds a reference set and a retired set, as the sequencer does.
type fakeMeta struct {
	mu       sync.Mutex
	refs     map[string]bool
	retired  map[string]int64
	refCalls int
}

func (f *fakeMeta) ListRetired(ctx context.Context, after string, limit int) ([]meta.RetiredObject, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for k := range f.retired {
		if k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []meta.RetiredObject
	for _, k := range keys {
		if len(out) == limit {
			break
		}
		out = append(out, meta.RetiredObject{Key: k, RetiredMs: f.retired[k]})
	}
	return out, nil
}

func (f *fakeMeta) ForgetRetired(ctx context.Context, keys []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.retired, k)
	}
	return nil
}

func (f *fakeMeta) Referenced(ctx context.Context, keys []string) ([]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refCalls++
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = f.refs[k]
	}
	return out, nil
}

func keys(t *testing.T, b objstore.Bucket) []string {
	var out []string
	if err := b.List(context.Background(), "", func(o objstore.ObjectInfo) error { out = append(out, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGC(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMem()
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	t0 := time.Now()
	for _, k := range []string{"wal/standard/n/1.wal", "wal/standard/n/2.wal", "wal/standard/n/3.wal", "seg/1/0/a.seg", "seg/1/0/orphan.seg", "seg/1/0/notes.txt"} {
		b.Put(ctx, k, []byte(k))
	}
	m := &fakeMeta{
		refs:    map[string]bool{"wal/standard/n/3.wal": true, "seg/1/0/a.seg": true},
		retired: map[string]int64{"wal/standard/n/1.wal": t0.UnixMilli(), "wal/standard/n/2.wal": t0.Add(time.Minute).UnixMilli()},
	}
	now := t0
	g, err := New(Config{Bucket: b, Meta: m, Coord: store, Grace: 5 * time.Minute, OrphanAge: 10 * time.Minute,
		Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	all := keys(t, b)
	// Within grace: nothing goes.
	if st, err := g.Run(ctx); err != nil || st.Deleted+st.Orphans != 0 || st.Retired != 2 || !slices.Equal(keys(t, b), all) {
		t.Fatalf("within grace: %+v %v %v", st, err, keys(t, b))
	}
	// 1.wal's grace has passed, 2.wal's not.
	now = t0.Add(5*time.Minute + time.Second)
	if st, err := g.Run(ctx); err != nil || st.Deleted != 1 || st.Orphans != 0 {
		t.Fatalf("%+v %v", st, err)
	}
	if slices.Contains(keys(t, b), "wal/standard/n/1.wal") || m.retired["wal/standard/n/1.wal"] != 0 {
		t.Fatal("1.wal not deleted or not forgotten")
	}
	// 2.wal gains a reference again before it is due: it is kept.
	m.mu.Lock()
	m.refs["wal/standard/n/2.wal"] = true
	m.mu.Unlock()
	now = t0.Add(7 * time.Minute)
	if st, err := g.Run(ctx); err != nil || st.Deleted != 0 || st.Referenced != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	if !slices.Contains(keys(t, b), "wal/standard/n/2.wal") {
		t.Fatal("a referenced object was deleted")
	}
	// Orphans: objects are older than OrphanAge only from the bucket's LastModified + 10 min,
	// and the sweep runs once per OrphanInterval (1 h) from the first Run's. It records the
	// orphan, then deletes it once it has stayed one for Grace.
	now = time.Now().Add(time.Hour + time.Minute)
	st, err := g.Run(ctx)
	if err != nil || !st.Swept || st.Orphans != 0 || st.OrphansWaiting != 1 || !slices.Contains(keys(t, b), "seg/1/0/orphan.seg") {
		t.Fatalf("first sighting: %+v %v", st, err)
	}
	now = now.Add(30 * time.Minute)
	if st, err := g.Run(ctx); err != nil || st.Swept {
		t.Fatalf("within the interval: %+v %v", st, err)
	}
	now = now.Add(30 * time.Minute)
	if st, err = g.Run(ctx); err != nil || !st.Swept || st.Orphans != 1 {
		t.Fatalf("orphans: %+v %v", st, err)
	}
	want := []string{"seg/1/0/a.seg", "seg/1/0/notes.txt", "wal/standard/n/2.wal", "wal/standard/n/3.wal"}
	if got := keys(t, b); !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
	// The orphan sweep waits for its interval.
	b.Put(ctx, "seg/1/0/orphan2.seg", nil)
	now = now.Add(time.Hour - time.Minute)
	if st, err := g.Run(ctx); err != nil || st.Swept || st.Orphans != 0 {
		t.Fatalf("%+v %v", st, err)
	}
}

// TestGCRetiredNotOrphan: a retired object past OrphanAge but within its grace is left to
// the schedule, not deleted as an orphan.
func TestGCRetiredNotOrphan(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMem()
	store, _ := coord.NewBolt(filepath.Join(t.TempDir(), "c.db"))
	defer store.Close()
	b.Put(ctx, "wal/standard/n/1.wal", []byte("x"))
	now := time.Now().Add(time.Hour)
	m := &fakeMeta{refs: map[string]bool{}, retired: map[string]int64{"wal/standard/n/1.wal": now.UnixMilli()}}
	g, _ := New(Config{Bucket: b, Meta: m, Coord: store, Grace: 5 * time.Minute, OrphanAge: 2 * time.Minute, Now: func() time.Time { return now }})
	if st, err := g.Run(ctx); err != nil || st.Orphans != 0 || st.Deleted != 0 || len(keys(t, b)) != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	now = now.Add(6 * time.Minute)
	if st, err := g.Run(ctx); err != nil || st.Deleted != 1 || len(keys(t, b)) != 0 {
		t.Fatalf("%+v %v", st, err)
	}
}

func TestGCMany(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMem()
	store, _ := coord.NewBolt(filepath.Join(t.TempDir(), "c.db"))
	defer store.Close()
	m := &fakeMeta{refs: map[string]bool{}, retired: map[string]int64{}}
	for i := range 1050 {
		k := "wal/standard/n/" + string(rune('a'+i%26)) + "/" + time.Duration(i).String() + ".wal"
		b.Put(ctx, k, nil)
		m.retired[k] = 1
	}
	g, _ := New(Config{Bucket: b, Meta: m, Coord: store, OrphanInterval: -1})
	st, err := g.Run(ctx)
	if err != nil || st.Deleted != 1050 || st.Retired != 1050 || len(keys(t, b)) != 0 || len(m.retired) != 0 {
		t.Fatalf("%+v %v", st, err)
	}
}

func TestConfig(t *testing.T) {
	b := objstore.NewMem()
	for _, c := range []Config{{}, {Bucket: b, Meta: &fakeMeta{}}, {Bucket: b, Meta: &fakeMeta{}, Coord: nil},
		{Bucket: b, Meta: &fakeMeta{}, Coord: coordStub{}, OrphanAge: time.Second}} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

type coordStub struct{ coord.Store }

// listHook runs before each List of the wrapped bucket.
type listHook struct {
	objstore.Bucket
	before func(prefix string)
}

func (l listHook) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	l.before(prefix)
	return l.Bucket.List(ctx, prefix, fn)
}

// TestGCOrphanSweepRetiredMidSweep: an object retired after the sweep read the retired set
// but before its orphan pass is not an orphan: it waits out the grace period.
func TestGCOrphanSweepRetiredMidSweep(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	store, _ := coord.NewBolt(filepath.Join(t.TempDir(), "c.db"))
	defer store.Close()
	const key = "wal/standard/n/1.wal"
	mem.Put(ctx, key, []byte("x"))
	now := time.Now().Add(time.Hour) // the object is past OrphanAge
	m := &fakeMeta{refs: map[string]bool{key: true}, retired: map[string]int64{}}
	b := listHook{Bucket: mem, before: func(string) {
		// Segmented meanwhile: its last reference goes and it enters the retired set.
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.refs[key] {
			delete(m.refs, key)
			m.retired[key] = now.UnixMilli()
		}
	}}
	g, _ := New(Config{Bucket: b, Meta: m, Coord: store, Grace: 5 * time.Minute, OrphanAge: 2 * time.Minute,
		Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if st, err := g.Run(ctx); err != nil || st.Orphans != 0 || !slices.Equal(keys(t, mem), []string{key}) {
		t.Fatalf("a retired object was deleted as an orphan within its grace: %+v %v, left %v", st, err, keys(t, mem))
	}
	now = now.Add(6 * time.Minute)
	if st, err := g.Run(ctx); err != nil || st.Deleted != 1 || len(keys(t, mem)) != 0 {
		t.Fatalf("after grace: %+v %v, left %v", st, err, keys(t, mem))
	}
}

// countLists counts the LISTs of the wrapped bucket.
func countLists(b objstore.Bucket) (objstore.Bucket, *int) {
	n := new(int)
	return listHook{Bucket: b, before: func(string) { *n++ }}, n
}

// TestGCOrphanClockAcrossColdStarts: each invocation may be a cold start (a new GC value);
// the orphan clock and the sweep interval live in the coordination store, so a cold start
// neither restarts an orphan's clock nor lists the bucket before the interval has passed.
func TestGCOrphanClockAcrossColdStarts(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	store, _ := coord.NewBolt(filepath.Join(t.TempDir(), "c.db"))
	defer store.Close()
	const orphan = "seg/1/0/orphan.seg"
	mem.Put(ctx, orphan, []byte("x"))
	m := &fakeMeta{refs: map[string]bool{}, retired: map[string]int64{}}
	b, lists := countLists(mem)
	t0 := time.Now().Add(time.Hour) // the object is past OrphanAge
	cold := func(now time.Time) Stats {
		t.Helper()
		g, err := New(Config{Bucket: b, Meta: m, Coord: store, Grace: 5 * time.Minute, OrphanAge: 2 * time.Minute,
			OrphanInterval: 2 * time.Minute, Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		st, err := g.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := cold(t0); st.Orphans != 0 || !slices.Equal(keys(t, mem), []string{orphan}) {
		t.Fatalf("first sighting deleted the orphan at once: %+v", st)
	}
	if *lists == 0 {
		t.Fatal("the first sweep listed nothing")
	}
	listed := *lists
	if st := cold(t0.Add(time.Minute)); st.Orphans != 0 || *lists != listed {
		t.Fatalf("a cold start within the sweep interval listed the bucket (%d LISTs, had %d): %+v", *lists, listed, st)
	}
	if st := cold(t0.Add(3 * time.Minute)); st.Orphans != 0 || len(keys(t, mem)) != 1 {
		t.Fatalf("deleted before it was an orphan for Grace: %+v", st)
	}
	// First seen at t0: gone at t0 + Grace, though this is a cold start too.
	if st := cold(t0.Add(5*time.Minute + time.Second)); st.Orphans != 1 || len(keys(t, mem)) != 0 {
		t.Fatalf("an orphan's clock restarted with the cold start: %+v, left %v", st, keys(t, mem))
	}
}

// TestGCOrphanReferencedAgain: an orphan found referenced is forgotten; found unreferenced
// later, its clock starts afresh.
func TestGCOrphanReferencedAgain(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	store, _ := coord.NewBolt(filepath.Join(t.TempDir(), "c.db"))
	defer store.Close()
	const key = "wal/standard/n/1.wal"
	mem.Put(ctx, key, []byte("x"))
	m := &fakeMeta{refs: map[string]bool{}, retired: map[string]int64{}}
	now := time.Now().Add(time.Hour)
	g, _ := New(Config{Bucket: mem, Meta: m, Coord: store, Grace: 5 * time.Minute, OrphanAge: 2 * time.Minute,
		OrphanInterval: time.Minute, Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	records := func() (out []string) {
		coord.Orphans{Store: store}.List(ctx, func(o coord.Orphan) error { out = append(out, o.Key); return nil })
		return out
	}
	if st, err := g.Run(ctx); err != nil || st.OrphansWaiting != 1 || !slices.Equal(records(), []string{key}) {
		t.Fatalf("%+v %v %v", st, err, records())
	}
	m.mu.Lock()
	m.refs[key] = true
	m.mu.Unlock()
	now = now.Add(time.Minute)
	if st, err := g.Run(ctx); err != nil || st.OrphansForgot != 1 || len(records()) != 0 {
		t.Fatalf("referenced again: %+v %v %v", st, err, records())
	}
	m.mu.Lock()
	delete(m.refs, key)
	m.mu.Unlock()
	now = now.Add(5 * time.Minute) // past Grace from the first sighting
	if st, err := g.Run(ctx); err != nil || st.Orphans != 0 || st.OrphansWaiting != 1 || len(keys(t, mem)) != 1 {
		t.Fatalf("the clock did not restart: %+v %v", st, err)
	}
	now = now.Add(5 * time.Minute)
	if st, err := g.Run(ctx); err != nil || st.Orphans != 1 || len(records()) != 0 {
		t.Fatalf("%+v %v %v", st, err, records())
	}
}

// TestGCMaxOrphans: one sweep records at most MaxOrphans orphans; later sweeps the rest.
func TestGCMaxOrphans(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	store, _ := coord.NewBolt(filepath.Join(t.TempDir(), "c.db"))
	defer store.Close()
	for i := range 5 {
		mem.Put(ctx, fmt.Sprintf("seg/1/0/%d.seg", i), nil)
	}
	m := &fakeMeta{refs: map[string]bool{}, retired: map[string]int64{}}
	now := time.Now().Add(time.Hour)
	g, _ := New(Config{Bucket: mem, Meta: m, Coord: store, Grace: 5 * time.Minute, OrphanAge: 2 * time.Minute, MaxOrphans: 2,
		OrphanInterval: time.Minute, Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	n := func() (c int) {
		coord.Orphans{Store: store}.List(ctx, func(coord.Orphan) error { c++; return nil })
		return c
	}
	for i, want := range []int{2, 4, 5} {
		if st, err := g.Run(ctx); err != nil || n() != want || st.Orphans != 0 {
			t.Fatalf("sweep %d: %d records, want %d: %+v %v", i, n(), want, st, err)
		}
		now = now.Add(time.Minute)
	}
	now = now.Add(5 * time.Minute)
	if st, err := g.Run(ctx); err != nil || st.Orphans != 5 || n() != 0 || len(keys(t, mem)) != 0 {
		t.Fatalf("%+v %v", st, err)
	}
}
