package reader

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/walfmt"
)

// fakeMeta is the offset index of many partitions; only Lookup of meta.Client is used.
type fakeMeta struct {
	meta.Client
	mu       sync.Mutex
	entries  map[pkey][]meta.IndexEntry
	lookups  int
	gate     chan struct{} // when set, Lookup waits for it to close
	inLookup chan struct{} // when set, Lookup signals it on entry
}

func newFakeMeta() *fakeMeta { return &fakeMeta{entries: make(map[pkey][]meta.IndexEntry)} }

func (f *fakeMeta) add(stream uint64, partition int32, es ...meta.IndexEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := pkey{stream, partition}
	f.entries[k] = append(f.entries[k], es...)
}

func (f *fakeMeta) set(stream uint64, partition int32, es ...meta.IndexEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries[pkey{stream, partition}] = es
}

func (f *fakeMeta) lookupCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups
}

func (f *fakeMeta) Lookup(ctx context.Context, stream uint64, partition int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error) {
	f.mu.Lock()
	f.lookups++
	gate, in := f.gate, f.inLookup
	es := f.entries[pkey{stream, partition}]
	f.mu.Unlock()
	if in != nil {
		in <- struct{}{}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, meta.PartitionState{}, ctx.Err()
		}
	}
	var hwm int64
	if len(es) > 0 {
		hwm = es[len(es)-1].End()
	}
	st := meta.PartitionState{StreamID: stream, Partition: partition, HighWatermark: hwm}
	if max <= 0 {
		return nil, st, nil
	}
	if from < 0 || from > hwm {
		return nil, st, meta.ErrOffsetOutOfRange
	}
	for i, e := range es {
		if e.End() > from {
			return append([]meta.IndexEntry(nil), es[i:min(len(es), i+max)]...), st, nil
		}
	}
	return nil, st, nil
}

// putWAL writes a WAL object holding, for each partition of stream 1 in bases, a chunk of
// n batches of per records whose offsets start at that base, and returns each chunk's
// index entry.
func putWAL(t *testing.T, bucket objstore.Bucket, key string, bases map[int32]int64, n, per int) map[int32]meta.IndexEntry {
	t.Helper()
	parts := make([]int32, 0, len(bases))
	for p := range bases {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	var chunks []walfmt.Chunk
	for _, p := range parts {
		var payload []byte
		for _, b := range batches(t, bases[p], n, per) {
			payload = append(payload, b...)
		}
		chunks = append(chunks, walfmt.Chunk{StreamID: 1, Partition: p, Encoding: walfmt.EncodingKafka, Records: int64(n * per), Payload: payload})
	}
	obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: "w", ULID: ulid.Make(), Class: walfmt.ClassStandard}, chunks)
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.Put(context.Background(), key, obj); err != nil {
		t.Fatal(err)
	}
	out := make(map[int32]meta.IndexEntry)
	for i, p := range parts {
		out[p] = meta.IndexEntry{BaseOffset: bases[p], Count: int64(n * per), Kind: meta.KindWAL, Object: key, Offset: refs[i].Offset, Length: refs[i].Length}
	}
	return out
}

// checkFrom fails unless res holds records from offset from on, in order.
func checkFrom(t *testing.T, res Result, from int64, want int) {
	t.Helper()
	vs := values(t, res, from)
	if len(vs) != want {
		t.Fatalf("fetch at %d: %d records, want %d", from, len(vs), want)
	}
	for i, v := range vs {
		if v != fmt.Sprintf("v%d", from+int64(i)) {
			t.Fatalf("fetch at %d: record %d is %s", from, i, v)
		}
	}
}

type fetchAnswer struct {
	res Result
	err error
}

func goFetch(ctx context.Context, r *Reader, partition int32, offset int64, wait time.Duration) chan fetchAnswer {
	ch := make(chan fetchAnswer, 1)
	go func() {
		res, err := r.Fetch(ctx, 1, partition, offset, 1<<20, wait)
		ch <- fetchAnswer{res, err}
	}()
	return ch
}

func await(t *testing.T, ch chan fetchAnswer, what string) fetchAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no answer in 5 s", what)
		return fetchAnswer{}
	}
}

func quiet(t *testing.T, ch chan fetchAnswer, what string) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s: answered %+v %v, want it still waiting", what, a.res, a.err)
	case <-time.After(50 * time.Millisecond):
	}
}

// gatedBucket holds every Get and GetRange until release is closed (or the call's
// context ends), and signals each one's start on started.
type gatedBucket struct {
	objstore.Bucket
	release chan struct{}
	started chan struct{}
}

func (g *gatedBucket) wait(ctx context.Context) error {
	select {
	case g.started <- struct{}{}:
	default:
	}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.Bucket.Get(ctx, key)
}

func (g *gatedBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.Bucket.GetRange(ctx, key, off, n)
}

// TestSharedReadOutlivesCaller: two fetches miss on one chunk and share its read; the
// first one's consumer goes away. It leaves at once, and the read goes on for the other,
// which gets its records.
func TestSharedReadOutlivesCaller(t *testing.T) {
	mem := objstore.NewMem()
	idx := newFakeMeta()
	idx.add(1, 0, putWAL(t, mem, "wal/standard/w/a.wal", map[int32]int64{0: 0}, 2, 5)[0])
	g := &gatedBucket{Bucket: mem, release: make(chan struct{}), started: make(chan struct{}, 1)}
	r, err := New(Config{Bucket: g, Meta: idx})
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(context.Background())
	a := goFetch(actx, r, 0, 0, 0)
	select {
	case <-g.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the first fetch did not start a read")
	}
	b := goFetch(context.Background(), r, 0, 3, 0)
	time.Sleep(50 * time.Millisecond) // b joins the read in flight
	cancel()
	if got := await(t, a, "cancelled fetch"); !errors.Is(got.err, context.Canceled) {
		t.Fatalf("cancelled fetch: %+v %v, want context.Canceled", got.res, got.err)
	}
	close(g.release)
	got := await(t, b, "second fetch")
	if got.err != nil {
		t.Fatalf("second fetch failed with the first caller's cancellation: %v", got.err)
	}
	checkFrom(t, got.res, 3, 7)
}

// TestOneGetPerObject: 3 consumers of 8 partitions whose chunks share WAL objects read
// everything with one GET per object, each partition's batches patched to its own offsets.
func TestOneGetPerObject(t *testing.T) {
	mem := objstore.NewMem()
	bucket := objstore.Counting(mem)
	idx := newFakeMeta()
	bases := map[int32]int64{}
	const objects = 4
	for o := range objects {
		for p := range int32(8) {
			bases[p] = int64(o*20) + int64(p) // partitions start at different offsets
		}
		for p, e := range putWAL(t, mem, fmt.Sprintf("wal/standard/w/%d.wal", o), bases, 2, 10) {
			idx.add(1, p, e)
		}
	}
	// Partitions start at p: make each index begin there.
	r, err := New(Config{Bucket: bucket, Meta: idx})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for p := range int32(8) { // the consumers' first fetches learn the partitions
		if _, err := r.Fetch(ctx, 1, p, objects*20+int64(p), 1<<20, 0); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for range 3 {
		for p := range int32(8) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for off := int64(p); off < objects*20+int64(p); {
					res, err := r.Fetch(ctx, 1, p, off, 1, 0) // one batch a fetch
					if err != nil {
						errs <- err
						return
					}
					vs := values(t, res, off)
					if len(vs) == 0 || vs[0] != fmt.Sprintf("v%d", off) {
						errs <- fmt.Errorf("partition %d at %d: %v", p, off, vs)
						return
					}
					off = res.NextOffset
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := bucket.Stats()
	if gets := st.Gets + st.GetRanges; gets != objects {
		t.Fatalf("%d GETs (%d whole, %d range) for %d objects read by 3 consumers of 8 partitions, want %d", gets, st.Gets, st.GetRanges, objects, objects)
	}
}

// TestChunkCacheBound: with a chunk cache smaller than one object's chunks, reads stay
// right and the cache within its budget.
func TestChunkCacheBound(t *testing.T) {
	mem := objstore.NewMem()
	idx := newFakeMeta()
	bases := map[int32]int64{}
	for p := range int32(8) {
		bases[p] = 0
	}
	for p, e := range putWAL(t, mem, "wal/standard/w/a.wal", bases, 2, 10) {
		idx.add(1, p, e)
	}
	const limit = 8 << 10 // one chunk is about 10 KiB
	r, err := New(Config{Bucket: mem, Meta: idx, ChunkCacheBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for p := range int32(8) {
		if _, err := r.Fetch(ctx, 1, p, 20, 1<<20, 0); err != nil {
			t.Fatal(err)
		}
	}
	for p := range int32(8) {
		res, err := r.Fetch(ctx, 1, p, 0, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkFrom(t, res, 0, 20)
		if n := r.chunks.lru.Len(); r.chunks.size() > limit && n > 1 {
			t.Fatalf("chunk cache holds %d bytes in %d chunks, over its budget of %d", r.chunks.size(), n, limit)
		}
	}
}

// TestNotFoundLooksUpAgain: the node's cached entries name WAL objects that were
// segmented and collected meanwhile (the swap's watch event not yet seen): the fetch drops
// them, looks the offset up again and serves it from where the index now points.
func TestNotFoundLooksUpAgain(t *testing.T) {
	mem := objstore.NewMem()
	idx := newFakeMeta()
	a := putWAL(t, mem, "wal/standard/w/a.wal", map[int32]int64{0: 0}, 1, 10)[0]
	b := putWAL(t, mem, "wal/standard/w/b.wal", map[int32]int64{0: 10}, 1, 10)[0]
	idx.add(1, 0, a, b)
	r, err := New(Config{Bucket: mem, Meta: idx})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if res, err := r.Fetch(ctx, 1, 0, 0, 1, 0); err != nil { // caches the run [a, b]
		t.Fatal(err)
	} else {
		checkFrom(t, res, 0, 10)
	}
	// a and b are rewritten into one new object (as a segmenter would), then collected.
	c := putWAL(t, mem, "wal/standard/w/c.wal", map[int32]int64{0: 0}, 2, 10)[0]
	idx.set(1, 0, c)
	for _, k := range []string{a.Object, b.Object} {
		if err := mem.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	res, err := r.Fetch(ctx, 1, 0, 10, 1<<20, 0)
	if err != nil {
		t.Fatalf("fetch of a collected object's offsets: %v", err)
	}
	checkFrom(t, res, 10, 10)
	// An object the index still names but the bucket lacks fails after one retry.
	idx.set(1, 0, b)
	r2, _ := New(Config{Bucket: mem, Meta: idx})
	before := idx.lookupCount()
	if _, err := r2.Fetch(ctx, 1, 0, 10, 1<<20, 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("fetch of a missing object: %v, want ErrNotFound", err)
	}
	if n := idx.lookupCount() - before; n != 3 { // state, entry, entry again
		t.Fatalf("%d lookups, want 3 (bounds, entry, one retry)", n)
	}
}

// TestEntryObjectMismatch: an index entry that places its chunk elsewhere than its object
// does is an error naming both, not bytes of another chunk.
func TestEntryObjectMismatch(t *testing.T) {
	mem := objstore.NewMem()
	idx := newFakeMeta()
	e := putWAL(t, mem, "wal/standard/w/a.wal", map[int32]int64{0: 0}, 1, 5)[0]
	e.Offset++
	idx.add(1, 0, e)
	r, err := New(Config{Bucket: mem, Meta: idx})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Fetch(context.Background(), 1, 0, 0, 1<<20, 0)
	if err == nil || !strings.Contains(err.Error(), "the object has it at") {
		t.Fatalf("fetch through a misplaced entry: %v", err)
	}
}

// TestLargeObjectKeepsTrackedChunks: of an object large next to the chunk cache, the read
// keeps only the chunks of partitions tracked here; a partition fetched only later costs
// its own read.
func TestLargeObjectKeepsTrackedChunks(t *testing.T) {
	mem := objstore.NewMem()
	bucket := objstore.Counting(mem)
	idx := newFakeMeta()
	bases := map[int32]int64{}
	for p := range int32(8) {
		bases[p] = 0
	}
	for p, e := range putWAL(t, mem, "wal/standard/w/a.wal", bases, 2, 10) { // ~80 KiB
		idx.add(1, p, e)
	}
	r, err := New(Config{Bucket: bucket, Meta: idx, ChunkCacheBytes: 1 << 20}) // keeps objects up to 16 KiB whole
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range []int32{0, 1} {
		if _, err := r.Fetch(ctx, 1, p, 20, 1<<20, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []int32{0, 1} {
		res, err := r.Fetch(ctx, 1, p, 0, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkFrom(t, res, 0, 20)
	}
	if st := bucket.Stats(); st.Gets != 1 || r.chunks.lru.Len() != 2 {
		t.Fatalf("%d GETs, %d chunks cached; want 1 and 2 (the tracked partitions')", st.Gets, r.chunks.lru.Len())
	}
	res, err := r.Fetch(ctx, 1, 5, 0, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkFrom(t, res, 0, 20)
	if st := bucket.Stats(); st.Gets != 2 {
		t.Fatalf("%d GETs, want 2", st.Gets)
	}
}
