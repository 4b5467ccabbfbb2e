package writer

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// missing streams' chunks are refused per chunk (meta.ChunkStreamNotFound), as the
	// sequencer refuses a deleted stream's.
	missing map[uint64]bool
	// answer, when set, changes every answer (a malformed one).
	answer func(*meta.CommitResult)
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
			for i, ch := range c.Chunks {
				if f.missing[ch.StreamID] {
					if c.AllOrNothing {
						return meta.CommitResult{}, meta.ErrStreamNotFound
					}
					if res.Status == nil {
						res.Status = make([]meta.ChunkStatus, len(c.Chunks))
					}
					res.Status[i] = meta.ChunkStreamNotFound
					res.BaseOffsets = append(res.BaseOffsets, -1)
					continue
				}
				k := [2]int64{int64(ch.StreamID), int64(ch.Partition)}
				res.BaseOffsets = append(res.BaseOffsets, f.next[k])
				f.next[k] += ch.Records
			}
			if f.answer != nil {
				f.answer(&res)
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
		rest := slices.Concat(c.Batches...)
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

// TestRefusedChunkFailsOnlyItsRequests: writes to a deleted stream share a flush with
// writes to a live one. The sequencer refuses the deleted stream's chunk alone: the live
// stream's writes commit at dense offsets, the deleted one's fail with ErrCommitFailed
// wrapping meta.ErrStreamNotFound, and a Write spanning both reports each request.
func TestRefusedChunkFailsOnlyItsRequests(t *testing.T) {
	b, m := objstore.NewMem(), newFakeMeta()
	m.missing = map[uint64]bool{2: true}
	var mu sync.Mutex
	var committed []Committed
	w := newTestWriter(t, b, m, func(c *Config) {
		c.FlushInterval = 200 * time.Millisecond
		c.OnCommit = func(cs []Committed) { mu.Lock(); committed = append(committed, cs...); mu.Unlock() }
	})
	type out struct {
		res []Result
		err error
	}
	var wg sync.WaitGroup
	live, dead := make([]out, 4), make([]out, 4)
	var mixed out
	for i := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			res, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 2, "a"), Records: 2}})
			live[i] = out{res, err}
		}()
		go func() {
			defer wg.Done()
			res, err := w.Write(context.Background(), []Request{{StreamID: 2, Batches: batchOf(t, 3, "b"), Records: 3}})
			dead[i] = out{res, err}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, err := w.Write(context.Background(), []Request{{StreamID: 2, Partition: 0, Batches: batchOf(t, 1, "m"), Records: 1},
			{StreamID: 1, Partition: 1, Batches: batchOf(t, 1, "m"), Records: 1}})
		mixed = out{res, err}
	}()
	wg.Wait()
	if n := countObjects(t, b); n != 1 {
		t.Fatalf("%d WAL objects, want the writes in one flush", n)
	}
	seen := map[int64]bool{}
	for i, o := range live {
		if o.err != nil || len(o.res) != 1 || o.res[0].Err != nil {
			t.Fatalf("live write %d: %+v %v: another stream's refusal failed it", i, o.res, o.err)
		}
		seen[o.res[0].BaseOffset] = true
	}
	for off := int64(0); off < 8; off += 2 {
		if !seen[off] {
			t.Fatalf("live offsets %v, want 0, 2, 4, 6", seen)
		}
	}
	for i, o := range dead {
		if !errors.Is(o.err, ErrCommitFailed) || !errors.Is(o.err, meta.ErrStreamNotFound) || errors.Is(o.err, ErrCommitUnknown) {
			t.Fatalf("deleted stream's write %d: %v, want ErrCommitFailed wrapping meta.ErrStreamNotFound", i, o.err)
		}
		if len(o.res) != 1 || !errors.Is(o.res[0].Err, meta.ErrStreamNotFound) || o.res[0].BaseOffset != -1 {
			t.Fatalf("deleted stream's write %d results %+v", i, o.res)
		}
	}
	if !errors.Is(mixed.err, ErrPartialCommit) || errors.Is(mixed.err, ErrCommitFailed) || errors.Is(mixed.err, meta.ErrStreamNotFound) {
		t.Fatalf("write spanning streams: %v, want ErrPartialCommit alone", mixed.err)
	}
	if len(mixed.res) != 2 || !errors.Is(mixed.res[0].Err, ErrCommitFailed) || !errors.Is(mixed.res[0].Err, meta.ErrStreamNotFound) ||
		mixed.res[1].Err != nil || mixed.res[1].BaseOffset != 0 {
		t.Fatalf("write spanning streams: results %+v", mixed.res)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range committed {
		if c.StreamID == 2 {
			t.Fatalf("refused chunk handed to OnCommit: %+v", c)
		}
	}
	if len(committed) != 2 {
		t.Fatalf("%d committed chunks, want 2 (stream 1 partitions 0 and 1)", len(committed))
	}
}

// TestRefusalAfterUnknownAttemptIsDefinite: an attempt whose answer was lost applied the
// commit; the retry's answer (from the dedupe record) refuses the chunk. That refusal is
// the object's only answer: the write failed, it is not unknown.
func TestRefusalAfterUnknownAttemptIsDefinite(t *testing.T) {
	m := newFakeMeta()
	m.missing = map[uint64]bool{2: true}
	m.fail = func(n int) (error, bool) {
		if n == 1 {
			return meta.ErrUnavailable, true
		}
		return nil, true
	}
	w := newTestWriter(t, objstore.NewMem(), m, nil)
	res, err := w.Write(context.Background(), []Request{{StreamID: 2, Batches: batchOf(t, 1, "x"), Records: 1}})
	if !errors.Is(err, ErrCommitFailed) || !errors.Is(err, meta.ErrStreamNotFound) || errors.Is(err, ErrCommitUnknown) || len(res) != 1 {
		t.Fatalf("res %+v err %v, want a definite ErrCommitFailed", res, err)
	}
}

// TestMalformedAnswerIsUnknown: an answer whose shape does not match the chunks sent
// (a committed chunk without an offset, statuses for some chunks only) committed
// something, but which request got what cannot be told: ErrCommitUnknown, never offsets.
func TestMalformedAnswerIsUnknown(t *testing.T) {
	for name, change := range map[string]func(*meta.CommitResult){
		"negative offset":    func(r *meta.CommitResult) { r.BaseOffsets[0] = -1 },
		"short status":       func(r *meta.CommitResult) { r.Status = []meta.ChunkStatus{meta.ChunkCommitted} },
		"missing offset":     func(r *meta.CommitResult) { r.BaseOffsets = r.BaseOffsets[:1] },
		"refusal, no offset": func(r *meta.CommitResult) { r.Status = nil; r.BaseOffsets[1] = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			m := newFakeMeta()
			m.answer = change
			w := newTestWriter(t, objstore.NewMem(), m, nil)
			res, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 1, "x"), Records: 1},
				{StreamID: 2, Batches: batchOf(t, 1, "y"), Records: 1}})
			if !errors.Is(err, ErrCommitUnknown) || res != nil {
				t.Fatalf("res %+v err %v, want ErrCommitUnknown", res, err)
			}
		})
	}
}

// TestUnavailableWrappingARefusalIsUnknown: an error that says the call did not complete
// leaves the outcome unknown even when it also wraps a refusal sentinel.
func TestUnavailableWrappingARefusalIsUnknown(t *testing.T) {
	m := newFakeMeta()
	m.fail = func(n int) (error, bool) {
		return fmt.Errorf("%w: relayed: %w", meta.ErrUnavailable, meta.ErrStaleCommit), n == 1
	}
	w := newTestWriter(t, objstore.NewMem(), m, func(c *Config) { c.Budget = 300 * time.Millisecond })
	if _, err := w.Write(context.Background(), []Request{{StreamID: 1, Batches: batchOf(t, 1, "x"), Records: 1}}); !errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("err %v, want ErrCommitUnknown", err)
	}
}
