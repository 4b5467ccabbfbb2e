package segmenter

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/arrowenc/arrowtest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/segfmt"
	"github.com/loamhq/loam/shared/walfmt"
)

// putArrowWAL writes one WAL object holding one chunk of stream's partition 0: the
// frames given, back to back, of rows records in all, and commits it.
func (f *fixture) putArrowWAL(stream uint64, rows int64, maxTS int64, frames ...[]byte) {
	f.t.Helper()
	var payload []byte
	for _, fr := range frames {
		payload = append(payload, fr...)
	}
	id := ulid.MustNew(ulid.Timestamp(time.Now()), ulid.DefaultEntropy())
	obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: "n1", ULID: id, Class: walfmt.ClassStandard},
		[]walfmt.Chunk{{StreamID: stream, Partition: 0, Encoding: walfmt.EncodingArrow, Records: rows, MaxTimestamp: maxTS, Payload: payload}})
	if err != nil {
		f.t.Fatal(err)
	}
	key := walfmt.ObjectKey(walfmt.ClassStandard, "n1", id)
	if err := f.bucket.Put(context.Background(), key, obj, objstore.IfAbsent()); err != nil {
		f.t.Fatal(err)
	}
	f.meta.Commit(stream, 0, meta.IndexEntry{Count: refs[0].Records, Kind: meta.KindWAL, Object: key, Offset: refs[0].Offset, Length: refs[0].Length, MaxTimestamp: maxTS})
}

// segmentRows decodes every group of an arrow segment, all columns, and returns the
// rows as fetch renders them, with each row's offset.
func segmentRows(t *testing.T, obj []byte) ([]string, []int64, *segfmt.Info) {
	t.Helper()
	info, err := segfmt.Decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	var offs []int64
	for g, gr := range info.Arrow.Groups {
		as, err := arrowenc.DecodeSchemaBytes(info.Arrow.Schema(gr.SchemaID))
		if err != nil {
			t.Fatal(err)
		}
		cols := make([][]arrow.Array, len(gr.Columns))
		for c, cr := range gr.Columns {
			if cols[c], err = arrowenc.DecodeColumnChunk(obj[cr.Offset:cr.Offset+cr.Length], as.Field(c).Type); err != nil {
				t.Fatalf("group %d column %d: %v", g, c, err)
			}
		}
		off := info.Batches[g].BaseOffset
		for b := range cols[0] {
			cs := make([]arrow.Array, len(cols))
			for c := range cols {
				cs[c] = cols[c][b]
			}
			rb := array.NewRecordBatch(as, cs, int64(cs[0].Len()))
			p, _ := arrowenc.Project(as, nil)
			for i := range int(rb.NumRows()) {
				rows = append(rows, string(arrowenc.AppendRowJSON(nil, rb, i, p)))
				offs = append(offs, off)
				off++
			}
			rb.Release()
		}
	}
	return rows, offs, info
}

// TestArrowSegments: an arrow stream's partition is segmented like a kafka one; the
// segment's groups hold every row, in offset order, with the values produced, and each
// group's columns are separate byte ranges. Two schema versions in one run make groups
// of each version.
func TestArrowSegments(t *testing.T) {
	ctx := context.Background()
	defer func(n int64) { arrowGroupBytes = n }(arrowGroupBytes)
	arrowGroupBytes = 256 << 10
	f := newFixture(t, 1)
	f.meta.AddStream(2, 1)
	s1, s2 := arrowtest.MustSchema(t, arrowtest.Schema10), arrowtest.MustSchema(t, arrowtest.Schema10v2)
	var want []string
	next := int64(0)
	for i := range 30 {
		sch, id, note := s1, uint32(1), false
		if i >= 20 {
			sch, id, note = s2, 2, true
		}
		// Two frames per chunk (two produce requests flushed together).
		a, ts1 := arrowtest.Frame(t, sch, id, next, 300, note)
		b, ts2 := arrowtest.Frame(t, sch, id, next+300, 200, note)
		f.putArrowWAL(2, 500, max(ts1, ts2), a, b)
		for k := range int64(500) {
			_, out := arrowtest.Record(next+k, note)
			want = append(want, out)
		}
		next += 500
	}
	f.produce(3, 1, 50, 0) // a kafka stream alongside
	s := f.segmenter(Config{TargetBytes: 1 << 30, MaxAge: time.Nanosecond})
	res, err := s.Partition(ctx, 2, 0)
	if err != nil || res.Segments != 1 {
		t.Fatalf("arrow partition: %+v %v", res, err)
	}
	es := f.meta.Entries(2, 0)
	if kinds(es) != "S" || es[0].BaseOffset != 0 || es[0].End() != next {
		t.Fatalf("index %s %+v", kinds(es), es)
	}
	obj, err := f.bucket.Get(ctx, es[0].Object)
	if err != nil {
		t.Fatal(err)
	}
	got, offs, info := segmentRows(t, obj)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] || offs[i] != int64(i) {
			t.Fatalf("row %d at offset %d: %s\nwant %s", i, offs[i], got[i], want[i])
		}
	}
	if info.Header.Encoding != segfmt.EncodingArrow || info.Header.RecordCount != next || es[0].MaxTimestamp != info.Header.MaxTimestamp {
		t.Fatalf("header %+v, entry %+v", info.Header, es[0])
	}
	var v1, v2 int
	for _, g := range info.Arrow.Groups {
		switch {
		case g.SchemaID == 1 && len(g.Columns) == 10:
			v1++
		case g.SchemaID == 2 && len(g.Columns) == 11:
			v2++
		default:
			t.Fatalf("group %+v", g)
		}
	}
	if v1 < 2 || v2 < 1 || len(info.Arrow.Schemas) != 2 {
		t.Fatalf("%d groups of version 1, %d of version 2, %d schemas", v1, v2, len(info.Arrow.Schemas))
	}
	if err := s.Sweep(ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if k := kinds(f.meta.Entries(1, 0)); k != "S" {
		t.Fatalf("kafka partition: %s", k)
	}
}

// TestArrowCorruptChunk: an arrow chunk whose payload is not arrow frames fails the
// segment with an error naming the object, and nothing is swapped.
func TestArrowCorruptChunk(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 1)
	f.meta.AddStream(2, 1)
	f.putArrowWAL(2, 2, 1, []byte("LARW frames, not really"))
	s := f.segmenter(Config{TargetBytes: 1024, MaxAge: time.Nanosecond})
	res, err := s.Partition(ctx, 2, 0)
	if err == nil || res.Segments != 0 || kinds(f.meta.Entries(2, 0)) != "w" {
		t.Fatalf("corrupt arrow chunk: %+v %v, index %s", res, err, kinds(f.meta.Entries(2, 0)))
	}
	t.Log(err)
}
