package segmenter

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
)

// countingStore counts a coordination store's write calls per kind of item (its partition
// key's first path element).
type countingStore struct {
	coord.Store
	mu     sync.Mutex
	writes map[string]int
}

func (c *countingStore) count(pk string) {
	kind, _, _ := strings.Cut(pk, "/")
	c.mu.Lock()
	if c.writes == nil {
		c.writes = map[string]int{}
	}
	c.writes[kind]++
	c.mu.Unlock()
}

func (c *countingStore) total(kinds ...string) (n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range kinds {
		n += c.writes[k]
	}
	return n
}

func (c *countingStore) Put(ctx context.Context, it coord.Item, cond coord.Condition) (coord.Item, error) {
	c.count(it.PK)
	return c.Store.Put(ctx, it, cond)
}

func (c *countingStore) Delete(ctx context.Context, pk, sk string, cond coord.Condition) error {
	c.count(pk)
	return c.Store.Delete(ctx, pk, sk, cond)
}

func (c *countingStore) Add(ctx context.Context, pk, sk, name string, delta int64) (int64, error) {
	c.count(pk)
	return c.Store.Add(ctx, pk, sk, name, delta)
}

func (c *countingStore) AddAll(ctx context.Context, pk, sk string, deltas map[string]int64) (map[string]int64, error) {
	c.count(pk)
	return c.Store.AddAll(ctx, pk, sk, deltas)
}

// TestFigureCoordWritesPerGiB measures the coordination-store writes the segmenter makes
// per GiB it segments, with many partitions per WAL object (the shape of a busy log node's
// flush): each of 3 nodes flushes objects holding a chunk of each of 128 partitions.
//
//	go test -count=1 -run TestFigureCoordWritesPerGiB -v ./shared/segmenter/
func TestFigureCoordWritesPerGiB(t *testing.T) {
	ctx := context.Background()
	const partitions, objects = 128, 60
	f := newFixture(t, partitions)
	bolt, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	store := &countingStore{Store: bolt}
	s := f.segmenter(Config{Coord: store, TargetBytes: 16 << 10, MaxAge: time.Hour})
	all := make([]int32, partitions)
	for i := range all {
		all[i] = int32(i)
	}
	var walBytes int64
	for i := range objects {
		if i == 3 {
			// The schedule's sweep: it learns how many nodes write, so a notification
			// judges a partition by its node's share.
			if err := s.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
		}
		f.prod.node = fmt.Sprint("n", i%3+1)
		f.produce(1, 1, 100, all...)
		keys := walKeys(t, f.bucket)
		for _, k := range keys {
			if strings.Contains(k, f.prod.node+"/") && !seen(k) {
				st, _ := f.bucket.Stat(ctx, k)
				walBytes += st.Size
				if err := s.HandleS3(ctx, mustS3(t, s3Event(t, f.bucket, k))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var segmented, left int64
	for p := range int32(partitions) {
		for _, e := range f.meta.Entries(1, p) {
			if e.Kind == meta.KindSegment {
				segmented += e.Length
			} else {
				left += e.Length
			}
		}
	}
	if segmented == 0 {
		t.Fatal("nothing segmented")
	}
	work := store.total("work", "walwork")
	claims := store.total("ntf")
	gib := float64(segmented) / (1 << 30)
	t.Logf("%d objects x %d partitions: %d segment bytes, %d WAL bytes left; work-accounting writes %d (%.0f per GiB segmented, %.2f per WAL object), claim writes %d (%.0f per GiB)",
		objects, partitions, segmented, left, work, float64(work)/gib, float64(work)/objects, claims, float64(claims)/gib)
}

var seenKeys sync.Map

func seen(k string) bool { _, ok := seenKeys.LoadOrStore(k, true); return ok }

// TestOneCoordWritePerWALObject: handling a WAL object's notification costs one
// work-accounting write however many partitions the object holds.
func TestOneCoordWritePerWALObject(t *testing.T) {
	ctx := context.Background()
	const partitions, objects = 100, 5
	f := newFixture(t, partitions)
	bolt, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	store := &countingStore{Store: bolt}
	s := f.segmenter(Config{Coord: store, TargetBytes: 64 << 20, MaxAge: time.Hour})
	all := make([]int32, partitions)
	for i := range all {
		all[i] = int32(i)
	}
	for range objects {
		f.produce(1, 1, 100, all...)
		keys := walKeys(t, f.bucket)
		if err := s.HandleS3(ctx, mustS3(t, s3Event(t, f.bucket, keys[len(keys)-1]))); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.total("work", "walwork"); n != objects {
		t.Fatalf("%d work-accounting writes for %d WAL objects of %d partitions each, want one per object", n, objects, partitions)
	}
	// The counts are what the index holds.
	for p := range int32(partitions) {
		var want int64
		for _, e := range f.meta.Entries(1, p) {
			want += e.Length
		}
		if got, err := (coord.WALWork{Store: bolt}).Pending(ctx, coord.Partition{StreamID: 1, Partition: p}); err != nil || got != want {
			t.Fatalf("partition %d: pending %d, %v; index has %d WAL bytes", p, got, err, want)
		}
	}
}

// TestSweepCorrectsCounts: the sweep brings the per-node counts back to the index (lost
// subtractions, counts of a deleted stream) and drops the counts that reached zero.
func TestSweepCorrectsCounts(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 2)
	bolt, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	ww := coord.WALWork{Store: bolt}
	s := f.segmenter(Config{Coord: bolt, TargetBytes: 64 << 20, MaxAge: time.Hour})
	for _, node := range []string{"n1", "n2"} {
		f.prod.node = node
		f.produce(1, 1, 100, 0, 1)
	}
	// Wrong counts: too much for n1/p0, a partition of a stream that does not exist, a
	// node that wrote nothing pending.
	p0, p1, gone := coord.Partition{StreamID: 1, Partition: 0}, coord.Partition{StreamID: 1, Partition: 1}, coord.Partition{StreamID: 7, Partition: 0}
	if _, err := ww.Add(ctx, "n1", map[coord.Partition]int64{p0: 999, gone: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := ww.Add(ctx, "n9", map[coord.Partition]int64{p1: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[coord.Partition]int64{}
	if err := ww.Nodes(ctx, func(n string, m map[coord.Partition]int64) error { got[n] = m; return nil }); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[coord.Partition]int64{}
	for p := range int32(2) {
		for _, e := range f.meta.Entries(1, p) {
			node := nodeOf(e.Object)
			if want[node] == nil {
				want[node] = map[coord.Partition]int64{}
			}
			want[node][coord.Partition{StreamID: 1, Partition: p}] += e.Length
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the sweep:\n got %v\nwant %v", got, want)
	}
	if s.nodes.Load() != 2 {
		t.Fatalf("nodes = %d, want 2", s.nodes.Load())
	}
}

// TestNotificationScalesByLiveNodes: with three live nodes in the registry each writing a
// third of a partition's bytes, a notification segments the partition once the partition
// (not one node) holds TargetBytes, without a sweep first.
func TestNotificationScalesByLiveNodes(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 1)
	bolt, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	for _, n := range []string{"n1", "n2", "n3"} {
		if err := (coord.Registry{Store: bolt}).Heartbeat(ctx, coord.Node{ID: n, HTTPAddr: "127.0.0.1:1"}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	const target = 32 << 10
	s := f.segmenter(Config{Coord: bolt, TargetBytes: target, MaxAge: time.Hour})
	var total int64
	for i := 0; total < target; i++ {
		f.prod.node = fmt.Sprint("n", i%3+1)
		f.produce(1, 1, 100, 0)
		es := f.meta.Entries(1, 0)
		total += es[len(es)-1].Length
		if err := s.HandleS3(ctx, mustS3(t, s3Event(t, f.bucket, es[len(es)-1].Object))); err != nil {
			t.Fatal(err)
		}
	}
	if k := kinds(f.meta.Entries(1, 0)); !strings.HasPrefix(k, "S") {
		t.Fatalf("%d bytes pending over 3 nodes (target %d), not segmented: %s", total, target, k)
	}
}
