package reader

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/arrowenc/arrowtest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/retention"
	"github.com/loamhq/loam/shared/segfmt"
	"github.com/loamhq/loam/shared/segmenter"
	"github.com/loamhq/loam/shared/walfmt"
)

// arrowFixture is an arrow stream (id 2, one partition, Schema10) of chunks chunks of
// rows rows each in WAL objects of bucket, committed to a metafake.
type arrowFixture struct {
	bucket *objstore.Mem
	meta   *metafake.Meta
	rows   int64
}

func newArrowFixture(t testing.TB, chunks, rows int, evolve bool) *arrowFixture {
	t.Helper()
	f := &arrowFixture{bucket: objstore.NewMem(), meta: metafake.New()}
	f.meta.AddStream(2, 1)
	f.add(t, chunks, rows, evolve)
	return f
}

// add writes chunks more chunks of rows rows (the second half of them of Schema10v2 when
// evolve is set).
func (f *arrowFixture) add(t testing.TB, chunks, rows int, evolve bool) {
	t.Helper()
	s1, s2 := arrowtest.MustSchema(t, arrowtest.Schema10), arrowtest.MustSchema(t, arrowtest.Schema10v2)
	for i := range chunks {
		sch, id, note := s1, uint32(1), false
		if evolve && i >= chunks/2 {
			sch, id, note = s2, 2, true
		}
		payload, maxTS := arrowtest.Frame(t, sch, id, f.rows, rows, note)
		wid := ulid.MustNew(ulid.Timestamp(time.Now()), ulid.DefaultEntropy())
		obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: "n1", ULID: wid, Class: walfmt.ClassStandard},
			[]walfmt.Chunk{{StreamID: 2, Partition: 0, Encoding: walfmt.EncodingArrow, Records: int64(rows), MaxTimestamp: maxTS, Payload: payload}})
		if err != nil {
			t.Fatal(err)
		}
		key := walfmt.ObjectKey(walfmt.ClassStandard, "n1", wid)
		if err := f.bucket.Put(context.Background(), key, obj); err != nil {
			t.Fatal(err)
		}
		f.meta.Commit(2, 0, meta.IndexEntry{Count: refs[0].Records, Kind: meta.KindWAL, Object: key, Offset: refs[0].Offset, Length: refs[0].Length, MaxTimestamp: maxTS})
		f.rows += int64(rows)
	}
}

// segment moves the partition into arrow segments of about targetBytes.
func (f *arrowFixture) segment(t testing.TB, targetBytes int64) {
	t.Helper()
	if _, err := f.segmenterFor(t, targetBytes).Partition(context.Background(), 2, 0); err != nil {
		t.Fatal(err)
	}
	for _, e := range f.meta.Entries(2, 0) {
		if e.Kind != meta.KindSegment {
			t.Fatalf("entry at %d is a %v after segmenting", e.BaseOffset, e.Kind)
		}
	}
}

func (f *arrowFixture) segmenterFor(t testing.TB, targetBytes int64) *segmenter.Segmenter {
	t.Helper()
	s, err := segmenter.New(segmenter.Config{Bucket: f.bucket, Meta: f.meta, TargetBytes: targetBytes, MaxAge: time.Nanosecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAll reads the partition from offset from to the end with a cold reader over
// bucket, columns named, and returns the rows as fetch renders them (the columns named,
// by name) with their offsets.
func readAll(t testing.TB, bucket objstore.Bucket, m *metafake.Meta, from int64, columns []string, maxBytes int64) ([]string, []int64) {
	t.Helper()
	r, err := New(Config{Bucket: bucket, Meta: lookups{m: m}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Drain()
	var rows []string
	var offs []int64
	for off := from; ; {
		res, err := r.ReadArrowColumns(context.Background(), ArrowRead{StreamID: 2, Partition: 0, Offset: off, Columns: columns, MaxBytes: maxBytes})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Chunks) == 0 {
			break
		}
		for _, c := range res.Chunks {
			frames, err := arrowenc.DecodePayload(c.Payload)
			if err != nil {
				t.Fatal(err)
			}
			o := c.BaseOffset
			for _, fr := range frames {
				p, err := arrowenc.Project(fr.Schema, columns)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range fr.Batches {
					for i := range int(b.NumRows()) {
						if o >= off {
							rows = append(rows, string(arrowenc.AppendRowJSON(nil, b, i, p)))
							offs = append(offs, o)
						}
						o++
					}
				}
			}
			arrowenc.ReleaseFrames(frames)
		}
		off = res.NextOffset
	}
	return rows, offs
}

// TestReadArrowSegments: rows read from arrow segments are the rows read from the WAL
// before, from any offset, with every column and projected, across schema versions.
func TestReadArrowSegments(t *testing.T) {
	f := newArrowFixture(t, 24, 250, true)
	wal := map[string][]string{}
	for _, cols := range [][]string{nil, {"score"}, {"addr", "id"}, {"tags", "name", "ts"}} {
		rows, offs := readAll(t, f.bucket, f.meta, 0, cols, 1<<20)
		if int64(len(rows)) != f.rows || offs[len(offs)-1] != f.rows-1 {
			t.Fatalf("%v: %d rows from the WAL, want %d", cols, len(rows), f.rows)
		}
		wal[joinNames(cols)] = rows
	}
	f.segment(t, 200<<10) // several segments, several groups each
	if n := len(f.meta.Entries(2, 0)); n < 2 {
		t.Fatalf("%d segments", n)
	}
	for _, cols := range [][]string{nil, {"score"}, {"addr", "id"}, {"tags", "name", "ts"}} {
		want := wal[joinNames(cols)]
		for _, from := range []int64{0, 1, 249, 2999, f.rows - 1} {
			got, offs := readAll(t, f.bucket, f.meta, from, cols, 64<<10)
			if !slices.Equal(got, want[from:]) || offs[0] != from {
				t.Fatalf("columns %v from %d: %d rows, want %d (first offset %d)", cols, from, len(got), len(want[from:]), offs[0])
			}
		}
	}
	// The column the second schema version added: only its groups carry it.
	got, _ := readAll(t, f.bucket, f.meta, f.rows-1, []string{"note"}, 1<<20)
	if len(got) != 1 || got[0] != `{"note":"n5999"}` {
		t.Fatalf("note: %q", got)
	}
}

// lookups is the metafake as the reader uses it: Lookup only.
type lookups struct {
	meta.Client
	m *metafake.Meta
}

func (l lookups) Lookup(ctx context.Context, stream uint64, partition int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error) {
	return l.m.Lookup(ctx, stream, partition, from, max)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func joinNames(n []string) string {
	out := ""
	for _, s := range n {
		out += s + ","
	}
	return out
}

// TestArrowProjectedReadBytes: a read of 1 of 10 columns from arrow segments reads
// about a tenth of the bytes a read of every column does, with no more GETs.
func TestArrowProjectedReadBytes(t *testing.T) {
	f := newArrowFixture(t, 60, 500, false)
	f.segment(t, 1<<20) // segments of two groups or so
	full := objstore.Counting(f.bucket)
	allRows, _ := readAll(t, full, f.meta, 0, nil, 8<<20)
	one := objstore.Counting(f.bucket)
	scoreRows, _ := readAll(t, one, f.meta, 0, []string{"score"}, 8<<20)
	if int64(len(allRows)) != f.rows || len(scoreRows) != len(allRows) {
		t.Fatalf("%d and %d rows, want %d", len(allRows), len(scoreRows), f.rows)
	}
	fs, os := full.Stats(), one.Stats()
	ratio := float64(os.GetBytes) / float64(fs.GetBytes)
	t.Logf("all columns: %d bytes in %d GETs; 1 of 10: %d bytes in %d GETs (%.3f of the bytes)", fs.GetBytes, fs.GetRanges+fs.Gets, os.GetBytes, os.GetRanges+os.Gets, ratio)
	if ratio > 0.15 || ratio < 0.03 {
		t.Fatalf("a projected read read %.3f of the full read's bytes", ratio)
	}
	if os.GetRanges+os.Gets > fs.GetRanges+fs.Gets {
		t.Fatalf("projected read made %d GETs, the full read %d", os.GetRanges+os.Gets, fs.GetRanges+fs.Gets)
	}
}

// TestKafkaFetchOfArrowSegment: the Kafka-batch read path refuses an arrow segment with
// an error naming it, rather than serving its column chunks as Kafka batches.
func TestKafkaFetchOfArrowSegment(t *testing.T) {
	f := newArrowFixture(t, 4, 100, false)
	f.segment(t, 1<<20)
	r, err := New(Config{Bucket: f.bucket, Meta: lookups{m: f.meta}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Drain()
	res, err := r.Fetch(context.Background(), 2, 0, 0, 1<<20, 0)
	if err == nil || !strings.Contains(err.Error(), "arrow segment") {
		t.Fatalf("Kafka fetch of an arrow segment: %d batches, %v", len(res.Batches), err)
	}
}

// TestArrowSegmentRetention: retention trims arrow segments as it does kafka ones (by
// index entry: size and the entries' max timestamps), and the rows left read back from
// the new log start.
func TestArrowSegmentRetention(t *testing.T) {
	f := newArrowFixture(t, 24, 250, false)
	want, _ := readAll(t, f.bucket, f.meta, 0, nil, 1<<20)
	f.segment(t, 100<<10)
	es := f.meta.Entries(2, 0)
	if len(es) < 3 {
		t.Fatalf("%d segments", len(es))
	}
	ret, err := retention.New(retention.Config{Meta: f.meta, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// By size: keep at least the last two segments' bytes.
	keep := es[len(es)-1].Length + es[len(es)-2].Length
	tr, _, err := ret.Partition(context.Background(), meta.Stream{ID: 2, StreamConfig: meta.StreamConfig{RetentionMs: -1, RetentionBytes: keep}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tr.To != es[len(es)-2].BaseOffset {
		t.Fatalf("size retention: log start %d, want %d (%+v)", tr.To, es[len(es)-2].BaseOffset, tr)
	}
	got, offs := readAll(t, f.bucket, f.meta, tr.To, nil, 1<<20)
	if !slices.Equal(got, want[tr.To:]) || offs[0] != tr.To {
		t.Fatalf("after size retention: %d rows from %d, want %d", len(got), offs[0], len(want[tr.To:]))
	}
	// By time: every segment's max timestamp is older than a retention of 1 ms now.
	tr, _, err = ret.Partition(context.Background(), meta.Stream{ID: 2, StreamConfig: meta.StreamConfig{RetentionMs: 1, RetentionBytes: -1}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tr.To != f.rows {
		t.Fatalf("time retention: log start %d, want %d", tr.To, f.rows)
	}
	r, _ := New(Config{Bucket: f.bucket, Meta: lookups{m: f.meta}})
	defer r.Drain()
	if _, err := r.ReadArrowColumns(context.Background(), ArrowRead{StreamID: 2, Offset: 0, MaxBytes: 1 << 20}); !errors.Is(err, meta.ErrOffsetOutOfRange) {
		t.Fatalf("read of a trimmed offset: %v", err)
	}
}

// TestArrowCoalesce: two wanted columns of a group are read with one GET when the
// columns between them are small (ArrowCoalesceGap), with two when they are not.
func TestArrowCoalesce(t *testing.T) {
	for _, c := range []struct {
		name          string
		chunks, rows  int
		moreGETs      bool // the projected read makes more GETs than the full read
		target        int64
		wantBytesFrac float64 // at most this fraction of the full read's bytes
	}{
		{"small gaps", 4, 100, false, 1 << 20, 1},
		{"large gaps", 60, 500, true, 1 << 20, 0.3},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newArrowFixture(t, c.chunks, c.rows, false)
			f.segment(t, c.target)
			full, two := objstore.Counting(f.bucket), objstore.Counting(f.bucket)
			readAll(t, full, f.meta, 0, nil, 8<<20)
			got, _ := readAll(t, two, f.meta, 0, []string{"id", "score"}, 8<<20)
			if int64(len(got)) != f.rows || got[7] != `{"id":7,"score":7.5}` {
				t.Fatalf("%d rows, row 7 %s", len(got), got[7])
			}
			fs, ts := full.Stats(), two.Stats()
			t.Logf("full: %d bytes in %d GETs; id and score: %d bytes in %d GETs", fs.GetBytes, fs.GetRanges, ts.GetBytes, ts.GetRanges)
			if (ts.GetRanges > fs.GetRanges) != c.moreGETs || float64(ts.GetBytes) > c.wantBytesFrac*float64(fs.GetBytes) {
				t.Fatalf("id and score: %d bytes in %d GETs, full read %d in %d", ts.GetBytes, ts.GetRanges, fs.GetBytes, fs.GetRanges)
			}
		})
	}
}

// TestArrowEndOffset: a read with EndOffset returns no chunk starting at or after it, from
// the WAL and from segments, and the chunks returned cover the range asked.
func TestArrowEndOffset(t *testing.T) {
	f := newArrowFixture(t, 60, 500, false)
	check := func(where string) {
		r, err := New(Config{Bucket: f.bucket, Meta: lookups{m: f.meta}})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Drain()
		res, err := r.ReadArrowColumns(context.Background(), ArrowRead{StreamID: 2, Offset: 12000, EndOffset: 19000, Columns: []string{"id"}, MaxBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Chunks) == 0 || res.Chunks[0].BaseOffset > 12000 || res.NextOffset < 19000 {
			t.Fatalf("%s: %d chunks from %d, next %d", where, len(res.Chunks), res.Chunks[0].BaseOffset, res.NextOffset)
		}
		for _, c := range res.Chunks {
			if c.BaseOffset >= 19000 {
				t.Fatalf("%s: a chunk at %d, past the end offset 19000", where, c.BaseOffset)
			}
		}
	}
	check("wal")
	f.segment(t, 1<<20)
	arrowGroups := 0
	for _, e := range f.meta.Entries(2, 0) {
		obj, _ := f.bucket.Get(context.Background(), e.Object)
		info, err := segfmt.Decode(obj)
		if err != nil {
			t.Fatal(err)
		}
		arrowGroups += len(info.Arrow.Groups)
	}
	if arrowGroups < 3 {
		t.Fatalf("%d groups: the check needs several", arrowGroups)
	}
	check("segments")
}

// TestReadArrowFrames: ReadArrowFrames answers the rows ReadArrowColumns does, across
// segments and the WAL chunks after them, with and without a projection.
func TestReadArrowFrames(t *testing.T) {
	f := newArrowFixture(t, 12, 250, false)
	f.segment(t, 100<<10)
	f.add(t, 6, 250, true) // WAL chunks after the segments, of two schema versions
	r, err := New(Config{Bucket: f.bucket, Meta: lookups{m: f.meta}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Drain()
	for _, cols := range [][]string{nil, {"score", "id"}} {
		want, _ := readAll(t, f.bucket, f.meta, 0, cols, 256<<10)
		if int64(len(want)) != f.rows {
			t.Fatalf("%d rows, want %d", len(want), f.rows)
		}
		var got []string
		for off := int64(0); off < f.rows; {
			res, err := r.ReadArrowFrames(context.Background(), ArrowRead{StreamID: 2, Offset: off, Columns: cols, MaxBytes: 256 << 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Chunks {
				o := c.BaseOffset
				for _, fr := range c.Frames {
					p, err := arrowenc.Project(fr.Schema, cols)
					if err != nil {
						t.Fatal(err)
					}
					for _, b := range fr.Batches {
						for i := range int(b.NumRows()) {
							if o >= off {
								got = append(got, string(arrowenc.AppendRowJSON(nil, b, i, p)))
							}
							o++
						}
					}
				}
			}
			res.Release()
			off = res.NextOffset
		}
		if !slices.Equal(got, want) {
			t.Fatalf("columns %v: %d rows differ from ReadArrowColumns' %d", cols, len(got), len(want))
		}
	}
}
