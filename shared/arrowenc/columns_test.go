package arrowenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

var updateColumns = flag.Bool("update-column-golden", false, "write testdata/v1/columns-*.bin if missing (never overwrites)")

// columnBatches builds record batches of fullSchema from fullRecords, one batch per
// slice of records.
func columnBatches(t testing.TB, groups ...[]string) (*Schema, []arrow.RecordBatch) {
	t.Helper()
	s := mustParse(t, fullSchema)
	var out []arrow.RecordBatch
	for _, recs := range groups {
		p, _ := buildPayload(t, s, recs, nil)
		fs, err := DecodePayload(p) // as the segmenter gets them: read back from IPC
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			for _, b := range f.Batches {
				b.Retain()
				out = append(out, b)
			}
		}
		ReleaseFrames(fs)
	}
	return s, out
}

func rowsJSON(b arrow.RecordBatch) []string {
	p, _ := Project(b.Schema(), nil)
	var out []string
	for i := range int(b.NumRows()) {
		out = append(out, string(AppendRowJSON(nil, b, i, p)))
	}
	return out
}

// TestColumnChunkRoundTrip: every column of batches of every type of the model goes
// through a column chunk and back to the same values, buffers 8-aligned.
func TestColumnChunkRoundTrip(t *testing.T) {
	s, bs := columnBatches(t, fullRecords, fullRecords[:1], fullRecords[1:])
	defer func() {
		for _, b := range bs {
			b.Release()
		}
	}()
	as := s.Arrow()
	cols := make([][]arrow.Array, as.NumFields())
	for c := range as.NumFields() {
		in := make([]arrow.Array, len(bs))
		for i, b := range bs {
			in[i] = b.Column(c)
		}
		chunk, err := AppendColumnChunk(nil, in)
		if err != nil {
			t.Fatalf("column %d: %v", c, err)
		}
		if len(chunk)%8 != 0 {
			t.Fatalf("column %d: chunk of %d bytes", c, len(chunk))
		}
		if cols[c], err = DecodeColumnChunk(chunk, as.Field(c).Type); err != nil {
			t.Fatalf("column %d: %v", c, err)
		}
	}
	for i, b := range bs {
		cs := make([]arrow.Array, len(cols))
		for c := range cols {
			cs[c] = cols[c][i]
		}
		got := array.NewRecordBatch(as, cs, b.NumRows())
		if g, w := rowsJSON(got), rowsJSON(b); !equalStrings(g, w) {
			t.Fatalf("batch %d:\n got %q\nwant %q", i, g, w)
		}
		got.Release()
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestColumnChunkGolden: the column chunks of fullRecords as version 1 wrote them still
// decode to the same values (the chunk bytes are Arrow's buffer layout, fixed by the
// Arrow format, not by a library version).
func TestColumnChunkGolden(t *testing.T) {
	s, bs := columnBatches(t, fullRecords)
	defer bs[0].Release()
	as := s.Arrow()
	for c := range as.NumFields() {
		name := filepath.Join("testdata", "v1", "columns-"+as.Field(c).Name+".bin")
		chunk, err := AppendColumnChunk(nil, []arrow.Array{bs[0].Column(c)})
		if err != nil {
			t.Fatal(err)
		}
		if *updateColumns {
			if _, err := os.Stat(name); errors.Is(err, os.ErrNotExist) {
				if err := os.WriteFile(name, chunk, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		golden, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("golden file missing (write it once with -update-column-golden): %v", err)
		}
		if !bytes.Equal(chunk, golden) {
			t.Fatalf("%s: this writer writes other bytes", name)
		}
		arrs, err := DecodeColumnChunk(golden, as.Field(c).Type)
		if err != nil {
			t.Fatal(err)
		}
		want := bs[0].Column(c)
		if !array.Equal(arrs[0], want) {
			t.Fatalf("%s: decoded %v, want %v", name, arrs[0], want)
		}
		arrs[0].Release()
	}
	sb := SchemaBytes(as)
	got, err := DecodeSchemaBytes(sb)
	if err != nil || !got.Equal(as) || !got.Metadata().Equal(as.Metadata()) {
		t.Fatalf("schema bytes: %v, %v", got, err)
	}
}

func TestColumnChunkErrors(t *testing.T) {
	s, bs := columnBatches(t, fullRecords)
	defer bs[0].Release()
	as := s.Arrow()
	name := as.Field(1).Type // utf8
	chunk, err := AppendColumnChunk(nil, []arrow.Array{bs[0].Column(1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"odd length", chunk[:len(chunk)-1]},
		{"no batches", append([]byte{0}, make([]byte, 7)...)},
		{"too many batches", append([]byte{0xff, 0x7f}, make([]byte, 6)...)},
		{"short", chunk[:8]},
		{"long", append(bytes.Clone(chunk), make([]byte, 8)...)},
	} {
		if _, err := DecodeColumnChunk(c.b, name); !errors.Is(err, ErrColumnChunk) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// A wrong type: the utf8 chunk read as a struct of two members.
	if _, err := DecodeColumnChunk(chunk, as.Field(9).Type); err == nil {
		t.Error("utf8 chunk decoded as a struct")
	}
	if _, err := AppendColumnChunk(nil, []arrow.Array{array.NewSlice(bs[0].Column(1), 1, 2)}); err == nil {
		t.Error("sliced array accepted")
	}
}

// FuzzDecodeColumnChunk: DecodeColumnChunk never panics on any bytes and any type of the
// model, and what it accepts encodes back to the same bytes.
func FuzzDecodeColumnChunk(f *testing.F) {
	s, bs := columnBatches(f, fullRecords)
	as := s.Arrow()
	for c := range as.NumFields() {
		chunk, err := AppendColumnChunk(nil, []arrow.Array{bs[0].Column(c)})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(c), chunk)
	}
	bs[0].Release()
	f.Fuzz(func(t *testing.T, c uint8, b []byte) {
		typ := as.Field(int(c) % as.NumFields()).Type
		arrs, err := DecodeColumnChunk(b, typ)
		if err != nil {
			if !errors.Is(err, ErrColumnChunk) {
				t.Fatalf("error not ErrColumnChunk: %v", err)
			}
			return
		}
		defer func() {
			for _, a := range arrs {
				a.Release()
			}
		}()
		for _, a := range arrs {
			for i := range a.Len() {
				if v := appendJSONValue(nil, a, i); !json.Valid(v) {
					t.Fatalf("value %d renders as %q", i, v)
				}
			}
		}
	})
}

// FuzzDecodeSchemaBytes: no panic, and a bounded allocation, on any bytes.
func FuzzDecodeSchemaBytes(f *testing.F) {
	f.Add(SchemaBytes(mustParse(f, fullSchema).Arrow()))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := DecodeSchemaBytes(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error not ErrCorrupt: %v", err)
		}
	})
}

// TestColumnChunkHeaders: the headers column (a list of non-nullable structs of utf8 and
// binary, with nulls at every level) goes through a column chunk unchanged.
func TestColumnChunkHeaders(t *testing.T) {
	s := mustParse(t, `{"fields":[{"name":"v","type":"int32","nullable":true}]}`)
	s.AddHeadersColumn()
	hs := [][]Header{{{Key: "k", Value: []byte("x")}, {Key: "n"}}, nil, {{Key: "", Value: []byte{}}}}
	p, _ := buildPayload(t, s, []string{`{"v":1}`, `{"v":null}`, `{}`}, hs)
	dp := decodeOne(t, p)
	defer dp.Release()
	b := dp.Batches[0]
	hc := b.Schema().FieldIndices(HeadersColumn)[0]
	chunk, err := AppendColumnChunk(nil, []arrow.Array{b.Column(hc), b.Column(hc)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeColumnChunk(chunk, b.Schema().Field(hc).Type)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		if !array.Equal(a, b.Column(hc)) {
			t.Fatalf("headers column: %v, want %v", a, b.Column(hc))
		}
		a.Release()
	}
}
