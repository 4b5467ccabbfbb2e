package arrowenc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Column chunks: how an arrow segment stores one column of a group of record batches
// (shared/segfmt keeps the chunks of a group back to back, one per column, with each
// chunk's byte range and CRC in its column-ranges section). A chunk holds the column's
// Arrow buffers exactly as the IPC record batches held them, uncompressed, concatenated
// in batch order; nothing is re-encoded value by value. A chunk is self-describing given
// the column's Arrow type:
//
//	uvarint  B, the record batches (>= 1)
//	B times, the column's nodes depth first (the column, then its children in order):
//	  uvarint length (values), uvarint null count,
//	  one uvarint per buffer of the node's type: its length in bytes
//	zero padding to a multiple of 8
//	B times, every buffer of the walk in the same order, each zero-padded to a multiple of 8
//
// so a chunk's length is a multiple of 8 and, read into an 8-aligned slice, every buffer
// is 8-aligned. Buffers per node: 1 for a struct (validity), 2 for a list (validity,
// offsets), 3 for utf8 and binary (validity, offsets, data), 2 for every other type of the
// schema model (validity, values). A validity buffer of length 0 means no nulls.
const ColumnChunkVersion = 1

// ErrColumnChunk is wrapped by every error about a malformed column chunk.
var ErrColumnChunk = errors.New("arrowenc: corrupt column chunk")

// maxColumnNodes bounds the nodes of one column (its type's depth-first walk), as
// MaxDepth bounds nesting.
const maxColumnNodes = 1 << 12

// buffersOf returns how many buffers a node of type t has, or an error for a type
// outside the schema model.
func buffersOf(t arrow.DataType) (int, error) {
	switch t.ID() {
	case arrow.STRUCT:
		return 1, nil
	case arrow.LIST:
		return 2, nil
	case arrow.STRING, arrow.BINARY:
		return 3, nil
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32,
		arrow.UINT64, arrow.FLOAT32, arrow.FLOAT64, arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64, arrow.DECIMAL128:
		return 2, nil
	}
	return 0, fmt.Errorf("arrowenc: column chunks of type %v are not supported", t)
}

// children returns the child types of t (list item, struct members).
func children(t arrow.DataType) []arrow.DataType {
	switch x := t.(type) {
	case *arrow.ListType:
		return []arrow.DataType{x.Elem()}
	case *arrow.StructType:
		out := make([]arrow.DataType, x.NumFields())
		for i, f := range x.Fields() {
			out[i] = f.Type
		}
		return out
	}
	return nil
}

// AppendColumnChunk appends the column chunk of cols, one array per record batch of a
// group (as an IPC reader returns them: offset 0, of the same type), to dst.
func AppendColumnChunk(dst []byte, cols []arrow.Array) ([]byte, error) {
	if len(cols) == 0 {
		return nil, errors.New("arrowenc: column chunk of no batches")
	}
	t := cols[0].DataType()
	start := len(dst)
	dst = binary.AppendUvarint(dst, uint64(len(cols)))
	var bufs [][]byte
	var walk func(d arrow.ArrayData) error
	walk = func(d arrow.ArrayData) error {
		if d.Offset() != 0 {
			return fmt.Errorf("arrowenc: column chunk of a sliced array (offset %d)", d.Offset())
		}
		n, err := buffersOf(d.DataType())
		if err != nil {
			return err
		}
		if len(d.Buffers()) != n {
			return fmt.Errorf("arrowenc: %v array with %d buffers, want %d", d.DataType(), len(d.Buffers()), n)
		}
		dst = binary.AppendUvarint(dst, uint64(d.Len()))
		dst = binary.AppendUvarint(dst, uint64(d.NullN()))
		for i, b := range d.Buffers() {
			var p []byte
			if b != nil {
				p = b.Bytes()
			}
			if i == 0 && d.NullN() == 0 {
				p = nil // no nulls: no validity bitmap
			}
			dst = binary.AppendUvarint(dst, uint64(len(p)))
			bufs = append(bufs, p)
		}
		if len(d.Children()) != len(children(d.DataType())) {
			return fmt.Errorf("arrowenc: %v array with %d children", d.DataType(), len(d.Children()))
		}
		for _, c := range d.Children() {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	for i, c := range cols {
		if !arrow.TypeEqual(c.DataType(), t) {
			return nil, fmt.Errorf("arrowenc: column chunk: batch %d has type %v, batch 0 %v", i, c.DataType(), t)
		}
		if err := walk(c.Data()); err != nil {
			return nil, err
		}
	}
	dst = pad8(dst, start)
	for _, b := range bufs {
		dst = append(dst, b...)
		dst = pad8(dst, start)
	}
	return dst, nil
}

func pad8(dst []byte, start int) []byte {
	for (len(dst)-start)%8 != 0 {
		dst = append(dst, 0)
	}
	return dst
}

// DecodeColumnChunk decodes a column chunk of Arrow type t into one array per record
// batch. The arrays alias b (keep b unchanged while they live); the caller releases them.
// Every length is checked against b and every array is validated (offsets within their
// data, children as long as they must be), so a corrupt chunk fails with ErrColumnChunk
// and never panics.
func DecodeColumnChunk(b []byte, t arrow.DataType) (out []arrow.Array, err error) {
	defer func() {
		if r := recover(); r != nil {
			for _, a := range out {
				a.Release()
			}
			out, err = nil, fmt.Errorf("%w: malformed (%v)", ErrColumnChunk, r)
		}
	}()
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("%w: length %d is not a multiple of 8", ErrColumnChunk, len(b))
	}
	r := bytes.NewReader(b)
	uv := func(what string) (int, error) {
		v, err := binary.ReadUvarint(r)
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %v", ErrColumnChunk, what, err)
		}
		if v > uint64(len(b))*8+8 || v > math.MaxInt32 {
			// No count or length can exceed the chunk's bits (a bitmap of v values needs v/8
			// bytes; a value count with zero-width data is bounded the same way).
			return 0, fmt.Errorf("%w: %s %d too large for a chunk of %d bytes", ErrColumnChunk, what, v, len(b))
		}
		return int(v), nil
	}
	nb, err := uv("batch count")
	if err != nil {
		return nil, err
	}
	if nb < 1 {
		return nil, fmt.Errorf("%w: no batches", ErrColumnChunk)
	}
	type node struct {
		t           arrow.DataType
		length, nul int
		bufs        []int // buffer lengths
	}
	// The node shape of t, depth first; the same for every batch.
	var shape []arrow.DataType
	var walkType func(t arrow.DataType, depth int) error
	walkType = func(t arrow.DataType, depth int) error {
		if depth > MaxDepth+1 || len(shape) >= maxColumnNodes {
			return fmt.Errorf("arrowenc: type %v nests too deep", t)
		}
		if _, err := buffersOf(t); err != nil {
			return err
		}
		shape = append(shape, t)
		for _, c := range children(t) {
			if err := walkType(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walkType(t, 0); err != nil {
		return nil, err
	}
	if nb > len(b)/len(shape) {
		return nil, fmt.Errorf("%w: %d batches cannot fit %d bytes", ErrColumnChunk, nb, len(b))
	}
	nodes := make([]node, 0, nb*len(shape))
	total := 0
	for k := 0; k < nb; k++ {
		for _, nt := range shape {
			nd := node{t: nt}
			if nd.length, err = uv("node length"); err != nil {
				return nil, err
			}
			if nd.nul, err = uv("null count"); err != nil {
				return nil, err
			}
			if nd.nul > nd.length {
				return nil, fmt.Errorf("%w: null count %d above length %d", ErrColumnChunk, nd.nul, nd.length)
			}
			nbuf, _ := buffersOf(nt)
			for range nbuf {
				n, err := uv("buffer length")
				if err != nil {
					return nil, err
				}
				total += (n + 7) &^ 7
				if total > len(b) {
					return nil, fmt.Errorf("%w: buffers of %d bytes or more in a chunk of %d", ErrColumnChunk, total, len(b))
				}
				nd.bufs = append(nd.bufs, n)
			}
			nodes = append(nodes, nd)
		}
	}
	descEnd := len(b) - r.Len()
	pos := (descEnd + 7) &^ 7
	if pos+total != len(b) {
		return nil, fmt.Errorf("%w: descriptors end at %d and buffers take %d bytes, chunk has %d", ErrColumnChunk, descEnd, total, len(b))
	}
	for i := descEnd; i < pos; i++ {
		if b[i] != 0 {
			return nil, fmt.Errorf("%w: padding not zero", ErrColumnChunk)
		}
	}
	next := 0 // next node
	var build func() (arrow.ArrayData, error)
	build = func() (arrow.ArrayData, error) {
		nd := nodes[next]
		next++
		bufs := make([]*memory.Buffer, len(nd.bufs))
		for i, n := range nd.bufs {
			if i == 0 && n == 0 {
				if nd.nul != 0 {
					return nil, fmt.Errorf("%w: %d nulls without a validity bitmap", ErrColumnChunk, nd.nul)
				}
				continue
			}
			bufs[i] = memory.NewBufferBytes(b[pos : pos+n : pos+n])
			pos += (n + 7) &^ 7
		}
		if nd.bufs[0] > 0 && nd.bufs[0]*8 < nd.length {
			return nil, fmt.Errorf("%w: validity bitmap of %d bytes for %d values", ErrColumnChunk, nd.bufs[0], nd.length)
		}
		var kids []arrow.ArrayData
		for range children(nd.t) {
			c, err := build()
			if err != nil {
				for _, k := range kids {
					k.Release()
				}
				return nil, err
			}
			kids = append(kids, c)
		}
		if err := checkNode(nd.t, nd.length, nd.bufs, kids); err != nil {
			return nil, err
		}
		d := array.NewData(nd.t, nd.length, bufs, kids, nd.nul, 0)
		for _, k := range kids {
			k.Release()
		}
		return d, nil
	}
	out = make([]arrow.Array, 0, nb)
	for k := 0; k < nb; k++ {
		d, err := build()
		if err != nil {
			for _, a := range out {
				a.Release()
			}
			return nil, err
		}
		a := array.MakeFromData(d)
		d.Release()
		if err := validateArray(a); err != nil {
			a.Release()
			for _, a := range out {
				a.Release()
			}
			return nil, fmt.Errorf("%w: batch %d: %v", ErrColumnChunk, k, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// checkNode checks a node's buffer lengths against its length before arrow-go reads
// them (its constructors index the buffers without checks).
func checkNode(t arrow.DataType, n int, bufs []int, kids []arrow.ArrayData) error {
	need := func(i, want int, what string) error {
		if bufs[i] < want {
			return fmt.Errorf("%w: %v node of %d values: %s buffer of %d bytes, need %d", ErrColumnChunk, t, n, what, bufs[i], want)
		}
		return nil
	}
	switch t.ID() {
	case arrow.STRUCT:
		for i, k := range kids {
			if k.Len() < n {
				return fmt.Errorf("%w: struct member %d: %d values, want %d", ErrColumnChunk, i, k.Len(), n)
			}
		}
		return nil
	case arrow.LIST, arrow.STRING, arrow.BINARY:
		if n == 0 {
			return nil
		}
		return need(1, 4*(n+1), "offsets")
	case arrow.BOOL:
		return need(1, (n+7)/8, "values")
	}
	w := t.(arrow.FixedWidthDataType).BitWidth() / 8
	return need(1, w*n, "values")
}

// SchemaBytes encodes as as an Arrow IPC stream holding only the schema message (and
// the end-of-stream marker): what an arrow segment keeps of each schema version.
func SchemaBytes(as *arrow.Schema) []byte {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(as), ipc.WithAllocator(memory.DefaultAllocator))
	if err := w.Close(); err != nil {
		panic("arrowenc: encode schema: " + err.Error())
	}
	return buf.Bytes()
}

// DecodeSchemaBytes decodes what SchemaBytes encoded (any Arrow IPC stream's schema),
// checking the schema message's vector lengths first (ipccheck.go).
func DecodeSchemaBytes(b []byte) (as *arrow.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			as, err = nil, fmt.Errorf("%w: schema: malformed (%v)", ErrCorrupt, r)
		}
	}()
	if err := checkSchemaMessage(b); err != nil {
		return nil, fmt.Errorf("%w: schema: %v", ErrCorrupt, err)
	}
	r, err := newIPCReader(b, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("%w: schema: %v", ErrCorrupt, err)
	}
	defer r.Release()
	for _, f := range r.Schema().Fields() {
		if err := checkType(f.Type, 0); err != nil {
			return nil, fmt.Errorf("%w: schema: field %s: %v", ErrCorrupt, f.Name, err)
		}
	}
	return r.Schema(), nil
}

func checkType(t arrow.DataType, depth int) error {
	if depth > MaxDepth+1 {
		return errors.New("nests too deep")
	}
	if _, err := buffersOf(t); err != nil {
		return err
	}
	for _, c := range children(t) {
		if err := checkType(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}
