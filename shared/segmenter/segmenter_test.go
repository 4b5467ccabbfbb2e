package segmenter

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/notify"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fixture: a Mem bucket, a fake sequencer with stream 1 (partitions 0..n-1), a producer.
type fixture struct {
	t      *testing.T
	bucket *objstore.Mem
	meta   *metafake.Meta
	prod   *producer
}

func newFixture(t *testing.T, partitions int32) *fixture {
	f := &fixture{t: t, bucket: objstore.NewMem(), meta: metafake.New()}
	f.meta.AddStream(1, partitions)
	f.prod = &producer{t: t, bucket: f.bucket, meta: f.meta}
	return f
}

// produce flushes n WAL objects, each with batches batches of 10 records of size bytes in
// every partition.
func (f *fixture) produce(n, batches, size int, partitions ...int32) {
	for i := range n {
		m := map[part][][]recordbatch.Record{}
		for _, p := range partitions {
			for b := range batches {
				m[part{1, p}] = append(m[part{1, p}], records(string(rune('A'+p))+"-"+strconv.Itoa(f.prod.n)+"-"+strconv.Itoa(b), 10, size, int64(1000*i)))
			}
		}
		f.prod.flush(m)
	}
}

func (f *fixture) segmenter(cfg Config) *Segmenter {
	f.t.Helper()
	cfg.Bucket = cmpOr[objstore.Bucket](cfg.Bucket, f.bucket)
	if cfg.Meta == nil {
		cfg.Meta = f.meta
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	s, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

func kinds(es []meta.IndexEntry) string {
	var b strings.Builder
	for _, e := range es {
		if e.Kind == meta.KindSegment {
			b.WriteByte('S')
		} else {
			b.WriteByte('w')
		}
	}
	return b.String()
}

// sameData checks that a partition reads back the same batch bytes and records as before.
func (f *fixture) sameData(p int32, wantBatches [][]byte, wantRecs []rec) {
	f.t.Helper()
	gotBatches, gotRecs := readPartition(f.t, f.bucket, f.meta.Entries(1, p))
	if !slices.Equal(gotRecs, wantRecs) {
		f.t.Fatalf("partition %d: %d records differ from the %d before", p, len(gotRecs), len(wantRecs))
	}
	if len(gotBatches) != len(wantBatches) {
		f.t.Fatalf("partition %d: %d batches, want %d", p, len(gotBatches), len(wantBatches))
	}
	for i := range gotBatches {
		if string(gotBatches[i]) != string(wantBatches[i]) {
			f.t.Fatalf("partition %d batch %d: bytes differ", p, i)
		}
	}
}

func TestSegmentBySize(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 2)
	f.produce(30, 2, 100, 0, 1) // per flush and partition: 2 batches of 10 × ~120 B
	var before [2][][]byte
	var beforeRecs [2][]rec
	for p := range int32(2) {
		before[p], beforeRecs[p] = readPartition(t, f.bucket, f.meta.Entries(1, p))
	}
	s := f.segmenter(Config{TargetBytes: 16 << 10, MaxAge: time.Hour})
	for p := range int32(2) {
		res, err := s.Partition(ctx, 1, p)
		if err != nil {
			t.Fatal(err)
		}
		es := f.meta.Entries(1, p)
		k := kinds(es)
		if res.Segments < 2 || !strings.HasPrefix(k, strings.Repeat("S", res.Segments)) || strings.Count(k, "S") != res.Segments {
			t.Fatalf("partition %d: %+v, index %s", p, res, k)
		}
		var tail int64
		for _, e := range es {
			if e.Kind == meta.KindSegment && e.Length < 16<<10-200 {
				t.Fatalf("segment of %d bytes below the target", e.Length)
			}
			if e.Kind == meta.KindWAL {
				tail += e.Length
			}
		}
		if tail >= 16<<10 || tail != res.Pending {
			t.Fatalf("partition %d: %d WAL bytes left (result says %d), want < target", p, tail, res.Pending)
		}
		f.sameData(p, before[p], beforeRecs[p])
		// Nothing more to do: a second call changes nothing.
		res2, err := s.Partition(ctx, 1, p)
		if err != nil || res2.Segments != 0 || kinds(f.meta.Entries(1, p)) != k {
			t.Fatalf("second call: %+v %v", res2, err)
		}
	}
}

func TestSegmentByAge(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 1)
	old := time.Now().Add(-time.Hour)
	f.prod.at = old
	f.produce(3, 1, 50, 0)
	f.prod.at = time.Time{}
	before, beforeRecs := readPartition(t, f.bucket, f.meta.Entries(1, 0))
	now := old.Add(30 * time.Minute)
	s := f.segmenter(Config{TargetBytes: 1 << 20, MaxAge: 45 * time.Minute, Now: func() time.Time { return now }})
	if res, err := s.Partition(ctx, 1, 0); err != nil || res.Segments != 0 || res.Pending == 0 {
		t.Fatalf("young data: %+v %v", res, err)
	}
	now = old.Add(46 * time.Minute)
	if err := s.Sweep(ctx); err != nil || kinds(f.meta.Entries(1, 0)) != "S" {
		t.Fatalf("sweep: %v, index %s", err, kinds(f.meta.Entries(1, 0)))
	}
	f.sameData(0, before, beforeRecs)
	// New data after the segment: a run that starts after it.
	f.produce(2, 1, 50, 0)
	if res, err := s.Partition(ctx, 1, 0); err != nil || res.Segments != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	now = time.Now().Add(time.Hour)
	if res, err := s.Partition(ctx, 1, 0); err != nil || res.Segments != 1 || kinds(f.meta.Entries(1, 0)) != "SS" {
		t.Fatalf("%+v %v %s", res, err, kinds(f.meta.Entries(1, 0)))
	}
}

func walKeys(t *testing.T, b objstore.Bucket) []string {
	var keys []string
	if err := b.List(context.Background(), "wal/", func(o objstore.ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}

func s3Event(t *testing.T, b objstore.Bucket, keys ...string) []byte {
	var objs []notify.Object
	for _, k := range keys {
		st, err := b.Stat(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, notify.Object{Bucket: "loam", Key: k, Size: st.Size, ETag: "e", Sequencer: "01"})
	}
	raw, err := json.Marshal(notify.NewS3Event("us-east-1", objs...))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestNotifications drives the segmenter with the event JSON S3 and SQS deliver, with the
// coordination store recording claims and pending bytes.
func TestNotifications(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 2)
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var lookups atomic.Int64
	counting := &countingMeta{Meta: f.meta, lookups: &lookups}
	s := f.segmenter(Config{Meta: counting, Coord: store, TargetBytes: 8 << 10, MaxAge: time.Hour})
	h := s.Handler()
	for i := range 20 {
		f.produce(1, 1, 100, 0, 1)
		keys := walKeys(t, f.bucket)
		raw := s3Event(t, f.bucket, keys[len(keys)-1])
		if i%2 == 0 {
			if _, err := h.Invoke(ctx, raw); err != nil {
				t.Fatal(err)
			}
		} else {
			sqsRaw, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: string(raw), EventSource: "aws:sqs"}}})
			out, err := h.Invoke(ctx, sqsRaw)
			if err != nil || len(out.(events.SQSEventResponse).BatchItemFailures) != 0 {
				t.Fatalf("%v %v", out, err)
			}
		}
		if i == 0 {
			if n := lookups.Load(); n != 0 {
				t.Fatalf("first notification looked up %d times below the target", n)
			}
		}
	}
	for p := range int32(2) {
		k := kinds(f.meta.Entries(1, p))
		if !strings.HasPrefix(k, "S") {
			t.Fatalf("partition %d: no segment after 20 notifications: %s", p, k)
		}
	}
	// A redelivery of every notification changes nothing (claims are done).
	snap := [2][]meta.IndexEntry{f.meta.Entries(1, 0), f.meta.Entries(1, 1)}
	swaps := f.meta.Swaps()
	for _, k := range walKeys(t, f.bucket) {
		if err := s.HandleS3(ctx, mustS3(t, s3Event(t, f.bucket, k))); err != nil {
			t.Fatal(err)
		}
	}
	if f.meta.Swaps() != swaps || !slices.Equal(snap[0], f.meta.Entries(1, 0)) || !slices.Equal(snap[1], f.meta.Entries(1, 1)) {
		t.Fatal("redelivered notifications changed the index")
	}
	// Pending counts follow the index: what is left unsegmented.
	for p := range int32(2) {
		n, err := coord.WALWork{Store: store}.Pending(ctx, coord.Partition{StreamID: 1, Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		var want int64
		for _, e := range f.meta.Entries(1, p) {
			if e.Kind == meta.KindWAL {
				want += e.Length
			}
		}
		if n != want {
			t.Fatalf("partition %d: pending %d, index has %d WAL bytes", p, n, want)
		}
	}
	// Events that are not WAL creations are ignored; a notification of a deleted object too.
	ign := notify.NewS3Event("us-east-1",
		notify.Object{Bucket: "loam", Key: "seg/1/0/x.seg"},
		notify.Object{Bucket: "loam", Key: "wal/standard/n1/gone.wal", Size: 100},
		notify.Object{Bucket: "loam", Key: "wal/standard/n1/x.wal", EventName: "ObjectRemoved:Delete"})
	if err := s.HandleS3(ctx, ign); err != nil {
		t.Fatal(err)
	}
}

func mustS3(t *testing.T, raw []byte) events.S3Event {
	ev, err := notify.ParseS3Event(raw)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

type countingMeta struct {
	*metafake.Meta
	lookups *atomic.Int64
}

func (c *countingMeta) Lookup(ctx context.Context, s uint64, p int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error) {
	c.lookups.Add(1)
	return c.Meta.Lookup(ctx, s, p, from, max)
}

// TestConcurrentSegmenters: two invocations on one partition at once. Nothing is lost or
// duplicated, every segment in the bucket is referenced, and one of them did the work.
func TestConcurrentSegmenters(t *testing.T) {
	ctx := context.Background()
	for range 5 {
		f := newFixture(t, 1)
		f.produce(20, 2, 100, 0)
		before, beforeRecs := readPartition(t, f.bucket, f.meta.Entries(1, 0))
		a := f.segmenter(Config{TargetBytes: 8 << 10, Holder: "a"})
		b := f.segmenter(Config{TargetBytes: 8 << 10, Holder: "b"})
		var wg sync.WaitGroup
		var ra, rb Result
		var ea, eb error
		wg.Go(func() { ra, ea = a.Partition(ctx, 1, 0) })
		wg.Go(func() { rb, eb = b.Partition(ctx, 1, 0) })
		wg.Wait()
		if ea != nil || eb != nil {
			t.Fatal(ea, eb)
		}
		if ra.Segments+rb.Segments == 0 {
			t.Fatalf("nobody segmented: %+v %+v", ra, rb)
		}
		f.sameData(0, before, beforeRecs)
		checkNoOrphans(t, f.bucket, f.meta.Entries(1, 0))
	}
}

func checkNoOrphans(t *testing.T, b objstore.Bucket, es []meta.IndexEntry) {
	t.Helper()
	ref := map[string]bool{}
	for _, e := range es {
		ref[e.Object] = true
	}
	b.List(context.Background(), "seg/", func(o objstore.ObjectInfo) error {
		if !ref[o.Key] {
			t.Errorf("segment %s is referenced by no index entry", o.Key)
		}
		return nil
	})
}

// TestStaleLeaseRefused: segmenter A stalls before its swap until its lease expires; B
// takes the lease and swaps; A's swap is refused and its object deleted.
func TestStaleLeaseRefused(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 1)
	f.produce(20, 2, 100, 0)
	before, beforeRecs := readPartition(t, f.bucket, f.meta.Entries(1, 0))
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f.meta.Now = clock
	aAtSwap, release := make(chan struct{}), make(chan struct{})
	f.meta.BeforeSwap = func(s meta.IndexSwap) {
		if s.Lease.Holder == "a" {
			close(aAtSwap)
			<-release
		}
	}
	a := f.segmenter(Config{TargetBytes: 1 << 20, MaxAge: time.Minute, LeaseTTL: time.Minute, Holder: "a", Now: clock})
	b := f.segmenter(Config{TargetBytes: 1 << 20, MaxAge: time.Minute, LeaseTTL: time.Minute, Holder: "b", Now: clock})
	mu.Lock()
	now = now.Add(2 * time.Minute) // the data is past MaxAge
	mu.Unlock()
	var ra Result
	var ea error
	done := make(chan struct{})
	go func() { ra, ea = a.Partition(ctx, 1, 0); close(done) }()
	<-aAtSwap
	if rb, err := b.Partition(ctx, 1, 0); err != nil || !rb.Busy {
		t.Fatalf("b while a holds the lease: %+v %v", rb, err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute) // a's lease expires
	mu.Unlock()
	rb, err := b.Partition(ctx, 1, 0)
	if err != nil || rb.Segments != 1 {
		t.Fatalf("b: %+v %v", rb, err)
	}
	close(release)
	<-done
	if ea != nil || !ra.Refused || ra.Segments != 0 {
		t.Fatalf("a: %+v %v", ra, ea)
	}
	if k := kinds(f.meta.Entries(1, 0)); k != "S" {
		t.Fatalf("index %s", k)
	}
	f.sameData(0, before, beforeRecs)
	checkNoOrphans(t, f.bucket, f.meta.Entries(1, 0))
}

// failSwap answers SwapIndex with an unknown outcome without applying it: the segmenter
// died (or lost its connection) after its PUT.
type failSwap struct{ *metafake.Meta }

func (failSwap) SwapIndex(context.Context, meta.IndexSwap) error { return meta.ErrUnavailable }

// TestCrashAfterPut: the object written before a failed swap is referenced by nothing; the
// next invocation (another holder, once the lease expired) completes the work.
func TestCrashAfterPut(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 1)
	f.produce(10, 2, 100, 0)
	before, beforeRecs := readPartition(t, f.bucket, f.meta.Entries(1, 0))
	now := time.Now().Add(time.Hour)
	clock := func() time.Time { return now }
	f.meta.Now = clock
	a := f.segmenter(Config{Meta: failSwap{f.meta}, TargetBytes: 1 << 20, MaxAge: time.Minute, LeaseTTL: time.Minute, Holder: "a", Now: clock})
	if _, err := a.Partition(ctx, 1, 0); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("want the swap's error, got %v", err)
	}
	var segs []string
	f.bucket.List(ctx, "seg/", func(o objstore.ObjectInfo) error { segs = append(segs, o.Key); return nil })
	if len(segs) != 1 || kinds(f.meta.Entries(1, 0)) != strings.Repeat("w", 10) {
		t.Fatalf("after the crash: objects %v, index %s", segs, kinds(f.meta.Entries(1, 0)))
	}
	// The dead holder's lease (never released: fake ReleaseLease works, but a crash would not
	// call it) — take it again as a to model that.
	if _, err := f.meta.AcquireLease(ctx, 1, 0, LeaseKind, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	b := f.segmenter(Config{TargetBytes: 1 << 20, MaxAge: time.Minute, LeaseTTL: time.Minute, Holder: "b", Now: clock})
	if res, err := b.Partition(ctx, 1, 0); err != nil || !res.Busy {
		t.Fatalf("b during a's lease: %+v %v", res, err)
	}
	now = now.Add(2 * time.Minute)
	if res, err := b.Partition(ctx, 1, 0); err != nil || res.Segments != 1 {
		t.Fatalf("b: %+v %v", res, err)
	}
	f.sameData(0, before, beforeRecs)
	for _, e := range f.meta.Entries(1, 0) {
		if e.Object == segs[0] {
			t.Fatal("the crashed run's object is referenced")
		}
	}
}

// TestCorruptChunk: a chunk that does not match its entry stops the segment before any PUT.
func TestCorruptChunk(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 1)
	f.produce(3, 1, 100, 0)
	es := f.meta.Entries(1, 0)
	obj, _ := f.bucket.Get(ctx, es[1].Object)
	obj[es[1].Offset+60] ^= 0xff
	f.bucket.Put(ctx, es[1].Object, obj)
	s := f.segmenter(Config{TargetBytes: 1 << 20, MaxAge: time.Nanosecond})
	if _, err := s.Partition(ctx, 1, 0); err == nil {
		t.Fatal("corrupt chunk segmented")
	}
	var n int
	f.bucket.List(ctx, "seg/", func(objstore.ObjectInfo) error { n++; return nil })
	if n != 0 || kinds(f.meta.Entries(1, 0)) != "www" {
		t.Fatalf("%d segments, index %s", n, kinds(f.meta.Entries(1, 0)))
	}
}

func TestConfig(t *testing.T) {
	for _, c := range []Config{{}, {Bucket: objstore.NewMem()}, {Bucket: objstore.NewMem(), Meta: metafake.New(), TargetBytes: 10},
		{Bucket: objstore.NewMem(), Meta: metafake.New(), MaxAge: -1}} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// TestKeyPrefix: with a bucket prefix, notification keys carry it and are handled without
// it; keys outside the prefix are ignored.
func TestKeyPrefix(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 1)
	f.produce(3, 1, 100, 0)
	key := walKeys(t, f.bucket)[0]
	st, _ := f.bucket.Stat(ctx, key)
	s := f.segmenter(Config{KeyPrefix: "tenant/a", TargetBytes: 1 << 20, MaxAge: time.Nanosecond})
	other := notify.NewS3Event("us-east-1", notify.Object{Bucket: "b", Key: key, Size: st.Size})
	if err := s.HandleS3(ctx, other); err != nil || kinds(f.meta.Entries(1, 0)) != "www" {
		t.Fatalf("a key outside the prefix was handled: %v %s", err, kinds(f.meta.Entries(1, 0)))
	}
	ev := notify.NewS3Event("us-east-1", notify.Object{Bucket: "b", Key: "tenant/a/" + key, Size: st.Size})
	if err := s.HandleS3(ctx, ev); err != nil || kinds(f.meta.Entries(1, 0)) != "S" {
		t.Fatalf("%v %s", err, kinds(f.meta.Entries(1, 0)))
	}
}
