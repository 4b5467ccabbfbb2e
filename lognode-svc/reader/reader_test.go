package reader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/segfmt"
	"github.com/loamhq/loam/shared/walfmt"
)

// fakeIndex is one partition's offset index; only Lookup of meta.Client is used.
type fakeIndex struct {
	meta.Client
	entries  []meta.IndexEntry
	logStart int64
	lookups  int
}

func (f *fakeIndex) hwm() int64 {
	if len(f.entries) == 0 {
		return f.logStart
	}
	return f.entries[len(f.entries)-1].End()
}

func (f *fakeIndex) Lookup(ctx context.Context, stream uint64, partition int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error) {
	f.lookups++
	st := meta.PartitionState{StreamID: stream, Partition: partition, LogStart: f.logStart, HighWatermark: f.hwm()}
	if max <= 0 {
		return nil, st, nil
	}
	if from < f.logStart || from > st.HighWatermark {
		return nil, st, meta.ErrOffsetOutOfRange
	}
	for i, e := range f.entries {
		if e.End() > from {
			return f.entries[i:min(len(f.entries), i+max)], st, nil
		}
	}
	return nil, st, nil
}

// batches builds n batches of per records each, offsets from base, values "v<offset>".
func batches(t testing.TB, base int64, n, per int) [][]byte {
	var out [][]byte
	for b := range n {
		recs := make([]recordbatch.Record, per)
		for i := range recs {
			recs[i] = recordbatch.Record{OffsetDelta: int32(i), Timestamp: 1000, Value: fmt.Appendf(nil, "v%d-%0500d", base+int64(b*per+i), 0)}
		}
		opt := recordbatch.DefaultBuildOptions()
		opt.BaseOffset = base + int64(b*per)
		raw, err := recordbatch.Append(nil, recs, opt)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	return out
}

func values(t *testing.T, res Result, from int64) []string {
	t.Helper()
	var out []string
	for _, b := range res.Batches {
		bt, _, err := recordbatch.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := bt.Records()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if off := bt.BaseOffset + int64(r.OffsetDelta); off >= from {
				v, _, _ := strings.Cut(string(r.Value), "-")
				if v != fmt.Sprintf("v%d", off) {
					t.Fatalf("offset %d holds %s", off, v)
				}
				out = append(out, v)
			}
		}
	}
	return out
}

// TestReadWALAndSegments: a partition whose first 4000 offsets are one segment (several
// 1 MiB blocks) and whose next 100 are a WAL chunk; every fetch position returns the
// right records, segment reads go by blocks, and a second reader finds the blocks on disk.
func TestReadWALAndSegments(t *testing.T) {
	ctx := context.Background()
	bucket := objstore.Counting(objstore.NewMem())
	w, err := segfmt.NewWriter(segfmt.Header{Encoding: segfmt.EncodingKafka, StreamID: 1, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches(t, 0, 400, 10) { // ~2 MiB of data: three blocks
		if err := w.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	seg, info, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	segKey := segfmt.ObjectKey(1, 0, 0, "a")
	if err := bucket.Put(ctx, segKey, seg); err != nil {
		t.Fatal(err)
	}
	walBatches := batches(t, 4000, 10, 10) // the reader patches baseOffsets of WAL batches whatever they hold
	var payload []byte
	for _, b := range walBatches {
		payload = append(payload, b...)
	}
	obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: "n", ULID: ulid.Make(), Class: walfmt.ClassStandard}, []walfmt.Chunk{{StreamID: 1, Partition: 0, Encoding: walfmt.EncodingKafka, Records: 100, Payload: payload}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.Put(ctx, "wal/standard/n/x.wal", obj); err != nil {
		t.Fatal(err)
	}
	idx := &fakeIndex{entries: []meta.IndexEntry{
		{BaseOffset: 0, Count: 4000, Kind: meta.KindSegment, Object: segKey, Offset: info.DataOffset, Length: info.DataLength},
		{BaseOffset: 4000, Count: 100, Kind: meta.KindWAL, Object: "wal/standard/n/x.wal", Offset: refs[0].Offset, Length: refs[0].Length},
	}}
	dir := t.TempDir()
	r, err := New(Config{Bucket: bucket, Meta: idx, DiskCacheDir: dir, DiskCacheBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{0, 5, 1999, 2000, 3995, 3999, 4000, 4050, 4099} {
		res, err := r.Fetch(ctx, 1, 0, from, 256<<10, 0)
		if err != nil {
			t.Fatalf("fetch %d: %v", from, err)
		}
		vs := values(t, res, from)
		if len(vs) == 0 || vs[0] != fmt.Sprintf("v%d", from) {
			t.Fatalf("fetch %d: first value %v", from, vs[:min(len(vs), 1)])
		}
		if res.HighWatermark != 4100 {
			t.Fatalf("hwm %d", res.HighWatermark)
		}
	}
	// Read everything in order: offsets dense, patched.
	var next int64
	for next < 4100 {
		res, err := r.Fetch(ctx, 1, 0, next, 512<<10, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range res.Batches {
			bt, _, _ := recordbatch.Parse(b)
			if bt.BaseOffset > next || bt.BaseOffset+bt.OffsetCount() <= next {
				t.Fatalf("batch [%d,%d) does not continue at %d", bt.BaseOffset, bt.BaseOffset+bt.OffsetCount(), next)
			}
			next = bt.BaseOffset + bt.OffsetCount()
		}
		if res.NextOffset != next {
			t.Fatalf("next %d, batches end at %d", res.NextOffset, next)
		}
	}
	st := bucket.Stats()
	if st.GetRanges > 3+1+1+3 { // blocks + footer + chunk, some slack for the first probes
		t.Fatalf("%d range GETs: segment reads are not by block", st.GetRanges)
	}
	// A new reader (a restarted node) serves segment blocks from disk.
	r2, err := New(Config{Bucket: bucket, Meta: idx, DiskCacheDir: dir, DiskCacheBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	before := bucket.Stats()
	if _, err := r2.Fetch(ctx, 1, 0, 100, 64<<10, 0); err != nil {
		t.Fatal(err)
	}
	if got := bucket.Stats().Sub(before).GetRanges; got != 1 { // the footer only
		t.Fatalf("restarted reader made %d range GETs, want 1 (footer; block from disk)", got)
	}
	// Out of range.
	var oor *ErrOutOfRange
	if _, err := r.Fetch(ctx, 1, 0, 4101, 1, 0); !errors.As(err, &oor) || oor.HighWatermark != 4100 {
		t.Fatalf("fetch past hwm: %v", err)
	}
	// Long-poll at the high watermark ends empty after the wait.
	t0 := time.Now()
	res, err := r.Fetch(ctx, 1, 0, 4100, 1, 50*time.Millisecond)
	if err != nil || len(res.Batches) != 0 || time.Since(t0) < 40*time.Millisecond {
		t.Fatalf("long-poll: %+v %v", res, err)
	}
}

func TestDiskCacheEvicts(t *testing.T) {
	dir := t.TempDir()
	c, err := openDiskCache(dir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		c.put(fmt.Sprint(i), make([]byte, 300))
	}
	if c.size() > 1000 {
		t.Fatalf("size %d over the limit", c.size())
	}
	if _, ok := c.get("0"); ok {
		t.Fatal("oldest entry not evicted")
	}
	if b, ok := c.get("4"); !ok || len(b) != 300 {
		t.Fatal("newest entry missing")
	}
	c2, err := openDiskCache(dir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c2.get("4"); !ok || c2.size() != c.size() {
		t.Fatalf("reopened cache lost entries: %d vs %d", c2.size(), c.size())
	}
}

// TestReplacedDropsTail: after a swap (compaction may drop records) the writing node no
// longer serves the partition from its tail cache.
func TestReplacedDropsTail(t *testing.T) {
	idx := &fakeIndex{}
	r, err := New(Config{Bucket: objstore.NewMem(), Meta: idx})
	if err != nil {
		t.Fatal(err)
	}
	b := batches(t, 0, 1, 5)[0]
	r.Committed(1, 0, meta.IndexEntry{BaseOffset: 0, Count: 5, Kind: meta.KindWAL, Object: "x"}, b)
	if r.tail.find(pkey{1, 0}, 2) == nil {
		t.Fatal("committed batch not in the tail cache")
	}
	r.Apply(meta.Event{Partitions: []meta.PartitionUpdate{{StreamID: 1, Partition: 0, HighWatermark: 5, Replaced: true}}})
	if r.tail.find(pkey{1, 0}, 2) != nil {
		t.Fatal("tail cache still serves a replaced range")
	}
}

// TestDrainEndsLongPolls: Drain answers an open long-poll at once with what it has, and a
// later long-poll does not wait either.
func TestDrainEndsLongPolls(t *testing.T) {
	idx := &fakeIndex{}
	r, err := New(Config{Bucket: objstore.NewMem(), Meta: idx})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type answer struct {
		res Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := r.Fetch(ctx, 1, 0, 0, 1<<20, time.Minute)
		done <- answer{res, err}
	}()
	time.Sleep(50 * time.Millisecond) // the poll is waiting
	t0 := time.Now()
	r.Drain()
	select {
	case a := <-done:
		if a.err != nil || len(a.res.Batches) != 0 || a.res.NextOffset != 0 {
			t.Fatalf("drained poll: %+v %v", a.res, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not end the open long-poll")
	}
	if _, err := r.Fetch(ctx, 1, 0, 0, 1<<20, time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("a long-poll after Drain waited %v", d)
	}
	r.Drain() // twice is harmless
}
