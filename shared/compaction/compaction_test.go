package compaction

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/segfmt"
)

// rec is a record as the tests write and read it; nil Key / Value are null.
type rec struct {
	Offset int64
	Key    *string
	Value  *string
	Ts     int64
}

func (r rec) String() string {
	s := func(p *string) string {
		if p == nil {
			return "null"
		}
		return *p
	}
	return fmt.Sprintf("%d:%s=%s@%d", r.Offset, s(r.Key), s(r.Value), r.Ts)
}

func sp(s string) *string { return &s }

// addSegment writes one segment of batches (records in each) at the partition's high
// watermark and appends its entry, as the segmenter would have.
func addSegment(t *testing.T, b objstore.Bucket, f *metafake.Meta, batches [][]rec, comp recordbatch.Compression) {
	t.Helper()
	base := f.HighWatermark(1, 0)
	w, err := segfmt.NewWriter(segfmt.Header{Encoding: segfmt.EncodingKafka, StreamID: 1, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	off := base
	for _, recs := range batches {
		var rs []recordbatch.Record
		for _, r := range recs {
			rr := recordbatch.Record{Timestamp: r.Ts}
			if r.Key != nil {
				rr.Key = []byte(*r.Key)
			}
			if r.Value != nil {
				rr.Value = []byte(*r.Value)
			}
			rs = append(rs, rr)
		}
		opts := recordbatch.DefaultBuildOptions()
		opts.BaseOffset = off
		opts.Compression = comp
		raw, err := recordbatch.Append(nil, rs, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(raw); err != nil {
			t.Fatal(err)
		}
		off += int64(len(rs))
	}
	obj, info, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	key := segfmt.ObjectKey(1, 0, base, fmt.Sprint("t", base))
	if err := b.Put(context.Background(), key, obj); err != nil {
		t.Fatal(err)
	}
	f.Commit(1, 0, meta.IndexEntry{Count: off - base, Kind: meta.KindSegment, Object: key, Offset: info.DataOffset, Length: info.DataLength, MaxTimestamp: info.Header.MaxTimestamp})
}

// read returns every record of the partition through its index.
func read(t *testing.T, b objstore.Bucket, es []meta.IndexEntry) []rec {
	t.Helper()
	var out []rec
	next := es[0].BaseOffset
	for _, e := range es {
		if e.BaseOffset != next {
			t.Fatalf("index gap at %d, want %d", e.BaseOffset, next)
		}
		next = e.End()
		data, err := b.GetRange(context.Background(), e.Object, e.Offset, e.Length)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := segfmt.ReadInfoAt(context.Background(), b, e.Object, e.Offset+e.Length); err != nil {
			t.Fatal(err)
		}
		for rest := data; len(rest) > 0; {
			batch, tail, err := recordbatch.Parse(rest)
			if err != nil {
				t.Fatal(err)
			}
			if batch.BaseOffset < e.BaseOffset || batch.LastOffset() >= e.End() {
				t.Fatalf("batch [%d,%d] outside its entry [%d,%d)", batch.BaseOffset, batch.LastOffset(), e.BaseOffset, e.End())
			}
			rs, err := batch.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				x := rec{Offset: batch.BaseOffset + int64(r.OffsetDelta), Ts: r.Timestamp}
				if r.Key != nil {
					x.Key = sp(string(r.Key))
				}
				if r.Value != nil {
					x.Value = sp(string(r.Value))
				}
				out = append(out, x)
			}
			rest = tail
		}
	}
	return out
}

// model is compaction by definition: the latest record per key, tombstones older than the
// horizon dropped, null-key records kept.
func model(all []rec, horizon int64) []rec {
	latest := map[string]int64{}
	for _, r := range all {
		if r.Key != nil {
			latest[*r.Key] = r.Offset
		}
	}
	var out []rec
	for _, r := range all {
		if r.Key == nil || (latest[*r.Key] == r.Offset && (r.Value != nil || r.Ts >= horizon)) {
			out = append(out, r)
		}
	}
	return out
}

func recsEqual(a, b []rec) bool {
	return slices.EqualFunc(a, b, func(x, y rec) bool { return x.String() == y.String() })
}

func newCompactor(t *testing.T, b objstore.Bucket, f *metafake.Meta, now *time.Time, target int64) *Compactor {
	c, err := New(Config{Bucket: b, Meta: f, TargetBytes: target, TombstoneRetention: 24 * time.Hour,
		Now: func() time.Time { return *now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCompactTombstones(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMem()
	f := metafake.New()
	f.AddStream(1, 1)
	now := time.UnixMilli(100 * 3600_000)
	old := now.Add(-48 * time.Hour).UnixMilli()
	recent := now.Add(-time.Hour).UnixMilli()
	addSegment(t, b, f, [][]rec{
		{{Key: sp("k1"), Value: sp("v1"), Ts: old}, {Key: sp("k2"), Value: sp("v1"), Ts: old}, {Key: sp("k3"), Value: sp("v1"), Ts: old}},
		{{Key: sp("k1"), Value: sp("v2"), Ts: old}, {Key: nil, Value: sp("no key"), Ts: old}},
	}, recordbatch.None)
	addSegment(t, b, f, [][]rec{
		{{Key: sp("k2"), Value: nil, Ts: old}, {Key: sp("k3"), Value: nil, Ts: recent}, {Key: sp("k5"), Value: sp("v1"), Ts: recent}},
	}, recordbatch.Zstd)
	addSegment(t, b, f, [][]rec{{{Key: sp("k1"), Value: sp("v3"), Ts: recent}}}, recordbatch.None)
	all := read(t, b, f.Entries(1, 0))
	c := newCompactor(t, b, f, &now, 1<<20)
	res, err := c.Partition(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := read(t, b, f.Entries(1, 0))
	want := []rec{
		{Offset: 4, Key: nil, Value: sp("no key"), Ts: old},
		{Offset: 6, Key: sp("k3"), Value: nil, Ts: recent},
		{Offset: 7, Key: sp("k5"), Value: sp("v1"), Ts: recent},
		{Offset: 8, Key: sp("k1"), Value: sp("v3"), Ts: recent},
	}
	if !recsEqual(got, want) || !recsEqual(got, model(all, now.Add(-24*time.Hour).UnixMilli())) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	// Segments 1 and 2 changed; segment 3 did not, and joins the new segment as it fits.
	es := f.Entries(1, 0)
	if res.Entries != 3 || res.Dropped != 5 || len(es) != 1 || es[0].BaseOffset != 0 || es[0].End() != 9 {
		t.Fatalf("%+v %+v", res, es)
	}
	// Idempotent: a second run changes nothing.
	res, err = c.Partition(ctx, 1, 0)
	if err != nil || res.Entries != 0 || !slices.Equal(es, f.Entries(1, 0)) {
		t.Fatalf("second run: %+v %v", res, err)
	}
	// A fresh compactor (no memory of the clean run) also changes nothing.
	if res, err := newCompactor(t, b, f, &now, 1<<20).Partition(ctx, 1, 0); err != nil || res.Entries != 0 {
		t.Fatalf("fresh compactor: %+v %v", res, err)
	}
	// Once k3's tombstone is past retention it goes too.
	now = now.Add(24 * time.Hour)
	if _, err := c.Partition(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	got = read(t, b, f.Entries(1, 0))
	if !recsEqual(got, model(all, now.Add(-24*time.Hour).UnixMilli())) || len(got) != 3 {
		t.Fatalf("after tombstone retention: %v", got)
	}
}

// TestCompactRandom checks many segments of random keys against the model, with small
// target segments, then a second round after more data.
func TestCompactRandom(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	b := objstore.NewMem()
	f := metafake.New()
	f.AddStream(1, 1)
	now := time.UnixMilli(1000 * 3600_000)
	gen := func(segments int) {
		for range segments {
			var batches [][]rec
			for range 1 + rng.IntN(4) {
				var recs []rec
				for range 1 + rng.IntN(8) {
					r := rec{Key: sp(fmt.Sprint("k", rng.IntN(30))), Value: sp(fmt.Sprint("v", rng.IntN(1000))), Ts: now.Add(-time.Duration(rng.IntN(72)) * time.Hour).UnixMilli()}
					switch rng.IntN(10) {
					case 0:
						r.Value = nil
					case 1:
						r.Key = nil
					}
					recs = append(recs, r)
				}
				batches = append(batches, recs)
			}
			addSegment(t, b, f, batches, recordbatch.Compression(rng.IntN(2)*4))
		}
	}
	gen(25)
	all := read(t, b, f.Entries(1, 0))
	c := newCompactor(t, b, f, &now, 600)
	if _, err := c.Partition(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	horizon := now.Add(-24 * time.Hour).UnixMilli()
	if got, want := read(t, b, f.Entries(1, 0)), model(all, horizon); !recsEqual(got, want) {
		t.Fatalf("round 1: got %d records, want %d", len(got), len(want))
	}
	gen(10)
	all = model(read(t, b, f.Entries(1, 0)), horizon)
	if _, err := c.Partition(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	if got, want := read(t, b, f.Entries(1, 0)), model(all, horizon); !recsEqual(got, want) {
		t.Fatalf("round 2: got %d records, want %d", len(got), len(want))
	}
	if len(f.Entries(1, 0)) < 2 {
		t.Fatalf("a 600-byte target should cut several segments: %d", len(f.Entries(1, 0)))
	}
}

// TestCompactAllGone: every record of the run goes; the last batch stays so a segment
// exists, and the partition's offsets are unchanged.
func TestCompactAllGone(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMem()
	f := metafake.New()
	f.AddStream(1, 1)
	now := time.UnixMilli(100 * 3600_000)
	old := now.Add(-48 * time.Hour).UnixMilli()
	addSegment(t, b, f, [][]rec{{{Key: sp("a"), Value: sp("1"), Ts: old}}, {{Key: sp("a"), Value: nil, Ts: old}}}, recordbatch.None)
	c := newCompactor(t, b, f, &now, 1<<20)
	if _, err := c.Partition(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	got := read(t, b, f.Entries(1, 0))
	if len(got) != 1 || got[0].Offset != 1 || got[0].Value != nil {
		t.Fatalf("%v", got)
	}
	if es := f.Entries(1, 0); len(es) != 1 || es[0].BaseOffset != 0 || es[0].End() != 2 {
		t.Fatalf("%+v", es)
	}
}

// TestCompactSkipsWALAndRefusedSwap: WAL entries are not touched, and a refused swap leaves
// no object behind.
func TestCompactRefused(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMem()
	f := metafake.New()
	f.AddStream(1, 1)
	now := time.UnixMilli(100 * 3600_000)
	addSegment(t, b, f, [][]rec{{{Key: sp("a"), Value: sp("1")}, {Key: sp("a"), Value: sp("2")}}}, recordbatch.None)
	f.Commit(1, 0, meta.IndexEntry{Count: 1, Kind: meta.KindWAL, Object: "wal/x.wal", Length: 100})
	before := f.Entries(1, 0)
	f.BeforeSwap = func(s meta.IndexSwap) {
		for _, e := range s.Old {
			if e.Kind != meta.KindSegment {
				t.Errorf("swap touches a WAL entry: %+v", e)
			}
		}
		f.DropLeases() // the lease is gone: expired and taken over
	}
	c := newCompactor(t, b, f, &now, 1<<20)
	res, err := c.Partition(ctx, 1, 0)
	if err != nil || !res.Refused {
		t.Fatalf("%+v %v", res, err)
	}
	if !slices.Equal(before, f.Entries(1, 0)) {
		t.Fatal("index changed")
	}
	n := 0
	b.List(ctx, "seg/", func(objstore.ObjectInfo) error { n++; return nil })
	if n != 1 {
		t.Fatalf("%d segment objects, want only the original", n)
	}
	if _, err := New(Config{}); !errors.Is(err, ErrConfig) {
		t.Fatal(err)
	}
}
