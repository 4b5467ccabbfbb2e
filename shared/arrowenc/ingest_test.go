package arrowenc

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const ingestSchema = `{"fields":[{"name":"id","type":"int64","nullable":false},
 {"name":"price","type":"decimal128","precision":4,"scale":2,"nullable":true},
 {"name":"addr","type":"struct","nullable":true,"fields":[{"name":"zip","type":"utf8","nullable":false}]}],"key":"id"}`

func clientIPC(t testing.TB, as *arrow.Schema, fill func(b *array.RecordBuilder)) []byte {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	fill(b)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(as))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAdopt: a client's batches of the stream's columns take the stream's schema (its
// metadata names the key column); values a type cannot bound are checked with errors
// naming the row and column.
func TestAdopt(t *testing.T) {
	s, err := ParseSchema([]byte(ingestSchema))
	if err != nil {
		t.Fatal(err)
	}
	client := s.Arrow().Fields()
	client[0].Nullable = true
	as := arrow.NewSchema(client, nil)
	good := func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int64Builder).Append(7)
		b.Field(1).(*array.Decimal128Builder).AppendNull()
		sb := b.Field(2).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append("75001")
	}
	got, batches, err := ReadIPC(clientIPC(t, as, good))
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(batches)
	if err := Conform(s, got); err != nil {
		t.Fatal(err)
	}
	a, err := Adopt(s, nil, batches[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if key, _, _ := RowKeyTimestamp(a, 0); string(key) != "7" {
		t.Fatalf("key %q", key)
	}
	for name, c := range map[string]struct {
		fill func(b *array.RecordBuilder)
		want string
	}{
		"null key": {func(b *array.RecordBuilder) {
			good(b)
			b.Field(0).AppendNull()
			b.Field(1).AppendNull()
			b.Field(2).AppendNull()
		}, `row 1: column "id" is null`},
		"decimal": {func(b *array.RecordBuilder) {
			b.Field(0).(*array.Int64Builder).Append(1)
			b.Field(1).(*array.Decimal128Builder).Append(decimalOf(123456))
			b.Field(2).AppendNull()
		}, `row 0: column price: 1234.56 does not fit decimal(4, 2)`},
		"struct member": {func(b *array.RecordBuilder) {
			b.Field(0).(*array.Int64Builder).Append(1)
			b.Field(1).AppendNull()
			sb := b.Field(2).(*array.StructBuilder)
			sb.Append(true)
			sb.FieldBuilder(0).AppendNull()
		}, `row 0: column addr.zip is null`},
	} {
		_, bs, err := ReadIPC(clientIPC(t, as, c.fill))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = Adopt(s, nil, bs[0], 0)
		releaseAll(bs)
		if !errors.Is(err, ErrInvalidIPC) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %s", name, err, c.want)
		}
	}
}

// TestConform: the first difference is named.
func TestConform(t *testing.T) {
	s, _ := ParseSchema([]byte(ingestSchema))
	f := s.Arrow().Fields()
	for want, fs := range map[string][]arrow.Field{
		`column 0 is "ID", the stream's schema has "id"`:                                         {{Name: "ID", Type: f[0].Type}, f[1], f[2]},
		`column "price" is decimal(5, 2), the stream's schema has decimal(4, 2)`:                 {f[0], {Name: "price", Type: &arrow.Decimal128Type{Precision: 5, Scale: 2}}, f[2]},
		`2 columns, the stream's schema has 3 (the first missing: "addr")`:                       {f[0], f[1]},
		`4 columns, the stream's schema has 3 (the first extra: "x")`:                            {f[0], f[1], f[2], {Name: "x", Type: arrow.PrimitiveTypes.Int8, Nullable: true}},
		`column "addr" is struct<zip: utf8 nullable>, the stream's schema has struct<zip: utf8>`: {f[0], f[1], {Name: "addr", Type: arrow.StructOf(arrow.Field{Name: "zip", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true}},
	} {
		err := Conform(s, arrow.NewSchema(fs, nil))
		if !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v, want %s", err, want)
		}
	}
}

func FuzzReadIPC(f *testing.F) {
	if b, err := os.ReadFile("testdata/v1/schema.arrows"); err == nil {
		f.Add(b)
	}
	s, _ := ParseSchema([]byte(ingestSchema))
	f.Add(clientIPC(f, s.Arrow(), func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int64Builder).Append(7)
		b.Field(1).(*array.Decimal128Builder).Append(decimalOf(12))
		sb := b.Field(2).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append("x")
	}))
	f.Fuzz(func(t *testing.T, b []byte) {
		as, batches, err := ReadIPC(b)
		if err != nil {
			return
		}
		defer releaseAll(batches)
		sch, err := FromArrow(as)
		if err != nil {
			return
		}
		all, _ := Project(as, nil)
		for i, batch := range batches {
			a, err := Adopt(sch, nil, batch, int64(i))
			if err != nil {
				continue
			}
			for r := 0; r < int(a.NumRows()); r++ {
				AppendRowJSON(nil, a, r, all)
				RowKeyTimestamp(a, r)
			}
			a.Release()
		}
	})
}

func decimalOf(v int64) decimal128.Num { return decimal128.FromI64(v) }
