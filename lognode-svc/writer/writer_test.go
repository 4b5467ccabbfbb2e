package writer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/walfmt"
)

// fakeMeta assigns offsets like the sequencer and can inject failures. Only CommitWal is
// used by the writer; the rest of meta.Client is left nil.
type fakeMeta struct {
	meta.Client
	mu       sync.Mutex
	next     map[[2]int64]int64
	commits  map[string]meta.CommitResult
	attempts int
	// fail returns an error for attempt n (1-based) and whether the attempt still applies.
	fail func(n int) (err error, applied bool)
	// down makes ListNamespaces (the writer's reachability probe) fail.
	down bool
}

func (f *fakeMeta) ListNamespaces(ctx context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, meta.ErrUnavailable
	}
	return []string{"default"}, nil
}

func newFakeMeta() *fakeMeta {
	return &fakeMeta{next: map[[2]int64]int64{}, commits: map[string]meta.CommitResult{}}
}

func (f *fakeMeta) CommitWal(ctx context.Context, c meta.CommitWal) (meta.CommitResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	var injected error
	applied := true
	if f.fail != nil {
		injected, applied = f.fail(f.attempts)
	}
	if applied {
		if r, ok := f.commits[c.Object]; ok {
			r.Duplicate = true
			if injected == nil {
				return r, nil
			}
		} else if !errors.Is(injected, meta.ErrStaleCommit) {
			res := meta.CommitResult{AppliedIndex: uint64(len(f.commits) + 1)}
			for _, ch := range c.Chunks {
				k := [2]int64{int64(ch.StreamID), int64(ch.Partition)}
				res.BaseOffsets = append(res.BaseOffsets, f.next[k])
				f.next[k] += ch.Records
			}
			f.commits[c.Object] = res
			if injected == nil {
				return res, nil
			}
		}
	}
	return meta.CommitResult{}, injected
}

func batchOf(t testing.TB, n int, tag string) []byte {
	t.Helper()
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Timestamp: 1000, Value: []byte(fmt.Sprintf("%s-%d", tag, i))}
	}
	b, err := recordbatch.Append(nil, recs, recordbatch.DefaultBuildOptions())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newTestWriter(t *testing.T, b objstore.Bucket, m meta.Client, mod func(*Config)) *Buffered {
	t.Helper()
	cfg := Config{NodeID: "n1", Class: walfmt.ClassStandard, FlushInterval: 20 * time.Millisecond, Bucket: b, Meta: m}
	if mod != nil {
		mod(&cfg)
	}
	w, err := NewBuffered(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}

func countObjects(t *testing.T, b objstore.Bucket) int {
	n := 0
	if err := b.List(context.Background(), "wal/", func(objstore.ObjectInfo) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConcurrentWritesShareOneObject(t *testing.T) {
	b, m := objstore.NewMem(), newFakeMeta()
	var mu sync.Mutex
	var committed []Committed
	w := newTestWriter(t, b, m, func(c *Config) {
		c.FlushInterval = 100 * time.Millisecond
		c.OnCommit = func(cs []Committed) { mu.Lock(); committed = append(committed, cs...); mu.Unlock() }
	})
	var wg sync.WaitGroup
	results := make([][]Result, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := []Request{{StreamID: 1, Partition: int32(i % 2), Batches: batchOf(t, 3, "a"), Records: 3, MaxTimestamp: 1000},
				{StreamID: 2, Partition: 0, Batches: batchOf(t, 2, "b"), Records: 2, MaxTimestamp: 1000}}
			res, err := w.Write(context.Background(), reqs)
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		}()
	}
	wg.Wait()
	if n := countObjects(t, b); n != 1 {
		t.Fatalf("%d WAL objects, want 1 for writes within one flush interval", n)
	}
	// Offsets per partition are dense and distinct.
	seen := map[[2]int64]map[int64]bool{}
	for i, res := range results {
		for j, r := range res {
			k := [2]int64{2, 0}
			if j == 0 {
				k = [2]int64{1, int64(i % 2)}
			}
			if seen[k] == nil {
				seen[k] = map[int64]bool{}
			}
			if seen[k][r.BaseOffset] {
				t.Fatalf("base offset %d given twice", r.BaseOffset)
			}
			seen[k][r.BaseOffset] = true
		}
	}
	if len(committed) != 3 {
		t.Fatalf("%d committed chunks, want 3", len(committed))
	}
	for _, c := range committed {
		off := c.Entry.BaseOffset
		rest := c.Batches
		for len(rest) > 0 {
			bt, tail, err := recordbatch.Parse(rest)
			if err != nil {
				t.Fatal(err)
			}
			if bt.BaseOffset != off {
				t.Fatalf("tail batch base offset %d, want %d", bt.BaseOffset, off)
			}
			off += bt.OffsetCount()
			rest = tail
		}
		if off != c.Entry.End() {
			t.Fatalf("batches end at %d, entry at %d", off, c.Entry.End())
		}
	}
	// The object decodes and its chunks are what was committed.
	var key string
	b.List(context.Background(), "wal/", func(o objstore.ObjectInfo) error { key = o.Key; return nil })
	if !strings.HasPrefix(key, "wal/standard/n1/") || !strings.HasSuffix(key, ".wal") {
		t.Fatalf("object key %q", key)
	}
	obj, _ := b.Get(context.Background(), key)
	dec, err := walfmt.Decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	if len(dec.Chunks) != 3 {
		t.Fatalf("%d chunks", len(dec.Chunks))
	}
}

func TestIdleMakesNoPuts(t *testing.T) {
	b := objstore.Counting(objstore.NewMem())
	newTestWriter(t, b, newFakeMeta(), nil)
	time.Sleep(200 * time.Millisecond)
	if s := b.Stats(); s.Puts != 0 {
		t.Fatalf("%d PUTs while idle", s.Puts)
	}
}

func TestSizeTriggersFlush(t *testing.T) {
	b := objstore.NewMem()
	w := newTestWriter(t, b, newFakeMeta(), func(c *Config) { c.FlushInterval = time.Hour; c.MaxBufferBytes = 1 }) // every write is over the limit
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 1, "x"), Records: 1}})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a full buffer did not flush before the interval")
	}
}

func TestCommitOutcomes(t *testing.T) {
	tests := []struct {
		name string
		fail func(n int) (error, bool)
		want error // nil: success
	}{
		{"unavailable then ok: dedupe answers the first offsets", func(n int) (error, bool) {
			if n == 1 {
				return meta.ErrUnavailable, true // applied, but the answer was lost
			}
			return nil, true
		}, nil},
		{"not leader then ok", func(n int) (error, bool) {
			if n == 1 {
				return meta.ErrNotLeader, false
			}
			return nil, true
		}, nil},
		{"stale on first attempt is a clean failure", func(n int) (error, bool) { return meta.ErrStaleCommit, true }, ErrCommitFailed},
		{"stale after an unknown attempt is unknown", func(n int) (error, bool) {
			if n == 1 {
				return meta.ErrUnavailable, false
			}
			return meta.ErrStaleCommit, true
		}, ErrCommitUnknown},
		{"stream deleted is a clean failure", func(n int) (error, bool) { return meta.ErrStreamNotFound, false }, ErrCommitFailed},
		{"unavailable until the budget ends is unknown", func(n int) (error, bool) { return meta.ErrUnavailable, false }, ErrCommitUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newFakeMeta()
			m.fail = tc.fail
			w := newTestWriter(t, objstore.NewMem(), m, func(c *Config) { c.Budget = 500 * time.Millisecond })
			res, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 4, "x"), Records: 4}})
			if tc.want == nil {
				if err != nil || len(res) != 1 || res[0].BaseOffset != 0 {
					t.Fatalf("res %v err %v, want offset 0", res, err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// flakyBucket fails the first n Puts after applying them (a lost answer).
type flakyBucket struct {
	objstore.Bucket
	mu sync.Mutex
	n  int
}

func (f *flakyBucket) Put(ctx context.Context, key string, body []byte, opts ...objstore.PutOption) error {
	err := f.Bucket.Put(ctx, key, body, opts...)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n > 0 {
		f.n--
		return errors.New("connection reset")
	}
	return err
}

func TestPutRetryAfterLostAnswer(t *testing.T) {
	b := &flakyBucket{Bucket: objstore.NewMem(), n: 2}
	w := newTestWriter(t, b, newFakeMeta(), nil)
	res, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 2, "x"), Records: 2}})
	if err != nil || res[0].BaseOffset != 0 {
		t.Fatalf("res %v err %v", res, err)
	}
}

func TestCloseFlushes(t *testing.T) {
	b := objstore.NewMem()
	w := newTestWriter(t, b, newFakeMeta(), func(c *Config) { c.FlushInterval = time.Hour })
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 2, "x"), Records: 2}})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 1, "x"), Records: 1}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

// TestUnreachableSequencerRefusesAtOnce: once commit attempts find the sequencer
// unavailable, new writes are refused at once (nothing written, retriable) until a probe
// finds it back.
func TestUnreachableSequencerRefusesAtOnce(t *testing.T) {
	m := newFakeMeta()
	m.fail = func(n int) (error, bool) { return meta.ErrUnavailable, false }
	m.down = true
	w := newTestWriter(t, objstore.NewMem(), m, func(c *Config) { c.Budget = 300 * time.Millisecond })
	if _, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 1, "x"), Records: 1}}); !errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("first write: %v", err)
	}
	t0 := time.Now()
	_, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 1, "y"), Records: 1}})
	if !errors.Is(err, ErrSequencerUnavailable) || !errors.Is(err, ErrCommitFailed) || time.Since(t0) > 200*time.Millisecond {
		t.Fatalf("write while unreachable: %v after %v, want a prompt ErrSequencerUnavailable", err, time.Since(t0))
	}
	m.mu.Lock()
	m.down, m.fail = false, nil
	m.mu.Unlock()
	if _, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 1, "z"), Records: 1}}); err != nil {
		t.Fatalf("write once the sequencer is back: %v", err)
	}
}
