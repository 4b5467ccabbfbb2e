package writer

import (
	"bytes"
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/walfmt"
)

// sinkBucket takes PUTs without keeping or copying their bodies (it checks each decodes
// as a WAL object when check is set), so what a test measures is the writer's own work.
type sinkBucket struct {
	objstore.Bucket
	check bool
	puts  atomic.Int64
	bytes atomic.Int64
}

func (b *sinkBucket) Put(ctx context.Context, key string, body []byte, opts ...objstore.PutOption) error {
	if b.check {
		if _, err := walfmt.Decode(body); err != nil {
			return err
		}
	}
	b.puts.Add(1)
	b.bytes.Add(int64(len(body)))
	return nil
}

// bigBatch is one RecordBatch of n records of size bytes each.
func bigBatchN(t testing.TB, n, size int) []byte {
	t.Helper()
	recs := make([]recordbatch.Record, n)
	val := bytes.Repeat([]byte("v"), size)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Timestamp: 1000, Value: val}
	}
	b, err := recordbatch.Append(nil, recs, recordbatch.DefaultBuildOptions())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChunkOfRequestsNotJoined: a chunk built from several requests is encoded from the
// requests' bytes: a flush allocates no buffer the size of the chunk (the writer used to
// join a chunk's requests before encoding it, a copy the size of the chunk).
func TestChunkOfRequestsNotJoined(t *testing.T) {
	b := &sinkBucket{Bucket: objstore.NewMem(), check: true}
	w := newTestWriter(t, b, newFakeMeta(), func(c *Config) { c.FlushInterval = time.Hour })
	ctx := context.Background()
	const parts, size = 4, 256 << 10
	write := func() {
		reqs := make([]Request, parts)
		for i := range reqs {
			reqs[i] = Request{StreamID: 1, Batches: bigBatchN(t, 256, 1000), Records: 256, MaxTimestamp: 1000}
		}
		wait, err := w.Submit(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		// Measure the flush alone: the requests are built and buffered.
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w.cut(w.cur)
		if _, err := wait(ctx); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("flush of one chunk of %d requests (%d KiB): %d KiB allocated", parts, parts*size>>10, alloc>>10)
		if b.puts.Load() > 1 && alloc > size {
			t.Errorf("a flush of one %d KiB chunk from %d requests allocated %d KiB: the requests were joined, want them encoded as they are", parts*size>>10, parts, alloc>>10)
		}
	}
	write() // the first flush allocates the object buffer, later ones reuse it
	write()
	write()
}

// TestTailGetsRequestBytes: OnCommit hands the tail cache a chunk's batches as its
// requests' own bytes, one part per request, offsets patched: nothing joined or copied.
func TestTailGetsRequestBytes(t *testing.T) {
	b, m := objstore.NewMem(), newFakeMeta()
	got := make(chan []Committed, 1)
	w := newTestWriter(t, b, m, func(c *Config) {
		c.FlushInterval = time.Hour
		c.OnCommit = func(cs []Committed) { got <- cs }
	})
	reqs := []Request{
		{StreamID: 1, Batches: batchOf(t, 3, "a"), Records: 3},
		{StreamID: 1, Batches: batchOf(t, 2, "b"), Records: 2},
		{StreamID: 1, Batches: batchOf(t, 4, "c"), Records: 4},
	}
	wait, err := w.Submit(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	w.cut(w.cur)
	res, err := wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cs := <-got
	if len(cs) != 1 || len(cs[0].Batches) != len(reqs) {
		t.Fatalf("committed %+v, want one chunk in %d parts", cs, len(reqs))
	}
	for i, part := range cs[0].Batches {
		if &part[0] != &reqs[i].Batches[0] || len(part) != len(reqs[i].Batches) {
			t.Fatalf("part %d is not request %d's bytes", i, i)
		}
		bt, _, err := recordbatch.Parse(part)
		if err != nil {
			t.Fatal(err)
		}
		if bt.BaseOffset != res[i].BaseOffset {
			t.Fatalf("part %d base offset %d, request answered %d", i, bt.BaseOffset, res[i].BaseOffset)
		}
	}
}

// BenchmarkFlush: one 8 MiB WAL object of 8 chunks, each from 2 requests of 512 KiB (the
// suite's binary produce: 500 records of 1 KiB per request, 8 partitions), into a bucket
// that keeps nothing. B/op is what a flush allocates beyond the requests themselves.
func BenchmarkFlush(b *testing.B) {
	bk := &sinkBucket{Bucket: objstore.NewMem()}
	w, err := NewBuffered(Config{NodeID: "n1", Class: walfmt.ClassStandard, FlushInterval: time.Hour,
		MaxBufferBytes: 64 << 20, Bucket: bk, Meta: newFakeMeta()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close(context.Background())
	const parts, partitions = 2, 8
	batch := bigBatchN(b, 500, 1024)
	ctx := context.Background()
	reqs := make([]Request, parts*partitions)
	b.SetBytes(int64(len(batch) * len(reqs)))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := range reqs {
			// Each request brings its own bytes, as a produce body does.
			reqs[i] = Request{StreamID: 1, Partition: int32(i % partitions), Batches: bytes.Clone(batch), Records: 500, MaxTimestamp: 1000}
		}
		b.StartTimer()
		wait, err := w.Submit(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		w.cut(w.cur)
		if _, err := wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
