package segfmt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// arrowGoldenCase is one golden arrow segment. Column chunks and schemas are opaque to
// this package (shared/arrowenc gives them meaning), so the cases use fixed bytes.
type arrowGoldenCase struct {
	file    string
	header  Header
	schemas []ArrowSchema
	groups  []ArrowGroup
}

func chunk(fill byte, n int) []byte { return bytes.Repeat([]byte{fill}, n) }

func arrowGoldenCases() []arrowGoldenCase {
	return []arrowGoldenCase{
		{
			file:    "arrow-one-group.seg",
			header:  Header{Encoding: EncodingArrow, StreamID: 9, Partition: 1, CreatedMs: 1764600000000},
			schemas: []ArrowSchema{{ID: 1, IPC: []byte("schema v1")}},
			groups: []ArrowGroup{{BaseOffset: 0, Rows: 3, MinTimestamp: 1764600000000, MaxTimestamp: 1764600000002, SchemaID: 1,
				Columns: [][]byte{chunk(1, 16), chunk(2, 8), chunk(3, 24)}}},
		},
		{
			// Two schema versions (a column added), a gap between groups and a range
			// wider than the groups.
			file:    "arrow-two-schemas.seg",
			header:  Header{Encoding: EncodingArrow, StreamID: 1 << 40, Partition: 0, BaseOffset: 100, EndOffset: 200, CreatedMs: 1764600001000},
			schemas: []ArrowSchema{{ID: 1, IPC: []byte("schema v1")}, {ID: 2, IPC: []byte("schema v2, one column more")}},
			groups: []ArrowGroup{
				{BaseOffset: 100, Rows: 10, MinTimestamp: 5, MaxTimestamp: 50, SchemaID: 1, Columns: [][]byte{chunk(4, 32), chunk(5, 8)}},
				{BaseOffset: 110, Rows: 5, MinTimestamp: 40, MaxTimestamp: 60, SchemaID: 1, Columns: [][]byte{chunk(6, 16), chunk(7, 8)}},
				{BaseOffset: 120, Rows: 7, MinTimestamp: 61, MaxTimestamp: 70, SchemaID: 2, Columns: [][]byte{chunk(8, 8), chunk(9, 8), chunk(10, 40)}},
			},
		},
	}
}

func (g arrowGoldenCase) encode(t testing.TB) ([]byte, Info) {
	t.Helper()
	w, err := NewWriter(g.header)
	if err != nil {
		t.Fatalf("%s: NewWriter: %v", g.file, err)
	}
	for _, s := range g.schemas {
		if err := w.AddSchema(s.ID, s.IPC); err != nil {
			t.Fatal(err)
		}
	}
	for i, gr := range g.groups {
		if err := w.AddGroup(gr); err != nil {
			t.Fatalf("%s: AddGroup %d: %v", g.file, i, err)
		}
	}
	obj, info, err := w.Finish()
	if err != nil {
		t.Fatalf("%s: Finish: %v", g.file, err)
	}
	return obj, info
}

// readdArrow writes an accepted arrow segment's schemas and groups into w again (its
// groups' min timestamps are not kept: the header's min goes to every group).
func readdArrow(t *testing.T, w *Writer, obj []byte, info *Info) {
	t.Helper()
	for _, s := range info.Arrow.Schemas {
		if err := w.AddSchema(s.ID, s.IPC); err != nil {
			t.Fatalf("AddSchema of an accepted object: %v", err)
		}
	}
	for k, g := range info.Arrow.Groups {
		ref := info.Batches[k]
		gr := ArrowGroup{BaseOffset: ref.BaseOffset, Rows: ref.Count, MinTimestamp: info.Header.MinTimestamp, MaxTimestamp: ref.MaxTimestamp, SchemaID: g.SchemaID}
		for _, c := range g.Columns {
			gr.Columns = append(gr.Columns, obj[c.Offset:c.Offset+c.Length])
		}
		if err := w.AddGroup(gr); err != nil {
			t.Fatalf("AddGroup %d of an accepted object: %v", k, err)
		}
	}
}

// TestArrowGolden: the golden arrow segments decode, read the same with ReadInfo and
// ReadInfoAt, and this writer still writes them byte for byte.
func TestArrowGolden(t *testing.T) {
	for _, g := range arrowGoldenCases() {
		t.Run(g.file, func(t *testing.T) {
			obj, winfo := g.encode(t)
			golden := readGolden(t, g.file)
			if !bytes.Equal(obj, golden) {
				t.Fatalf("writer output differs from testdata/v1/%s", g.file)
			}
			info, err := Decode(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !equalInfo(info, &winfo) {
				t.Fatalf("decoded %+v, wrote %+v", info, winfo)
			}
			checkReaders(t, golden, info)
			if info.Header.RecordCount != info.Header.OffsetCount || len(info.Arrow.Groups) != len(g.groups) {
				t.Fatalf("header %+v", info.Header)
			}
			for k, gr := range g.groups {
				ag := info.Arrow.Groups[k]
				if ag.SchemaID != gr.SchemaID || len(ag.Columns) != len(gr.Columns) {
					t.Fatalf("group %d: %+v", k, ag)
				}
				for c, want := range gr.Columns {
					off, n := info.ColumnSpan(k, c, c+1)
					if got := golden[off : off+n]; !bytes.Equal(got, want) {
						t.Fatalf("group %d column %d: %x, want %x", k, c, got, want)
					}
					if err := info.CheckColumns(k, c, c+1, golden[off:off+n]); err != nil {
						t.Fatal(err)
					}
				}
				off, n := info.ColumnSpan(k, 0, len(gr.Columns))
				if err := info.CheckColumns(k, 0, len(gr.Columns), golden[off:off+n]); err != nil {
					t.Fatal(err)
				}
				if s := info.Arrow.Schema(gr.SchemaID); !strings.HasPrefix(string(s), "schema v") {
					t.Fatalf("schema %d: %q", gr.SchemaID, s)
				}
			}
			off, n := info.Span(0, len(info.Batches))
			if err := info.CheckBatches(0, len(info.Batches), golden[off:off+n]); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadBatches(t.Context(), memReader{"k": golden}, "k", info, 0, 1<<20); !errors.Is(err, ErrInvalid) {
				t.Fatalf("ReadBatches of an arrow segment: %v", err)
			}
		})
	}
}

func TestWriteArrowGolden(t *testing.T) {
	if !*updateGolden {
		t.Skip("run with -update-golden to write missing golden files")
	}
	for _, g := range arrowGoldenCases() {
		obj, _ := g.encode(t)
		writeOnce(t, filepath.Join("testdata", "v1", g.file), obj)
		name := strings.TrimSuffix(g.file, ".seg")
		writeOnce(t, filepath.Join("testdata", "fuzz", "FuzzDecode", name), fuzzSeed(obj))
		writeOnce(t, filepath.Join("testdata", "fuzz", "FuzzReadInfo", name), fuzzSeed(obj))
	}
}

// TestArrowCorrupt: a damaged column-ranges section or column chunk is refused with an
// error naming what is wrong.
func TestArrowCorrupt(t *testing.T) {
	g := arrowGoldenCases()[1]
	base, info := g.encode(t)
	be := binary.BigEndian
	sec := int(info.IndexOffset()) + HeaderSize + SectionHeaderSize + indexEntryCountField + len(info.Batches)*IndexEntrySize
	body := sec + SectionHeaderSize
	// Offsets in the body: version 0, schema count 4, schema 1 at 8 (id, len, 9 bytes),
	// schema 2 at 25 (id, len, 26 bytes), group count at 59, group 0 at 63.
	g0 := body + 63
	for _, c := range []struct {
		name string
		mut  func(o []byte)
		want error
		msg  string
	}{
		{"section version", func(o []byte) { o[body] = 2 }, ErrUnsupportedVersion, "version 2"},
		{"section reserved", func(o []byte) { o[body+1] = 1 }, ErrCorrupt, "reserved"},
		{"section required", func(o []byte) { be.PutUint16(o[sec+2:], 0) }, ErrCorrupt, "flags"},
		{"schema count", func(o []byte) { be.PutUint32(o[body+4:], 0) }, ErrCorrupt, "0 schemas"},
		{"schema ids", func(o []byte) { be.PutUint32(o[body+25:], 1) }, ErrCorrupt, "strictly increase"},
		{"group count", func(o []byte) { be.PutUint32(o[body+59:], 2) }, ErrCorrupt, "2 groups"},
		{"group schema", func(o []byte) { be.PutUint32(o[g0:], 7) }, ErrCorrupt, "schema 7"},
		{"column length", func(o []byte) { be.PutUint32(o[g0+8:], 24) }, ErrCorrupt, "columns end"},
		{"column overrun", func(o []byte) { be.PutUint32(o[g0+8:], 1000) }, ErrCorrupt, "overruns"},
		{"column crc", func(o []byte) { be.PutUint32(o[g0+12:], 1) }, ErrBadCRC, "column 0"},
		{"group data", func(o []byte) { o[HeaderSize+3] ^= 1 }, ErrBadCRC, "group 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := slices.Clone(base)
			c.mut(o)
			if c.name == "group data" {
				// Reseal the group CRC so the column CRC is what catches it.
				be.PutUint32(o[int(info.IndexOffset())+HeaderSize+SectionHeaderSize+indexEntryCountField+32:], crc32c(o[HeaderSize:HeaderSize+info.Batches[0].Length]))
			}
			be.PutUint32(o[len(o)-TrailerSize+offTrailerCRC:], crc32c(o[info.IndexOffset():len(o)-TrailerSize+offTrailerCRC]))
			_, err := Decode(o)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Decode: %v, want %v naming %q", err, c.want, c.msg)
			}
		})
	}
	// A kafka reader's view is unchanged: column ranges in a kafka segment are skipped.
	if _, err := NewWriter(Header{Encoding: EncodingKafka}); err != nil {
		t.Fatal(err)
	}
}

func TestArrowWriterRejects(t *testing.T) {
	w, err := NewWriter(Header{Encoding: EncodingArrow})
	if err != nil {
		t.Fatal(err)
	}
	ok := ArrowGroup{BaseOffset: 10, Rows: 2, SchemaID: 1, Columns: [][]byte{chunk(1, 8)}}
	if err := w.AddGroup(ok); !errors.Is(err, ErrInvalid) {
		t.Fatalf("group before its schema: %v", err)
	}
	if err := w.AddSchema(1, []byte("s")); err != nil {
		t.Fatal(err)
	}
	if err := w.AddSchema(1, []byte("other")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("schema redefined: %v", err)
	}
	if err := w.AddGroup(ok); err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]ArrowGroup{
		"overlap":    {BaseOffset: 11, Rows: 1, SchemaID: 1, Columns: ok.Columns},
		"no rows":    {BaseOffset: 20, SchemaID: 1, Columns: ok.Columns},
		"no columns": {BaseOffset: 20, Rows: 1, SchemaID: 1},
		"tiny":       {BaseOffset: 20, Rows: 1, SchemaID: 1, Columns: [][]byte{{1}}},
		"timestamps": {BaseOffset: 20, Rows: 1, SchemaID: 1, Columns: ok.Columns, MinTimestamp: 5, MaxTimestamp: 4},
	} {
		if err := w.AddGroup(g); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := w.Add(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Add on an arrow writer: %v", err)
	}
	kw, _ := NewWriter(Header{Encoding: EncodingKafka})
	if err := kw.AddSchema(1, []byte("s")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AddSchema on a kafka writer: %v", err)
	}
}
