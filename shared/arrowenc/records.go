package arrowenc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ErrInvalidRecord is wrapped by every error about a record that does not fit its schema.
var ErrInvalidRecord = errors.New("arrowenc: invalid record")

// RecordError is a record that does not fit the schema: its index in the request and the
// field (a dotted path, list items as [i]) at fault.
type RecordError struct {
	Index int
	Field string
	Msg   string
}

func (e *RecordError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("record %d: %s", e.Index, e.Msg)
	}
	return fmt.Sprintf("record %d: field %s: %s", e.Index, e.Field, e.Msg)
}

func (e *RecordError) Unwrap() error { return ErrInvalidRecord }

// Header is one record header, kept in the headers column.
type Header struct {
	Key   string
	Value []byte // nil: a null value
}

// Builder validates JSON records against a schema and appends them as rows of an Arrow
// record batch. It holds the rows appended since the last NewBatch: its memory is bounded
// by what the caller appends (the produce request size).
type Builder struct {
	s    *Schema
	as   *arrow.Schema
	rb   *array.RecordBuilder
	rows int
}

// NewBuilder returns a Builder for s, which must be valid.
func NewBuilder(s *Schema, mem memory.Allocator) *Builder {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	as := s.Arrow()
	return &Builder{s: s, as: as, rb: array.NewRecordBuilder(mem, as)}
}

// Release frees the builder's buffers.
func (b *Builder) Release() { b.rb.Release() }

// Rows returns the rows appended since the last NewBatch.
func (b *Builder) Rows() int { return b.rows }

// Row is what Append learned of a record: its key (the key column's value as bytes: utf8
// and binary as they are, numbers, bools, dates and timestamps as their decimal text; nil
// when the schema has no key column or the value is null) and its timestamp in ms (the
// timestamp column, or def when there is none or it is null).
type Row struct {
	Key         []byte
	TimestampMs int64
}

// Append validates one record (a JSON object of column values; a missing column is null)
// and appends it. index names the record in errors. Headers are refused unless the schema
// keeps them in the headers column. Nothing is appended when the record is refused.
func (b *Builder) Append(index int, value json.RawMessage, headers []Header, defTimestampMs int64) (Row, error) {
	c, err := Check(b.s, index, value, headers, defTimestampMs)
	if err != nil {
		return Row{}, err
	}
	b.AppendChecked(c)
	return c.Row, nil
}

// Checked is a record validated against a schema (Check), ready to append to a Builder of
// that schema.
type Checked struct {
	Row
	vals []any
}

// Check validates one record against s without appending it (see Builder.Append): what
// it learns (the key, the timestamp) can place the record before it is appended.
func Check(s *Schema, index int, value json.RawMessage, headers []Header, defTimestampMs int64) (Checked, error) {
	var obj map[string]json.RawMessage
	if err := strictObject(value, &obj); err != nil {
		return Checked{}, &RecordError{Index: index, Msg: "the value is not a JSON object: " + err.Error()}
	}
	if len(headers) > 0 && s.Headers != HeadersColumnMode {
		return Checked{}, &RecordError{Index: index, Msg: "the stream's schema refuses headers"}
	}
	if _, ok := obj[HeadersColumn]; ok && s.Headers == HeadersColumnMode {
		return Checked{}, &RecordError{Index: index, Field: HeadersColumn, Msg: "set by the record's headers, not its value"}
	}
	for name := range obj {
		if s.FieldIndex(name) < 0 {
			return Checked{}, &RecordError{Index: index, Field: name, Msg: "not a column of the schema"}
		}
	}
	c := Checked{Row: Row{TimestampMs: defTimestampMs}, vals: make([]any, len(s.Fields))}
	for i := range s.Fields {
		f := &s.Fields[i]
		if f.Name == HeadersColumn {
			if len(headers) > 0 {
				c.vals[i] = headers
			}
			continue
		}
		v, err := convert(&f.Type, f.Nullable, obj[f.Name], f.Name)
		if err != nil {
			err.Index = index
			return Checked{}, err
		}
		c.vals[i] = v
		if v != nil && f.Name == s.Key {
			c.Key = keyBytes(&f.Type, v)
		}
		if v != nil && f.Name == s.Timestamp {
			c.TimestampMs = toMillis(v.(int64), timeUnits[f.Type.Unit])
		}
	}
	return c, nil
}

// AppendChecked appends a record Check validated against the builder's schema.
func (b *Builder) AppendChecked(c Checked) {
	for i := range b.s.Fields {
		appendValue(b.rb.Field(i), &b.s.Fields[i].Type, c.vals[i])
	}
	b.rows++
}

// NewBatch returns the rows appended so far as a record batch (the caller releases it)
// and resets the builder.
func (b *Builder) NewBatch() arrow.RecordBatch {
	b.rows = 0
	return b.rb.NewRecordBatch()
}

func strictObject(raw json.RawMessage, obj *map[string]json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return errors.New("want an object")
	}
	if !json.Valid(raw) {
		return json.Unmarshal(raw, obj) // its error
	}
	m, err := splitObject(raw) // jsonscan.go
	if err != nil {
		return err
	}
	*obj = m
	return nil
}

// keyBytes is a key column's value as bytes: RowKeyTimestamp answers the same from a
// stored row.
func keyBytes(t *Type, v any) []byte {
	switch x := v.(type) {
	case string:
		return []byte(x)
	case []byte:
		return x
	case int64:
		return strconv.AppendInt(nil, x, 10)
	case uint64:
		return strconv.AppendUint(nil, x, 10)
	case float64:
		if t.Name == "float32" {
			return strconv.AppendFloat(nil, float64(float32(x)), 'g', -1, 32)
		}
		return strconv.AppendFloat(nil, x, 'g', -1, 64)
	case bool:
		return strconv.AppendBool(nil, x)
	case decimal128.Num:
		return []byte(x.ToString(t.Scale))
	}
	return []byte(fmt.Sprint(v))
}

func toMillis(v int64, u arrow.TimeUnit) int64 {
	switch u {
	case arrow.Second:
		return v * 1000
	case arrow.Microsecond:
		return v / 1000
	case arrow.Nanosecond:
		return v / 1000_000
	}
	return v
}

var intBits = map[string]int{"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}

// convert checks raw against t and returns its Go form: nil (null), int64, uint64,
// float64, bool, string, []byte, decimal128.Num, []any (list) or []any of the struct's
// fields in order (struct).
func convert(t *Type, nullable bool, raw json.RawMessage, path string) (any, *RecordError) {
	fail := func(format string, args ...any) (any, *RecordError) {
		return nil, &RecordError{Field: path, Msg: fmt.Sprintf(format, args...)}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		if !nullable {
			return fail("null or missing, but the column is not nullable")
		}
		return nil, nil
	}
	str := func() (string, bool) {
		if s, ok := jsonString(raw); ok { // jsonscan.go
			return s, true
		}
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	}
	num := func() (string, bool) {
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return "", false
		}
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return "", false
		}
		return string(n), true
	}
	switch t.Name {
	case "int8", "int16", "int32", "int64":
		n, ok := num()
		if !ok {
			return fail("want an integer (%s), got %s", t.Name, kind(raw))
		}
		v, err := strconv.ParseInt(n, 10, intBits[t.Name])
		if err != nil {
			return fail("%s is not an %s", n, t.Name)
		}
		return v, nil
	case "uint8", "uint16", "uint32", "uint64":
		n, ok := num()
		if !ok {
			return fail("want an integer (%s), got %s", t.Name, kind(raw))
		}
		v, err := strconv.ParseUint(n, 10, intBits[t.Name])
		if err != nil {
			return fail("%s is not a %s", n, t.Name)
		}
		return v, nil
	case "float32", "float64":
		n, ok := num()
		if !ok {
			return fail("want a number (%s), got %s", t.Name, kind(raw))
		}
		bits := 64
		if t.Name == "float32" {
			bits = 32
		}
		v, err := strconv.ParseFloat(n, bits)
		if err != nil {
			return fail("%s is out of range of %s", n, t.Name)
		}
		return v, nil
	case "bool":
		switch string(raw) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return fail("want true or false, got %s", kind(raw))
	case "utf8":
		s, ok := str()
		if !ok {
			return fail("want a string, got %s", kind(raw))
		}
		return s, nil
	case "binary":
		s, ok := str()
		if !ok {
			return fail("want a base64 string, got %s", kind(raw))
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return fail("not base64: %v", err)
		}
		return b, nil
	case "timestamp":
		u := timeUnits[t.Unit]
		if n, ok := num(); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return fail("%s is not an integer timestamp in %s", n, t.Unit)
			}
			return v, nil
		}
		s, ok := str()
		if !ok {
			return fail("want an integer in %s or an RFC 3339 string, got %s", t.Unit, kind(raw))
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fail("%q is not an RFC 3339 time", s)
		}
		v, err := arrow.TimestampFromTime(tm, u)
		if err != nil {
			return fail("%q is out of range in %s", s, t.Unit)
		}
		return int64(v), nil
	case "date32", "date64":
		if n, ok := num(); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil || (t.Name == "date32" && (v < math.MinInt32 || v > math.MaxInt32)) {
				return fail("%s is not a %s (days since the epoch for date32, ms for date64)", n, t.Name)
			}
			return v, nil
		}
		s, ok := str()
		if !ok {
			return fail("want a date \"YYYY-MM-DD\" or an integer, got %s", kind(raw))
		}
		tm, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return fail("%q is not a date YYYY-MM-DD", s)
		}
		if t.Name == "date32" {
			return int64(arrow.Date32FromTime(tm)), nil
		}
		return int64(arrow.Date64FromTime(tm)), nil
	case "decimal128":
		s, ok := str()
		if !ok {
			if s, ok = num(); !ok {
				return fail("want a decimal as a string or number, got %s", kind(raw))
			}
		}
		d, err := decimal128.FromString(s, t.Precision, t.Scale)
		if err != nil || !d.FitsInPrecision(t.Precision) {
			return fail("%s does not fit decimal128(%d, %d)", s, t.Precision, t.Scale)
		}
		if fracDigits(s) > t.Scale {
			return fail("%s has more than %d digits after the point", s, t.Scale)
		}
		return d, nil
	case "list":
		if raw[0] != '[' {
			return fail("want an array, got %s", kind(raw))
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fail("bad array: %v", err)
		}
		out := make([]any, len(items))
		for i, it := range items {
			v, err := convert(&t.Item.Type, t.Item.Nullable, it, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case "struct":
		var obj map[string]json.RawMessage
		if err := strictObject(raw, &obj); err != nil {
			return fail("want an object, got %s", kind(raw))
		}
		for name := range obj {
			found := false
			for _, f := range t.Fields {
				found = found || f.Name == name
			}
			if !found {
				return nil, &RecordError{Field: path + "." + name, Msg: "not a member of the struct"}
			}
		}
		out := make([]any, len(t.Fields))
		for i := range t.Fields {
			v, err := convert(&t.Fields[i].Type, t.Fields[i].Nullable, obj[t.Fields[i].Name], path+"."+t.Fields[i].Name)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return fail("type %s", t.Name)
}

// fracDigits returns the digits after the point of a plain decimal string (0 for one with
// an exponent, whose scale decimal128.FromString checks).
func fracDigits(s string) int32 {
	if strings.ContainsAny(s, "eE") {
		return 0
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return int32(len(s) - i - 1)
	}
	return 0
}

func kind(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a bool"
	case 'n':
		return "null"
	}
	return "a number"
}

func appendValue(b array.Builder, t *Type, v any) {
	if v == nil {
		b.AppendNull()
		return
	}
	switch bb := b.(type) {
	case *array.Int8Builder:
		bb.Append(int8(v.(int64)))
	case *array.Int16Builder:
		bb.Append(int16(v.(int64)))
	case *array.Int32Builder:
		bb.Append(int32(v.(int64)))
	case *array.Int64Builder:
		bb.Append(v.(int64))
	case *array.Uint8Builder:
		bb.Append(uint8(v.(uint64)))
	case *array.Uint16Builder:
		bb.Append(uint16(v.(uint64)))
	case *array.Uint32Builder:
		bb.Append(uint32(v.(uint64)))
	case *array.Uint64Builder:
		bb.Append(v.(uint64))
	case *array.Float32Builder:
		bb.Append(float32(v.(float64)))
	case *array.Float64Builder:
		bb.Append(v.(float64))
	case *array.BooleanBuilder:
		bb.Append(v.(bool))
	case *array.StringBuilder:
		bb.Append(v.(string))
	case *array.BinaryBuilder:
		bb.Append(v.([]byte))
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(v.(int64)))
	case *array.Date32Builder:
		bb.Append(arrow.Date32(v.(int64)))
	case *array.Date64Builder:
		bb.Append(arrow.Date64(v.(int64)))
	case *array.Decimal128Builder:
		bb.Append(v.(decimal128.Num))
	case *array.ListBuilder:
		if hs, ok := v.([]Header); ok {
			bb.Append(true)
			sb := bb.ValueBuilder().(*array.StructBuilder)
			for _, h := range hs {
				sb.Append(true)
				sb.FieldBuilder(0).(*array.StringBuilder).Append(h.Key)
				if h.Value == nil {
					sb.FieldBuilder(1).AppendNull()
				} else {
					sb.FieldBuilder(1).(*array.BinaryBuilder).Append(h.Value)
				}
			}
			return
		}
		bb.Append(true)
		for _, it := range v.([]any) {
			appendValue(bb.ValueBuilder(), &t.Item.Type, it)
		}
	case *array.StructBuilder:
		bb.Append(true)
		for i, m := range v.([]any) {
			appendValue(bb.FieldBuilder(i), &t.Fields[i].Type, m)
		}
	default:
		panic(fmt.Sprintf("arrowenc: no builder for %T", b))
	}
}
