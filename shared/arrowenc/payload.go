package arrowenc

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The arrow chunk payload: the payload of a WAL chunk of encoding arrow is one or more
// frames back to back (a log node's writer concatenates the frames of the produce
// requests it buffers for a partition). Every frame is a self-contained Arrow IPC stream,
// so one range read of a chunk is readable alone, like a kafka chunk, and frames built
// with different schema versions can share a chunk:
//
//	off  size  field
//	0    4     magic "LARW"
//	4    1     frame version = 1
//	5    3     reserved, 0
//	8    4     schema id (>= 1): the stream's schema version the batches were built with
//	12   4     rows (>= 1): the records the frame holds, one offset each
//	16   4     IPC length L (>= 1)
//	20   L     Arrow IPC stream: the schema message, record batches, end-of-stream marker
//
// The enclosing WAL chunk's CRC covers the whole payload.
const (
	PayloadVersion  = 1
	FrameHeaderSize = 20
	payloadMagic    = "LARW"
)

// Sentinel errors of the payload codec.
var (
	ErrCorrupt            = errors.New("arrowenc: corrupt arrow payload")
	ErrUnsupportedVersion = errors.New("arrowenc: unsupported arrow payload version")
)

// EncodePayload encodes the batches as one frame of schema id schemaID. The batches must
// share one schema and hold at least one row in all.
func EncodePayload(schemaID uint32, batches ...arrow.RecordBatch) ([]byte, error) {
	if schemaID == 0 {
		return nil, fmt.Errorf("arrowenc: encode payload: schema id 0")
	}
	var rows int64
	for _, b := range batches {
		rows += b.NumRows()
	}
	if rows < 1 || rows > math.MaxUint32 {
		return nil, fmt.Errorf("arrowenc: encode payload: %d rows (want 1..%d)", rows, uint32(math.MaxUint32))
	}
	var buf bytes.Buffer
	buf.WriteString(payloadMagic)
	buf.Write([]byte{PayloadVersion, 0, 0, 0})
	buf.Write(binary.BigEndian.AppendUint32(nil, schemaID))
	buf.Write(binary.BigEndian.AppendUint32(nil, uint32(rows)))
	buf.Write([]byte{0, 0, 0, 0}) // IPC length, set below
	w := ipc.NewWriter(&buf, ipc.WithSchema(batches[0].Schema()))
	for _, b := range batches {
		if err := w.Write(b); err != nil {
			return nil, fmt.Errorf("arrowenc: encode payload: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("arrowenc: encode payload: %w", err)
	}
	out := buf.Bytes()
	n := len(out) - FrameHeaderSize
	if n > math.MaxUint32 {
		return nil, fmt.Errorf("arrowenc: encode payload: %d bytes of Arrow IPC, more than a frame holds", n)
	}
	binary.BigEndian.PutUint32(out[16:], uint32(n))
	return out, nil
}

// FrameHeader is the fixed prefix of a frame.
type FrameHeader struct {
	SchemaID uint32
	Rows     uint32
	IPCLen   uint32
}

// ParseFrameHeader checks and returns the fixed prefix of the frame p starts with.
func ParseFrameHeader(p []byte) (FrameHeader, error) {
	if len(p) < FrameHeaderSize {
		return FrameHeader{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte frame header", ErrCorrupt, len(p), FrameHeaderSize)
	}
	if string(p[:4]) != payloadMagic {
		return FrameHeader{}, fmt.Errorf("%w: bad magic %q", ErrCorrupt, p[:4])
	}
	if p[4] != PayloadVersion {
		return FrameHeader{}, fmt.Errorf("%w: version %d", ErrUnsupportedVersion, p[4])
	}
	if p[5] != 0 || p[6] != 0 || p[7] != 0 {
		return FrameHeader{}, fmt.Errorf("%w: reserved bytes not 0", ErrCorrupt)
	}
	h := FrameHeader{SchemaID: binary.BigEndian.Uint32(p[8:]), Rows: binary.BigEndian.Uint32(p[12:]), IPCLen: binary.BigEndian.Uint32(p[16:])}
	if h.SchemaID == 0 || h.Rows == 0 || h.IPCLen == 0 {
		return FrameHeader{}, fmt.Errorf("%w: schema id %d, rows %d, IPC length %d (want >= 1)", ErrCorrupt, h.SchemaID, h.Rows, h.IPCLen)
	}
	if uint64(h.IPCLen) > uint64(len(p)-FrameHeaderSize) {
		return FrameHeader{}, fmt.Errorf("%w: IPC length %d, %d bytes left", ErrCorrupt, h.IPCLen, len(p)-FrameHeaderSize)
	}
	return h, nil
}

// Frame is a decoded frame. Release frees its batches.
type Frame struct {
	FrameHeader
	Schema  *arrow.Schema
	Batches []arrow.RecordBatch
}

// Release frees the batches.
func (f *Frame) Release() {
	for _, b := range f.Batches {
		b.Release()
	}
	f.Batches = nil
}

// DecodePayload decodes every frame of an arrow chunk payload, in order. The caller
// releases them (ReleaseFrames).
func DecodePayload(p []byte) ([]*Frame, error) {
	var out []*Frame
	for off := 0; off < len(p); {
		f, n, err := decodeFrame(p[off:])
		if err != nil {
			ReleaseFrames(out)
			return nil, fmt.Errorf("frame at byte %d: %w", off, err)
		}
		out = append(out, f)
		off += n
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty payload", ErrCorrupt)
	}
	return out, nil
}

// ReleaseFrames releases every frame.
func ReleaseFrames(fs []*Frame) {
	for _, f := range fs {
		f.Release()
	}
}

// Rows returns the rows of all frames.
func Rows(fs []*Frame) int64 {
	var n int64
	for _, f := range fs {
		n += int64(f.Rows)
	}
	return n
}

// decodeFrame decodes the frame p starts with, checking that its batches hold exactly
// the rows its header says and are valid Arrow data, and returns its length. The batches
// alias p.
func decodeFrame(p []byte) (out *Frame, n int, err error) {
	h, err := ParseFrameHeader(p)
	if err != nil {
		return nil, 0, err
	}
	n = FrameHeaderSize + int(h.IPCLen)
	defer func() {
		// Arrow's flatbuffer accessors index without bounds checks of their own.
		if r := recover(); r != nil {
			if out != nil {
				out.Release()
			}
			out, err = nil, fmt.Errorf("%w: arrow ipc: malformed (%v)", ErrCorrupt, r)
		}
	}()
	body := p[FrameHeaderSize:n]
	if err := checkSchemaMessage(body); err != nil {
		return nil, 0, fmt.Errorf("%w: arrow ipc: %v", ErrCorrupt, err)
	}
	r, err := newIPCReader(body, ipc.WithAllocator(memory.DefaultAllocator)) // reads the schema only
	if err != nil {
		return nil, 0, fmt.Errorf("%w: arrow ipc: %v", ErrCorrupt, err)
	}
	defer r.Release()
	lay, err := layoutOf(r.Schema())
	if err != nil {
		return nil, 0, fmt.Errorf("%w: arrow ipc: %v", ErrCorrupt, err)
	}
	if err := checkBodies(body, lay, 0); err != nil { // frames are written uncompressed
		return nil, 0, fmt.Errorf("%w: arrow ipc: %v", ErrCorrupt, err)
	}
	out = &Frame{FrameHeader: h, Schema: r.Schema()}
	var rows int64
	for r.Next() {
		b := r.RecordBatch()
		if err := validateBatch(b); err != nil {
			out.Release()
			return nil, 0, fmt.Errorf("%w: batch %d: %v", ErrCorrupt, len(out.Batches), err)
		}
		b.Retain()
		out.Batches = append(out.Batches, b)
		rows += b.NumRows()
		if rows > int64(h.Rows) {
			break
		}
	}
	if err := r.Err(); err != nil {
		out.Release()
		return nil, 0, fmt.Errorf("%w: arrow ipc: %v", ErrCorrupt, err)
	}
	if rows != int64(h.Rows) {
		out.Release()
		return nil, 0, fmt.Errorf("%w: batches hold %d rows, header says %d", ErrCorrupt, rows, h.Rows)
	}
	return out, n, nil
}

// Projection selects columns of a schema by name, in the order asked.
type Projection []int

// Project returns the projection of columns (all when columns is empty); an unknown or
// repeated name is an error naming it.
func Project(as *arrow.Schema, columns []string) (Projection, error) {
	if len(columns) == 0 {
		p := make(Projection, as.NumFields())
		for i := range p {
			p[i] = i
		}
		return p, nil
	}
	p := make(Projection, 0, len(columns))
	seen := map[string]bool{}
	for _, c := range columns {
		idx := as.FieldIndices(c)
		if len(idx) == 0 {
			return nil, fmt.Errorf("arrowenc: column %q is not in the schema", c)
		}
		if seen[c] {
			return nil, fmt.Errorf("arrowenc: column %q named twice", c)
		}
		seen[c] = true
		p = append(p, idx[0])
	}
	return p, nil
}

// ProjectBatch returns a batch of b's projected columns (the caller releases it).
func ProjectBatch(b arrow.RecordBatch, p Projection) arrow.RecordBatch {
	fs := make([]arrow.Field, len(p))
	cols := make([]arrow.Array, len(p))
	for i, c := range p {
		fs[i] = b.Schema().Field(c)
		cols[i] = b.Column(c)
	}
	md := b.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fs, &md), cols, b.NumRows())
}

// AppendRowJSON appends row of b as a JSON object of the projected columns (the headers
// column excluded: it is the record's headers): ints and floats as numbers (a NaN or
// infinity as a string), bools, utf8 as strings, binary as base64 strings, timestamps and
// date64 as integers in their unit, date32 as "YYYY-MM-DD", decimals as strings, lists as
// arrays, structs as objects, nulls as null. It is the form Builder.Append accepts, so the
// record round-trips.
func AppendRowJSON(dst []byte, b arrow.RecordBatch, row int, p Projection) []byte {
	dst = append(dst, '{')
	first := true
	for _, c := range p {
		f := b.Schema().Field(c)
		if f.Name == HeadersColumn {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = strconv.AppendQuote(dst, f.Name)
		dst = append(dst, ':')
		dst = appendJSONValue(dst, b.Column(c), row)
	}
	return append(dst, '}')
}

// RowHeaders returns the headers of row kept in b's headers column, if it has one.
func RowHeaders(b arrow.RecordBatch, row int) []Header {
	idx := b.Schema().FieldIndices(HeadersColumn)
	if len(idx) == 0 {
		return nil
	}
	l, ok := b.Column(idx[0]).(*array.List)
	if !ok || l.IsNull(row) {
		return nil
	}
	st := l.ListValues().(*array.Struct)
	keys := st.Field(0).(*array.String)
	vals := st.Field(1).(*array.Binary)
	start, end := l.ValueOffsets(row)
	out := make([]Header, 0, end-start)
	for i := int(start); i < int(end); i++ {
		h := Header{Key: keys.Value(i)}
		if !vals.IsNull(i) {
			h.Value = append([]byte{}, vals.Value(i)...)
		}
		out = append(out, h)
	}
	return out
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := jsonMarshalString(s)
	return append(dst, b...)
}

func appendJSONValue(dst []byte, a arrow.Array, i int) []byte {
	if a.IsNull(i) {
		return append(dst, "null"...)
	}
	switch x := a.(type) {
	case *array.Int8:
		return strconv.AppendInt(dst, int64(x.Value(i)), 10)
	case *array.Int16:
		return strconv.AppendInt(dst, int64(x.Value(i)), 10)
	case *array.Int32:
		return strconv.AppendInt(dst, int64(x.Value(i)), 10)
	case *array.Int64:
		return strconv.AppendInt(dst, x.Value(i), 10)
	case *array.Uint8:
		return strconv.AppendUint(dst, uint64(x.Value(i)), 10)
	case *array.Uint16:
		return strconv.AppendUint(dst, uint64(x.Value(i)), 10)
	case *array.Uint32:
		return strconv.AppendUint(dst, uint64(x.Value(i)), 10)
	case *array.Uint64:
		return strconv.AppendUint(dst, x.Value(i), 10)
	case *array.Float32:
		return appendFloat(dst, float64(x.Value(i)), 32)
	case *array.Float64:
		return appendFloat(dst, x.Value(i), 64)
	case *array.Boolean:
		return strconv.AppendBool(dst, x.Value(i))
	case *array.String:
		return appendJSONString(dst, x.Value(i))
	case *array.Binary:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, x.Value(i))
		return append(dst, '"')
	case *array.Timestamp:
		return strconv.AppendInt(dst, int64(x.Value(i)), 10)
	case *array.Date32:
		return append(append(append(dst, '"'), x.Value(i).ToTime().Format(time.DateOnly)...), '"')
	case *array.Date64:
		return strconv.AppendInt(dst, int64(x.Value(i)), 10)
	case *array.Decimal128:
		sc := x.DataType().(*arrow.Decimal128Type).Scale
		return append(append(append(dst, '"'), x.Value(i).ToString(sc)...), '"')
	case *array.List:
		dst = append(dst, '[')
		start, end := x.ValueOffsets(i)
		for j := start; j < end; j++ {
			if j > start {
				dst = append(dst, ',')
			}
			dst = appendJSONValue(dst, x.ListValues(), int(j))
		}
		return append(dst, ']')
	case *array.Struct:
		st := x.DataType().(*arrow.StructType)
		dst = append(dst, '{')
		for j := 0; j < x.NumField(); j++ {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, st.Field(j).Name)
			dst = append(dst, ':')
			dst = appendJSONValue(dst, x.Field(j), i)
		}
		return append(dst, '}')
	}
	return appendJSONString(dst, a.ValueStr(i))
}

func appendFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.AppendQuote(dst, strconv.FormatFloat(f, 'g', -1, bits))
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

func jsonMarshalString(s string) ([]byte, error) { return json.Marshal(s) }

// validateBatch checks what rendering a batch indexes: variable-length offsets within
// their data, list offsets within their values, struct children as long as the struct.
func validateBatch(b arrow.RecordBatch) error {
	for i, c := range b.Columns() {
		if int64(c.Len()) != b.NumRows() {
			return fmt.Errorf("column %d: %d values in a batch of %d rows", i, c.Len(), b.NumRows())
		}
		if err := validateArray(c); err != nil {
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return nil
}

func validateArray(a arrow.Array) error {
	if err := checkArrayBuffers(a.Data()); err != nil { // before anything indexes them
		return err
	}
	if v, ok := a.(interface{ ValidateFull() error }); ok {
		if err := v.ValidateFull(); err != nil {
			return err
		}
	}
	switch x := a.(type) {
	case *array.List:
		offs := x.Offsets()
		if len(offs) < x.Len()+1 && x.Len() > 0 {
			return fmt.Errorf("list offsets: %d for %d values", len(offs), x.Len())
		}
		for j := 0; j < x.Len(); j++ {
			if offs[j] < 0 || offs[j] > offs[j+1] || int(offs[j+1]) > x.ListValues().Len() {
				return fmt.Errorf("list offsets of value %d out of range", j)
			}
		}
		return validateArray(x.ListValues())
	case *array.Struct:
		for j := 0; j < x.NumField(); j++ {
			if x.Field(j).Len() < x.Len() {
				return fmt.Errorf("struct member %d: %d values, want %d", j, x.Field(j).Len(), x.Len())
			}
			if err := validateArray(x.Field(j)); err != nil {
				return err
			}
		}
	}
	return nil
}

// ProjectSchema returns the schema of the projected columns, metadata kept.
func ProjectSchema(as *arrow.Schema, p Projection) *arrow.Schema {
	fs := make([]arrow.Field, len(p))
	for i, c := range p {
		fs[i] = as.Field(c)
	}
	md := as.Metadata()
	return arrow.NewSchema(fs, &md)
}

// RowKeyTimestamp returns row's key (the key column's value as Builder.Append's Row.Key
// has it; nil when the schema has none or it is null) and timestamp in ms (the timestamp
// column's; ok false when the schema has none or it is null), from the loam.key and
// loam.timestamp settings of b's schema metadata.
func RowKeyTimestamp(b arrow.RecordBatch, row int) (key []byte, tsMs int64, ok bool) {
	md := b.Schema().Metadata()
	col := func(setting string) arrow.Array {
		name, found := md.GetValue(setting)
		if !found {
			return nil
		}
		idx := b.Schema().FieldIndices(name)
		if len(idx) == 0 {
			return nil
		}
		return b.Column(idx[0])
	}
	if a := col("loam.key"); a != nil && !a.IsNull(row) {
		switch x := a.(type) {
		case *array.String:
			key = []byte(x.Value(row))
		case *array.Binary:
			key = append([]byte{}, x.Value(row)...)
		case *array.Timestamp:
			key = strconv.AppendInt(nil, int64(x.Value(row)), 10)
		case *array.Date32:
			key = strconv.AppendInt(nil, int64(x.Value(row)), 10)
		case *array.Date64:
			key = strconv.AppendInt(nil, int64(x.Value(row)), 10)
		case *array.Float32:
			key = strconv.AppendFloat(nil, float64(x.Value(row)), 'g', -1, 32)
		case *array.Float64:
			key = strconv.AppendFloat(nil, x.Value(row), 'g', -1, 64)
		case *array.Decimal128:
			key = []byte(x.Value(row).ToString(x.DataType().(*arrow.Decimal128Type).Scale))
		default:
			key = []byte(a.ValueStr(row))
		}
	}
	if a, isTS := col("loam.timestamp").(*array.Timestamp); isTS && !a.IsNull(row) {
		return key, toMillis(int64(a.Value(row)), a.DataType().(*arrow.TimestampType).Unit), true
	}
	return key, 0, false
}
