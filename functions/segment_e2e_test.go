package functions_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/loamhq/loam/shared/gc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/notify"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/segmenter"
	"github.com/loamhq/loam/shared/streamapi"
)

// walEvent is the S3 event for the WAL objects in keys, as S3 sends it.
func walEvent(t testing.TB, b objstore.Bucket, keys ...string) []byte {
	t.Helper()
	var objs []notify.Object
	for _, k := range keys {
		st, err := b.Stat(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, notify.Object{Bucket: "loam", Key: k, Size: st.Size, ETag: "etag-" + k, Sequencer: "0A"})
	}
	raw, err := json.Marshal(notify.NewS3Event("us-east-1", objs...))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestSegmentRetireDelete: produce until segments are written (small target), driven by
// the S3 and SQS event JSON; WAL objects are retired, then deleted after grace; fetch from
// offset 0 returns the same records, offsets and bytes before and after, through a log node
// whose caches are cold.
func TestSegmentRetireDelete(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, objstore.NewMem(), 2*time.Millisecond)
	st := c.createStream(streamapi.CreateStreamRequest{Name: "orders", Partitions: ptr(int32(2))})
	seg, err := segmenter.New(segmenter.Config{Bucket: c.bucket, Meta: c.meta, Coord: c.coord, TargetBytes: 32 << 10, MaxAge: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	h := seg.Handler()
	seen := map[string]bool{}
	for round := range 30 {
		c.produce("orders", int32(round%2), "r"+string(rune('a'+round%26)), 2, 10, 200)
		var fresh []string
		for _, k := range listKeys(t, c.bucket, "wal/") {
			if !seen[k] {
				seen[k] = true
				fresh = append(fresh, k)
			}
		}
		raw := walEvent(t, c.bucket, fresh...)
		if round%2 == 1 { // through SQS, as the deployed function gets it
			raw, _ = json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: string(raw), EventSource: "aws:sqs"}}})
		}
		out, err := h.Invoke(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := out.(events.SQSEventResponse); ok && len(r.BatchItemFailures) > 0 {
			t.Fatalf("round %d: %+v", round, r)
		}
	}
	var before [2][]streamapi.Record
	var beforeRaw [2][][]byte
	for p := range int32(2) {
		es, _ := c.entries(st, p)
		wal, segs := kinds(es)
		if segs == 0 || wal == 0 {
			t.Fatalf("partition %d after notifications: %d WAL entries, %d segments; want both", p, wal, segs)
		}
		before[p] = fetchAll(t, c.api, "orders", p, 0)
		if len(before[p]) != 15*20 {
			t.Fatalf("partition %d: %d records", p, len(before[p]))
		}
	}
	// The sweep segments the rest once it is older than MaxAge.
	seg2, _ := segmenter.New(segmenter.Config{Bucket: c.bucket, Meta: c.meta, Coord: c.coord, TargetBytes: 32 << 10, MaxAge: time.Millisecond, Logger: quiet()})
	if _, err := h.Invoke(ctx, json.RawMessage(`{}`)); err != nil { // not old yet: nothing
		t.Fatal(err)
	}
	if err := seg2.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		es, _ := c.entries(st, p)
		if wal, _ := kinds(es); wal != 0 {
			t.Fatalf("partition %d: %d WAL entries left after the sweep", p, wal)
		}
		beforeRaw[p] = rawBatches(t, c.bucket, es)
	}
	c.checkNoOrphanSegments()
	// Every WAL object is now retired: GC deletes them only after grace.
	retired, err := c.meta.ListRetired(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	walKeys := listKeys(t, c.bucket, "wal/")
	if len(retired) != len(walKeys) || len(walKeys) == 0 {
		t.Fatalf("%d retired, %d WAL objects", len(retired), len(walKeys))
	}
	now := time.Now()
	g, err := gc.New(gc.Config{Bucket: c.bucket, Meta: c.meta, Coord: c.coord, Grace: time.Minute, Now: func() time.Time { return now }, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := g.Run(ctx); err != nil || st.Deleted != 0 || len(listKeys(t, c.bucket, "wal/")) != len(walKeys) {
		t.Fatalf("within grace: %+v %v", st, err)
	}
	now = now.Add(2 * time.Minute)
	if st, err := g.Run(ctx); err != nil || st.Deleted != len(walKeys) || st.Orphans != 0 {
		t.Fatalf("after grace: %+v %v", st, err)
	}
	if left := listKeys(t, c.bucket, "wal/"); len(left) != 0 {
		t.Fatalf("WAL objects left: %v", left)
	}
	if r, _ := c.meta.ListRetired(ctx, "", 0); len(r) != 0 {
		t.Fatalf("retired set not forgotten: %v", r)
	}
	// A log node with cold caches reads everything from segments; the first one too.
	_, cold := c.startNode("n2", time.Millisecond)
	for p := range int32(2) {
		sameRecords(t, "cold node", fetchAll(t, cold, "orders", p, 0), before[p])
		sameRecords(t, "first node", fetchAll(t, c.api, "orders", p, 0), before[p])
		sameRecords(t, "cold node from 123", fetchAll(t, cold, "orders", p, 123), before[p][123:])
		es, _ := c.entries(st, p)
		if got := rawBatches(t, c.bucket, es); !slices.EqualFunc(got, beforeRaw[p], func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("partition %d: batch bytes changed", p)
		}
	}
	// Produce goes on at the right offsets after segmenting.
	resp, err := c.api.Produce(ctx, meta.DefaultNS, "orders", []streamapi.Record{{Value: json.RawMessage(`1`), Partition: ptr(int32(0))}})
	if err != nil || resp.Offsets[0].Offset != 300 {
		t.Fatalf("%+v %v", resp, err)
	}
}

// slowSwap holds a segmenter's swap until release is closed.
type slowSwap struct {
	meta.Client
	atSwap  chan struct{}
	release chan struct{}
}

func (s *slowSwap) SwapIndex(ctx context.Context, sw meta.IndexSwap) error {
	close(s.atSwap)
	<-s.release
	return s.Client.SwapIndex(ctx, sw)
}

// TestConcurrentSegmenters: two invocations on one partition at once: one swap wins, the
// other is refused, nothing is lost or duplicated, and the loser's object is gone.
func TestConcurrentSegmenters(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, objstore.NewMem(), 2*time.Millisecond)
	st := c.createStream(streamapi.CreateStreamRequest{Name: "c"})
	c.produce("c", 0, "x", 20, 10, 100)
	before := fetchAll(t, c.api, "c", 0, 0)
	esBefore, _ := c.entries(st, 0)
	rawBefore := rawBatches(t, c.bucket, esBefore)

	// Racing: both start at once; the lease lets one in, the other is Busy or refused.
	a, _ := segmenter.New(segmenter.Config{Bucket: c.bucket, Meta: c.meta, TargetBytes: 4 << 10, MaxAge: time.Millisecond, Holder: "a", Logger: quiet()})
	b, _ := segmenter.New(segmenter.Config{Bucket: c.bucket, Meta: c.meta, TargetBytes: 4 << 10, MaxAge: time.Millisecond, Holder: "b", Logger: quiet()})
	var wg sync.WaitGroup
	var ra, rb segmenter.Result
	var ea, eb error
	wg.Go(func() { ra, ea = a.Partition(ctx, st.ID, 0) })
	wg.Go(func() { rb, eb = b.Partition(ctx, st.ID, 0) })
	wg.Wait()
	if ea != nil || eb != nil || ra.Segments+rb.Segments == 0 {
		t.Fatalf("a %+v %v, b %+v %v", ra, ea, rb, eb)
	}
	es, _ := c.entries(st, 0)
	if wal, _ := kinds(es); wal != 0 {
		t.Fatalf("%d WAL entries left", wal)
	}
	sameRecords(t, "after racing segmenters", fetchAll(t, c.api, "c", 0, 0), before)
	if !slices.EqualFunc(rawBatches(t, c.bucket, es), rawBefore, func(x, y []byte) bool { return string(x) == string(y) }) {
		t.Fatal("batch bytes changed")
	}
	c.checkNoOrphanSegments()

	// A stale lease: a stalls before its swap until its lease expires, b segments, a's swap
	// is refused.
	c.produce("c", 0, "y", 10, 10, 100)
	before = fetchAll(t, c.api, "c", 0, 0)
	slow := &slowSwap{Client: c.meta, atSwap: make(chan struct{}), release: make(chan struct{})}
	a, _ = segmenter.New(segmenter.Config{Bucket: c.bucket, Meta: slow, TargetBytes: 1 << 20, MaxAge: time.Millisecond, LeaseTTL: 300 * time.Millisecond, Holder: "a", Logger: quiet()})
	b, _ = segmenter.New(segmenter.Config{Bucket: c.bucket, Meta: c.meta, TargetBytes: 1 << 20, MaxAge: time.Millisecond, LeaseTTL: 300 * time.Millisecond, Holder: "b", Logger: quiet()})
	done := make(chan struct{})
	go func() { ra, ea = a.Partition(ctx, st.ID, 0); close(done) }()
	<-slow.atSwap
	if rb, err := b.Partition(ctx, st.ID, 0); err != nil || !rb.Busy {
		t.Fatalf("b while a holds the lease: %+v %v", rb, err)
	}
	time.Sleep(400 * time.Millisecond)
	if rb, eb = b.Partition(ctx, st.ID, 0); eb != nil || rb.Segments != 1 {
		t.Fatalf("b after a's lease expired: %+v %v", rb, eb)
	}
	close(slow.release)
	<-done
	if ea != nil || !ra.Refused || ra.Segments != 0 {
		t.Fatalf("a: %+v %v", ra, ea)
	}
	sameRecords(t, "after the stale swap", fetchAll(t, c.api, "c", 0, 0), before)
	c.checkNoOrphanSegments()
}

// TestSwapRetryIsIdempotent: a swap already applied (an answer lost, then retried) is not
// an error and leaves one copy.
func TestSwapRetryIsIdempotent(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, objstore.NewMem(), 2*time.Millisecond)
	st := c.createStream(streamapi.CreateStreamRequest{Name: "r"})
	c.produce("r", 0, "x", 3, 5, 50)
	retry := &retrySwap{Client: c.meta}
	s, _ := segmenter.New(segmenter.Config{Bucket: c.bucket, Meta: retry, TargetBytes: 1 << 20, MaxAge: time.Millisecond, Logger: quiet()})
	res, err := s.Partition(ctx, st.ID, 0)
	if err != nil || res.Segments != 1 || retry.second == nil {
		t.Fatalf("%+v %v (retry answered %v)", res, err, retry.second)
	}
	if !errors.Is(*retry.second, nil) {
		t.Fatalf("a repeated swap answered %v", *retry.second)
	}
}

type retrySwap struct {
	meta.Client
	second *error
}

func (r *retrySwap) SwapIndex(ctx context.Context, sw meta.IndexSwap) error {
	if err := r.Client.SwapIndex(ctx, sw); err != nil {
		return err
	}
	err := r.Client.SwapIndex(ctx, sw)
	r.second = &err
	return err
}
