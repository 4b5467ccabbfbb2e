package arrowenc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	flatbuffers "github.com/google/flatbuffers/go"
)

// MaxDecompressed bounds what the compressed buffers (LZ4 or ZSTD) of a client's Arrow
// IPC stream may decompress to, all batches together: arrow-go allocates the size each
// compressed buffer claims before it decompresses it.
const MaxDecompressed = 64 << 20

// checkBodies walks the messages of an Arrow IPC stream before arrow-go reads its record
// batches: every batch must describe the field nodes and buffers the schema's layout
// needs (lay, from layoutOf: arrow-go reads them by index without checking the vectors'
// lengths), its buffers must lie within its body, and the sizes its compressed buffers
// claim must add up to at most maxDecompressed (0: no compressed batch is accepted).
// Dictionary batches are refused (the schema model has no dictionary types). Only the
// framing and the batches' descriptors are read.
func checkBodies(b []byte, lay layout, maxDecompressed int64) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed message (%v)", r)
		}
	}()
	var decompressed int64
	for i := 0; len(b) > 0; i++ {
		if len(b) < 8 {
			return fmt.Errorf("message %d: %d bytes, shorter than a message prefix", i, len(b))
		}
		var n int64
		if binary.LittleEndian.Uint32(b) == 0xFFFFFFFF {
			n, b = int64(binary.LittleEndian.Uint32(b[4:])), b[8:]
		} else {
			n, b = int64(binary.LittleEndian.Uint32(b)), b[4:] // the format before Arrow 0.15
		}
		if n == 0 {
			return nil // end of stream
		}
		if n < 4 || n > int64(len(b)) {
			return fmt.Errorf("message %d: metadata length %d, %d bytes left", i, n, len(b))
		}
		meta := b[:n]
		msg := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
		if int64(msg.Pos) >= n {
			return fmt.Errorf("message %d: bad root offset", i)
		}
		// Message: version 0, header_type 1, header 2, bodyLength 3.
		var typ byte
		if o := msg.Offset(6); o != 0 {
			typ = msg.GetByte(flatbuffers.UOffsetT(o) + msg.Pos)
		}
		var bodyLen int64
		if o := msg.Offset(10); o != 0 {
			bodyLen = msg.GetInt64(flatbuffers.UOffsetT(o) + msg.Pos)
		}
		if bodyLen < 0 || bodyLen > int64(len(b))-n {
			return fmt.Errorf("message %d: body length %d, %d bytes left", i, bodyLen, int64(len(b))-n)
		}
		body := b[n : n+bodyLen]
		switch typ {
		case msgDictionaryBatch:
			return fmt.Errorf("message %d: a dictionary batch (no column of the schema has a dictionary)", i)
		case msgRecordBatch:
			o := msg.Offset(8)
			if o == 0 {
				return fmt.Errorf("message %d: a record batch without its header", i)
			}
			var rb flatbuffers.Table
			msg.Union(&rb, flatbuffers.UOffsetT(o))
			// RecordBatch: length 0, nodes 1 (structs of 16 bytes), buffers 2 (16 bytes).
			if err := checkVector(&rb, 1, 16, int(n)); err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			if got := vectorLen(&rb, 1); got < lay.nodes {
				return fmt.Errorf("message %d: a record batch of %d field nodes, the schema's columns need %d", i, got, lay.nodes)
			}
			if err := checkVector(&rb, 2, 16, int(n)); err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			if got := vectorLen(&rb, 2); got < lay.buffers {
				return fmt.Errorf("message %d: a record batch of %d buffers, the schema's columns need %d", i, got, lay.buffers)
			}
			d, err := checkBatchBuffers(&rb, body, int(n), maxDecompressed-decompressed)
			if err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			decompressed += d
		}
		b = b[n+bodyLen:]
	}
	return nil
}

const msgDictionaryBatch = 2

func vectorLen(t *flatbuffers.Table, slot int) int {
	o := t.Offset(flatbuffers.VOffsetT(4 + 2*slot))
	if o == 0 {
		return 0
	}
	return t.VectorLen(flatbuffers.UOffsetT(o))
}

// layout is the field nodes and buffers a record batch of a schema describes.
type layout struct{ nodes, buffers int }

// layoutOf returns what a record batch of as describes, for the types of the schema
// model (as arrow-go's IPC reader loads them): one field node per column and nested
// field; buffers: fixed-width and bool columns 2 (validity, values), utf8 and binary 3
// (validity, offsets, data), lists 2 plus their items', structs 1 plus their members'.
// Other types are refused.
func layoutOf(as *arrow.Schema) (layout, error) {
	var l layout
	for _, f := range as.Fields() {
		if err := l.add(f.Type, f.Name, 0); err != nil {
			return layout{}, err
		}
	}
	return l, nil
}

func (l *layout) add(t arrow.DataType, path string, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%s: nested deeper than %d", path, MaxDepth)
	}
	l.nodes++
	switch t := t.(type) {
	case *arrow.StringType, *arrow.BinaryType:
		l.buffers += 3
	case *arrow.ListType:
		l.buffers += 2
		return l.add(t.Elem(), path+"[]", depth+1)
	case *arrow.StructType:
		l.buffers++
		for _, f := range t.Fields() {
			if err := l.add(f.Type, path+"."+f.Name, depth+1); err != nil {
				return err
			}
		}
	case *arrow.BooleanType, *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type, *arrow.Float32Type,
		*arrow.Float64Type, *arrow.TimestampType, *arrow.Date32Type, *arrow.Date64Type, *arrow.Decimal128Type:
		l.buffers += 2
	default:
		return fmt.Errorf("%s: arrow type %s is not supported", path, t)
	}
	return nil
}

var errCompressed = errors.New("a compressed record batch")

// checkBatchBuffers checks a RecordBatch table's buffers against its body and returns
// what its compressed buffers claim to decompress to (at most budget).
func checkBatchBuffers(rb *flatbuffers.Table, body []byte, metaLen int, budget int64) (int64, error) {
	// RecordBatch: length 0, nodes 1, buffers 2, compression 3.
	if err := checkVector(rb, 2, 16, metaLen); err != nil {
		return 0, err
	}
	compressed := rb.Offset(10) != 0
	o := rb.Offset(8)
	if o == 0 {
		return 0, nil
	}
	vec := rb.Vector(flatbuffers.UOffsetT(o))
	var total int64
	for j := 0; j < rb.VectorLen(flatbuffers.UOffsetT(o)); j++ {
		at := vec + flatbuffers.UOffsetT(16*j)
		off := rb.GetInt64(at)
		length := rb.GetInt64(at + 8)
		if off < 0 || length < 0 || off > int64(len(body)) || length > int64(len(body))-off {
			return 0, fmt.Errorf("buffer %d at [%d, +%d) outside the %d-byte body", j, off, length, len(body))
		}
		if !compressed || length == 0 {
			continue
		}
		if budget <= 0 {
			return 0, fmt.Errorf("%w: compressed record batches are not accepted here", errCompressed)
		}
		if length < 8 {
			return 0, fmt.Errorf("compressed buffer %d of %d bytes has no size prefix", j, length)
		}
		size := int64(binary.LittleEndian.Uint64(body[off:]))
		if size == -1 {
			continue // stored uncompressed
		}
		if size < 0 || size > budget-total {
			return 0, fmt.Errorf("compressed buffer %d would decompress to %d bytes: the stream's buffers may decompress to %d bytes in all", j, size, MaxDecompressed)
		}
		total += size
	}
	return total, nil
}

// checkArrayBuffers checks that a's buffers hold what its length and offset need, for
// the types of the schema model: the validity bitmap, bool bits, fixed-width values,
// utf8/binary and list offsets, and struct members, recursively. arrow-go's ValidateFull
// checks variable-length offsets against their data but not every buffer's size, and the
// value accessors index without bounds checks of their own.
func checkArrayBuffers(a arrow.ArrayData) error {
	n := int64(a.Offset()) + int64(a.Len())
	bufs := a.Buffers()
	need := func(i int, size int64, what string) error {
		var got int64
		if i < len(bufs) && bufs[i] != nil {
			got = int64(bufs[i].Len())
		}
		if got < size {
			return fmt.Errorf("%s buffer of %d bytes, %d rows need %d", what, got, n, size)
		}
		return nil
	}
	// A validity bitmap is read when present, and counted when the null count is unknown
	// (-1, which the IPC reader may carry) or not 0.
	if a.NullN() != 0 || len(bufs) > 0 && bufs[0] != nil && bufs[0].Len() > 0 {
		if err := need(0, int64(bitutil.BytesForBits(n)), "validity"); err != nil {
			return err
		}
	}
	if a.Len() == 0 {
		return nil
	}
	switch t := a.DataType().(type) {
	case *arrow.BooleanType:
		return need(1, int64(bitutil.BytesForBits(n)), "bool values")
	case *arrow.StringType, *arrow.BinaryType:
		return need(1, 4*(n+1), "offsets")
	case *arrow.ListType:
		if err := need(1, 4*(n+1), "list offsets"); err != nil {
			return err
		}
		return checkChildren(a)
	case *arrow.StructType:
		for i, c := range a.Children() {
			if int64(c.Len()) < n {
				return fmt.Errorf("struct member %d: %d values, want %d", i, c.Len(), n)
			}
		}
		return checkChildren(a)
	case arrow.FixedWidthDataType:
		return need(1, int64(t.BitWidth()/8)*n, t.String()+" values")
	}
	return nil
}

func checkChildren(a arrow.ArrayData) error {
	for i, c := range a.Children() {
		if err := checkArrayBuffers(c); err != nil {
			return fmt.Errorf("child %d: %w", i, err)
		}
	}
	return nil
}
