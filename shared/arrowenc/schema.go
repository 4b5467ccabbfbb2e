// Package arrowenc is Loam's arrow encoding: the schema model of a stream whose records are
// stored as Arrow IPC record batches, its JSON form, its conversion to an arrow.Schema and
// an Arrow IPC schema message, the evolution rules, the validation of JSON records against
// a schema, and the arrow chunk payload (an Arrow IPC stream behind a small versioned
// prefix naming the schema id).
package arrowenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ErrInvalidSchema is wrapped by every schema error: a bad JSON form, an unknown type, a
// refused evolution.
var ErrInvalidSchema = errors.New("arrowenc: invalid schema")

// Limits of a schema.
const (
	MaxFields    = 1000 // fields of a schema or a struct
	MaxDepth     = 8    // nesting of list and struct types
	MaxNameBytes = 255  // bytes of a field name
	MaxSchemaLen = 1 << 20
)

// HeadersColumn is the name of the column that keeps record headers when a schema's
// headers mode is "column": a nullable list<struct<key: utf8, value: binary>>.
const HeadersColumn = "_headers"

// Headers modes.
const (
	HeadersRefuse     = "refuse" // a record with headers is refused (the default)
	HeadersColumnMode = "column"
)

// Type is a column type in Arrow's names: int8..int64, uint8..uint64, float32, float64,
// bool, utf8, binary, timestamp (Unit s|ms|us|ns, optional Timezone), date32, date64,
// decimal128 (Precision 1..38, Scale 0..Precision), list (Item) and struct (Fields).
type Type struct {
	Name      string  `json:"type"`
	Unit      string  `json:"unit,omitempty"`
	Timezone  string  `json:"timezone,omitempty"`
	Precision int32   `json:"precision,omitempty"`
	Scale     int32   `json:"scale,omitempty"`
	Item      *Field  `json:"item,omitempty"`
	Fields    []Field `json:"fields,omitempty"`
}

// Field is a named column (or struct member, or list item, whose name may be empty).
type Field struct {
	Name     string `json:"name"`
	Nullable bool   `json:"nullable"`
	Type
}

// Schema is a stream's schema: its columns, the key column (partitioning, compaction and
// the Kafka key; empty: records are keyless), the timestamp column (time retention and the
// Kafka timestamp; empty: the produce time) and how record headers are kept.
type Schema struct {
	Fields    []Field `json:"fields"`
	Key       string  `json:"key,omitempty"`
	Timestamp string  `json:"timestamp,omitempty"`
	Headers   string  `json:"headers,omitempty"` // refuse (default) | column
}

// ParseSchema parses and validates a schema's JSON form. Unknown members are refused.
func ParseSchema(b []byte) (*Schema, error) {
	if len(b) > MaxSchemaLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalidSchema, MaxSchemaLen)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Schema
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the schema", ErrInvalidSchema)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// MarshalJSON-compatible canonical form: JSON returns the schema's JSON form.
func (s *Schema) JSON() []byte {
	b, _ := json.Marshal(s)
	return b
}

func invalid(path, format string, args ...any) error {
	return fmt.Errorf("%w: field %s: %s", ErrInvalidSchema, path, fmt.Sprintf(format, args...))
}

// Validate checks the schema: names, types, the key, timestamp and headers settings. It
// names unnamed list items "item", as Arrow does.
func (s *Schema) Validate() error {
	if len(s.Fields) == 0 {
		return fmt.Errorf("%w: no fields", ErrInvalidSchema)
	}
	if err := validateFields(s.Fields, "", 0); err != nil {
		return err
	}
	switch s.Headers {
	case "", HeadersRefuse:
	case HeadersColumnMode:
		if s.field(HeadersColumn) == nil {
			return fmt.Errorf("%w: headers %q: no %q column (AddHeadersColumn adds it)", ErrInvalidSchema, s.Headers, HeadersColumn)
		}
		if !s.field(HeadersColumn).equalType(headersField()) {
			return fmt.Errorf("%w: column %q must be a nullable list<struct<key: utf8, value: binary>>", ErrInvalidSchema, HeadersColumn)
		}
	default:
		return fmt.Errorf("%w: headers %q: want %q or %q", ErrInvalidSchema, s.Headers, HeadersRefuse, HeadersColumnMode)
	}
	if s.Headers != HeadersColumnMode && s.field(HeadersColumn) != nil {
		return fmt.Errorf("%w: column %q is reserved for headers (set \"headers\": \"column\")", ErrInvalidSchema, HeadersColumn)
	}
	if s.Key != "" {
		f := s.field(s.Key)
		if f == nil {
			return fmt.Errorf("%w: key column %q is not a field", ErrInvalidSchema, s.Key)
		}
		if f.Name == HeadersColumn || f.Type.Name == "list" || f.Type.Name == "struct" {
			return fmt.Errorf("%w: key column %q: type %s cannot be a key (want a scalar type)", ErrInvalidSchema, s.Key, f.Type.Name)
		}
	}
	if s.Timestamp != "" {
		f := s.field(s.Timestamp)
		if f == nil {
			return fmt.Errorf("%w: timestamp column %q is not a field", ErrInvalidSchema, s.Timestamp)
		}
		if f.Type.Name != "timestamp" {
			return fmt.Errorf("%w: timestamp column %q: type %s (want timestamp)", ErrInvalidSchema, s.Timestamp, f.Type.Name)
		}
	}
	return nil
}

// AddHeadersColumn sets the headers mode to "column" and appends the headers column if the
// schema does not have it.
func (s *Schema) AddHeadersColumn() {
	s.Headers = HeadersColumnMode
	if s.field(HeadersColumn) == nil {
		s.Fields = append(s.Fields, headersField())
	}
}

func headersField() Field {
	return Field{Name: HeadersColumn, Nullable: true, Type: Type{Name: "list", Item: &Field{
		Name: "item", Nullable: false, Type: Type{Name: "struct", Fields: []Field{
			{Name: "key", Nullable: false, Type: Type{Name: "utf8"}},
			{Name: "value", Nullable: true, Type: Type{Name: "binary"}},
		}},
	}}}
}

func (s *Schema) field(name string) *Field {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return &s.Fields[i]
		}
	}
	return nil
}

// FieldIndex returns the index of the top-level column name, or -1.
func (s *Schema) FieldIndex(name string) int {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return i
		}
	}
	return -1
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func validateFields(fs []Field, path string, depth int) error {
	if len(fs) > MaxFields {
		return invalid(path, "more than %d fields", MaxFields)
	}
	seen := make(map[string]bool, len(fs))
	for i := range fs {
		f := &fs[i]
		p := join(path, f.Name)
		switch {
		case f.Name == "":
			return invalid(fmt.Sprintf("%s[%d]", path, i), "empty name")
		case len(f.Name) > MaxNameBytes:
			return invalid(p, "name longer than %d bytes", MaxNameBytes)
		case !utf8.ValidString(f.Name):
			return invalid(p, "name is not UTF-8")
		case strings.ContainsAny(f.Name, ".,"):
			return invalid(p, "name holds '.' or ','")
		case seen[f.Name]:
			return invalid(p, "duplicate name")
		}
		seen[f.Name] = true
		if err := validateType(&f.Type, p, depth); err != nil {
			return err
		}
	}
	return nil
}

var scalarTypes = map[string]arrow.DataType{
	"int8": arrow.PrimitiveTypes.Int8, "int16": arrow.PrimitiveTypes.Int16,
	"int32": arrow.PrimitiveTypes.Int32, "int64": arrow.PrimitiveTypes.Int64,
	"uint8": arrow.PrimitiveTypes.Uint8, "uint16": arrow.PrimitiveTypes.Uint16,
	"uint32": arrow.PrimitiveTypes.Uint32, "uint64": arrow.PrimitiveTypes.Uint64,
	"float32": arrow.PrimitiveTypes.Float32, "float64": arrow.PrimitiveTypes.Float64,
	"bool": arrow.FixedWidthTypes.Boolean, "utf8": arrow.BinaryTypes.String,
	"binary": arrow.BinaryTypes.Binary, "date32": arrow.FixedWidthTypes.Date32,
	"date64": arrow.FixedWidthTypes.Date64,
}

var timeUnits = map[string]arrow.TimeUnit{"s": arrow.Second, "ms": arrow.Millisecond, "us": arrow.Microsecond, "ns": arrow.Nanosecond}

func validateType(t *Type, p string, depth int) error {
	if depth > MaxDepth {
		return invalid(p, "nested deeper than %d", MaxDepth)
	}
	extra := func(what string) error { return invalid(p, "type %s takes no %s", t.Name, what) }
	if t.Name != "timestamp" && (t.Unit != "" || t.Timezone != "") {
		return extra("unit or timezone")
	}
	if t.Name != "decimal128" && (t.Precision != 0 || t.Scale != 0) {
		return extra("precision or scale")
	}
	if t.Name != "list" && t.Item != nil {
		return extra("item")
	}
	if t.Name != "struct" && t.Fields != nil {
		return extra("fields")
	}
	if _, ok := scalarTypes[t.Name]; ok {
		return nil
	}
	switch t.Name {
	case "timestamp":
		if _, ok := timeUnits[t.Unit]; !ok {
			return invalid(p, "timestamp unit %q: want s, ms, us or ns", t.Unit)
		}
		return nil
	case "decimal128":
		if t.Precision < 1 || t.Precision > 38 {
			return invalid(p, "decimal128 precision %d: want 1..38", t.Precision)
		}
		if t.Scale < 0 || t.Scale > t.Precision {
			return invalid(p, "decimal128 scale %d: want 0..precision", t.Scale)
		}
		return nil
	case "list":
		if t.Item == nil {
			return invalid(p, "list without item")
		}
		switch t.Item.Name {
		case "":
			t.Item.Name = "item" // Arrow's name for a list's item
		case "item":
		default:
			return invalid(p, "list item name %q: want \"item\" or none", t.Item.Name)
		}
		return validateType(&t.Item.Type, p+"[]", depth+1)
	case "struct":
		if len(t.Fields) == 0 {
			return invalid(p, "struct without fields")
		}
		return validateFields(t.Fields, p, depth+1)
	case "":
		return invalid(p, "no type")
	}
	return invalid(p, "unknown type %q (want int8..int64, uint8..uint64, float32, float64, bool, utf8, binary, timestamp, date32, date64, decimal128, list or struct)", t.Name)
}

// DataType returns t's Arrow data type; t must be valid.
func (t *Type) DataType() arrow.DataType {
	if dt, ok := scalarTypes[t.Name]; ok {
		return dt
	}
	switch t.Name {
	case "timestamp":
		return &arrow.TimestampType{Unit: timeUnits[t.Unit], TimeZone: t.Timezone}
	case "decimal128":
		return &arrow.Decimal128Type{Precision: t.Precision, Scale: t.Scale}
	case "list":
		return arrow.ListOfField(t.Item.arrowField("item"))
	case "struct":
		fs := make([]arrow.Field, len(t.Fields))
		for i := range t.Fields {
			fs[i] = t.Fields[i].arrowField(t.Fields[i].Name)
		}
		return arrow.StructOf(fs...)
	}
	panic("arrowenc: DataType of an invalid type " + t.Name)
}

func (f *Field) arrowField(name string) arrow.Field {
	return arrow.Field{Name: name, Type: f.Type.DataType(), Nullable: f.Nullable}
}

// Arrow returns the schema as an arrow.Schema; the key, timestamp and headers settings are
// kept in its metadata (loam.key, loam.timestamp, loam.headers).
func (s *Schema) Arrow() *arrow.Schema {
	fs := make([]arrow.Field, len(s.Fields))
	for i := range s.Fields {
		fs[i] = s.Fields[i].arrowField(s.Fields[i].Name)
	}
	var keys, vals []string
	for _, kv := range [][2]string{{"loam.key", s.Key}, {"loam.timestamp", s.Timestamp}, {"loam.headers", s.Headers}} {
		if kv[1] != "" {
			keys, vals = append(keys, kv[0]), append(vals, kv[1])
		}
	}
	md := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(fs, &md)
}

// IPC returns the schema as an Arrow IPC stream holding only the schema message (and the
// end-of-stream marker), which every Arrow IPC reader reads.
func (s *Schema) IPC() []byte {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s.Arrow()), ipc.WithAllocator(memory.DefaultAllocator))
	if err := w.Close(); err != nil {
		panic("arrowenc: encode schema: " + err.Error())
	}
	return buf.Bytes()
}

// FromArrow converts an arrow.Schema (for example one read from an Arrow IPC schema
// message) to a Schema, taking the key, timestamp and headers settings from its metadata.
// Types outside the model are refused.
func FromArrow(as *arrow.Schema) (*Schema, error) {
	s := &Schema{}
	for i, f := range as.Fields() {
		lf, err := fromArrowField(f, f.Name, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: field %d: %v", ErrInvalidSchema, i, err)
		}
		s.Fields = append(s.Fields, lf)
	}
	md := as.Metadata()
	get := func(k string) string {
		if i := md.FindKey(k); i >= 0 {
			return md.Values()[i]
		}
		return ""
	}
	s.Key, s.Timestamp, s.Headers = get("loam.key"), get("loam.timestamp"), get("loam.headers")
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// ParseIPCSchema reads the schema of an Arrow IPC stream (a schema message, with or
// without record batches after it).
func ParseIPCSchema(b []byte) (s *Schema, err error) {
	defer func() {
		// Arrow's flatbuffer accessors index without bounds checks of their own.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("%w: arrow ipc schema message: malformed (%v)", ErrInvalidSchema, r)
		}
	}()
	if len(b) > MaxSchemaLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalidSchema, MaxSchemaLen)
	}
	if err := checkSchemaMessage(b); err != nil {
		return nil, fmt.Errorf("%w: arrow ipc schema message: %v", ErrInvalidSchema, err)
	}
	r, err := newIPCReader(b)
	if err != nil {
		return nil, fmt.Errorf("%w: arrow ipc schema message: %v", ErrInvalidSchema, err)
	}
	defer r.Release()
	return FromArrow(r.Schema())
}

func fromArrowField(f arrow.Field, name string, depth int) (Field, error) {
	if depth > MaxDepth {
		return Field{}, fmt.Errorf("%s: nested deeper than %d", name, MaxDepth)
	}
	out := Field{Name: f.Name, Nullable: f.Nullable}
	for n, dt := range scalarTypes {
		if arrow.TypeEqual(dt, f.Type) {
			out.Type.Name = n
			return out, nil
		}
	}
	switch t := f.Type.(type) {
	case *arrow.TimestampType:
		out.Type = Type{Name: "timestamp", Unit: t.Unit.String(), Timezone: t.TimeZone}
	case *arrow.Decimal128Type:
		out.Type = Type{Name: "decimal128", Precision: t.Precision, Scale: t.Scale}
	case *arrow.ListType:
		item, err := fromArrowField(t.ElemField(), name+"[]", depth+1)
		if err != nil {
			return Field{}, err
		}
		item.Name = "item"
		out.Type = Type{Name: "list", Item: &item}
	case *arrow.StructType:
		for _, sf := range t.Fields() {
			m, err := fromArrowField(sf, name+"."+sf.Name, depth+1)
			if err != nil {
				return Field{}, err
			}
			out.Type.Fields = append(out.Type.Fields, m)
		}
		out.Type.Name = "struct"
	default:
		return Field{}, fmt.Errorf("%s: arrow type %s is not supported", name, f.Type)
	}
	return out, nil
}

func (f *Field) equalType(g Field) bool {
	return f.Nullable == g.Nullable && arrow.TypeEqual(f.Type.DataType(), g.Type.DataType())
}

// CheckEvolution checks that next may replace prev: the same columns in the same order
// with the same types and nullability, the same key, timestamp and headers settings, plus
// any number of nullable columns appended at the end. Anything else is refused with an
// error naming the first difference.
func CheckEvolution(prev, next *Schema) error {
	if err := next.Validate(); err != nil {
		return err
	}
	if prev.Key != next.Key || prev.Timestamp != next.Timestamp || normHeaders(prev.Headers) != normHeaders(next.Headers) {
		return fmt.Errorf("%w: evolution: the key, timestamp and headers settings cannot change", ErrInvalidSchema)
	}
	if len(next.Fields) < len(prev.Fields) {
		return fmt.Errorf("%w: evolution: column %q removed (only adding nullable columns is allowed)", ErrInvalidSchema, prev.Fields[len(next.Fields)].Name)
	}
	for i := range prev.Fields {
		p, n := prev.Fields[i], next.Fields[i]
		if p.Name != n.Name {
			return fmt.Errorf("%w: evolution: column %d is %q, was %q (columns cannot be renamed, removed or reordered)", ErrInvalidSchema, i, n.Name, p.Name)
		}
		if !p.equalType(n) {
			return fmt.Errorf("%w: evolution: column %q changed type or nullability (%s to %s)", ErrInvalidSchema, p.Name, describe(p), describe(n))
		}
	}
	for _, n := range next.Fields[len(prev.Fields):] {
		if !n.Nullable {
			return fmt.Errorf("%w: evolution: added column %q must be nullable", ErrInvalidSchema, n.Name)
		}
	}
	return nil
}

func normHeaders(h string) string {
	if h == "" {
		return HeadersRefuse
	}
	return h
}

func describe(f Field) string {
	s := f.Type.DataType().String()
	if !f.Nullable {
		s += " not null"
	}
	return s
}
