package arrowenc

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Producing Arrow IPC directly: a client sends an Arrow IPC stream (HTTP
// application/vnd.apache.arrow.stream, gRPC bytes, Flight DoPut) whose schema must be one
// of the stream's schema versions. ReadIPC decodes it with the checks DecodePayload makes;
// Conform names the first difference between the client's schema and a version; Adopt
// gives the client's batches the version's schema (its metadata names the key, timestamp
// and headers columns) after checking what the schema's types cannot say (no nulls in a
// column that is not nullable, decimals within their precision).

// ErrInvalidIPC is wrapped by every error about an Arrow IPC stream a client sent.
var ErrInvalidIPC = errors.New("arrowenc: invalid arrow ipc stream")

// ErrSchemaMismatch is wrapped by Conform's errors.
var ErrSchemaMismatch = errors.New("arrowenc: schema mismatch")

// ReadIPC reads a client's Arrow IPC stream: its schema and record batches (the caller
// releases them). The schema message is checked before arrow-go reads it and every message
// is bounded by the stream's length, so a corrupt stream cannot make the reader allocate
// more than its own size; every batch is checked as DecodePayload checks stored ones.
func ReadIPC(b []byte) (as *arrow.Schema, batches []arrow.RecordBatch, err error) {
	defer func() {
		// Arrow's flatbuffer accessors index without bounds checks of their own.
		if r := recover(); r != nil {
			releaseAll(batches)
			as, batches, err = nil, nil, fmt.Errorf("%w: malformed (%v)", ErrInvalidIPC, r)
		}
	}()
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("%w: empty", ErrInvalidIPC)
	}
	if err := checkSchemaMessage(b); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidIPC, err)
	}
	r, err := newIPCReader(b, ipc.WithAllocator(memory.DefaultAllocator)) // reads the schema only
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidIPC, err)
	}
	defer r.Release()
	lay, err := layoutOf(r.Schema())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidIPC, err)
	}
	if err := checkBodies(b, lay, MaxDecompressed); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidIPC, err)
	}
	for r.Next() {
		rb := r.RecordBatch()
		if err := validateBatch(rb); err != nil {
			releaseAll(batches)
			return nil, nil, fmt.Errorf("%w: batch %d: %v", ErrInvalidIPC, len(batches), err)
		}
		rb.Retain()
		batches = append(batches, rb)
	}
	if err := r.Err(); err != nil && !errors.Is(err, io.EOF) {
		releaseAll(batches)
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidIPC, err)
	}
	return r.Schema(), batches, nil
}

func releaseAll(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}

// Conform checks that got, a client's schema, has s's columns: the same names in the same
// order with the same types; a nullable column of got may stand for a column s says is not
// nullable (Adopt then refuses a null in it). got's metadata is ignored (the stream's
// settings apply). The error names the first difference.
func Conform(s *Schema, got *arrow.Schema) error {
	want := s.Arrow()
	n := min(want.NumFields(), got.NumFields())
	for i := 0; i < n; i++ {
		w, g := want.Field(i), got.Field(i)
		if w.Name != g.Name {
			return fmt.Errorf("%w: column %d is %q, the stream's schema has %q", ErrSchemaMismatch, i, g.Name, w.Name)
		}
		if !arrow.TypeEqual(w.Type, g.Type) {
			return fmt.Errorf("%w: column %q is %s, the stream's schema has %s", ErrSchemaMismatch, w.Name, g.Type, w.Type)
		}
	}
	switch {
	case got.NumFields() < want.NumFields():
		return fmt.Errorf("%w: %d columns, the stream's schema has %d (the first missing: %q)", ErrSchemaMismatch, got.NumFields(), want.NumFields(), want.Field(n).Name)
	case got.NumFields() > want.NumFields():
		return fmt.Errorf("%w: %d columns, the stream's schema has %d (the first extra: %q)", ErrSchemaMismatch, got.NumFields(), want.NumFields(), got.Field(n).Name)
	}
	return nil
}

// Adopt returns b with s's Arrow schema (the caller releases it) once b conforms to s
// (Conform): every column s says is not nullable holds no null, and every decimal fits its
// precision. firstRow is b's first row in the client's stream, to name a bad row.
func Adopt(s *Schema, as *arrow.Schema, b arrow.RecordBatch, firstRow int64) (arrow.RecordBatch, error) {
	if as == nil {
		as = s.Arrow()
	}
	if int(b.NumCols()) != as.NumFields() {
		return nil, fmt.Errorf("%w: a batch of %d columns, the schema has %d", ErrSchemaMismatch, b.NumCols(), as.NumFields())
	}
	for i, c := range b.Columns() {
		f := as.Field(i)
		if !arrow.TypeEqual(f.Type, c.DataType()) {
			return nil, fmt.Errorf("%w: column %q is %s, the stream's schema has %s", ErrSchemaMismatch, f.Name, c.DataType(), f.Type)
		}
		if !f.Nullable && c.NullN() > 0 {
			for r := 0; r < c.Len(); r++ {
				if c.IsNull(r) {
					return nil, fmt.Errorf("%w: row %d: column %q is null; the stream's schema says it is not nullable", ErrInvalidIPC, firstRow+int64(r), f.Name)
				}
			}
		}
		if err := checkValues(c, f.Name, firstRow); err != nil {
			return nil, err
		}
	}
	return array.NewRecordBatch(as, b.Columns(), b.NumRows()), nil
}

// checkValues checks what an Arrow type does not bound: decimals within their precision,
// nulls in not-nullable struct members and list items, recursively.
func checkValues(a arrow.Array, path string, firstRow int64) error {
	switch x := a.(type) {
	case *array.Decimal128:
		dt := x.DataType().(*arrow.Decimal128Type)
		for r := 0; r < x.Len(); r++ {
			if x.IsValid(r) && !x.Value(r).FitsInPrecision(dt.Precision) {
				return fmt.Errorf("%w: %scolumn %s: %s does not fit %s", ErrInvalidIPC, at(firstRow, r), path, x.Value(r).ToString(dt.Scale), dt)
			}
		}
	case *array.List:
		lt := x.DataType().(*arrow.ListType)
		vals := x.ListValues()
		if !lt.ElemField().Nullable && vals.NullN() > 0 {
			for r := 0; r < x.Len(); r++ {
				s, e := x.ValueOffsets(r)
				for j := s; j < e; j++ {
					if vals.IsNull(int(j)) {
						return fmt.Errorf("%w: %scolumn %s[]: a null item; the schema says items are not nullable", ErrInvalidIPC, at(firstRow, r), path)
					}
				}
			}
		}
		return checkValues(vals, path+"[]", -1)
	case *array.Struct:
		st := x.DataType().(*arrow.StructType)
		for j := 0; j < x.NumField(); j++ {
			f := st.Field(j)
			m := x.Field(j)
			if !f.Nullable && m.NullN() > 0 {
				for r := 0; r < x.Len(); r++ {
					if x.IsValid(r) && m.IsNull(r) {
						return fmt.Errorf("%w: %scolumn %s.%s is null; the schema says it is not nullable", ErrInvalidIPC, at(firstRow, r), path, f.Name)
					}
				}
			}
			if err := checkValues(m, path+"."+f.Name, firstRow); err != nil {
				return err
			}
		}
	}
	return nil
}

// at names row r of a batch whose first row is first (nothing for the values of a list,
// first < 0, whose rows are not the stream's).
func at(first int64, r int) string {
	if first < 0 {
		return ""
	}
	return fmt.Sprintf("row %d: ", first+int64(r))
}
