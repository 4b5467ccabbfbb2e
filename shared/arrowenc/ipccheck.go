package arrowenc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	flatbuffers "github.com/google/flatbuffers/go"
)

// newIPCReader returns an Arrow IPC stream reader of b whose messages are bounded by b's
// length: no message's metadata or body can be longer than the stream itself. The bounds
// are set on the message reader: arrow-go's ipc.NewReader takes the size limit options but
// builds its message reader without them, so a corrupt body length would be allocated.
func newIPCReader(b []byte, opts ...ipc.Option) (*ipc.Reader, error) {
	limits := []ipc.Option{ipc.WithMetadataSizeLimit(int64(len(b))), ipc.WithBodySizeLimit(int64(len(b)))}
	mr := ipc.NewMessageReader(bytes.NewReader(b), append(limits, opts...)...)
	return ipc.NewReaderFromMessageReader(mr, opts...) // its Release releases mr
}

// checkSchemaMessage checks the first message of an Arrow IPC stream before arrow-go
// reads it: arrow-go allocates slices as long as the schema's field, child and metadata
// vector lengths say, so a few corrupt bytes could claim billions of fields. Every vector
// of the schema must fit in the message, and nesting is bounded by MaxDepth.
func checkSchemaMessage(b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed schema message (%v)", r)
		}
	}()
	if len(b) >= 4 && binary.LittleEndian.Uint32(b) == 0xFFFFFFFF {
		b = b[4:]
	}
	if len(b) < 4 {
		return errors.New("no schema message")
	}
	n := int(int32(binary.LittleEndian.Uint32(b)))
	if n < 4 || n > len(b)-4 {
		return fmt.Errorf("schema message length %d outside the %d bytes left", n, len(b)-4)
	}
	buf := b[4 : 4+n]
	msg := flatbuffers.Table{Bytes: buf, Pos: flatbuffers.GetUOffsetT(buf)}
	// Message: version 0, header_type 1, header 2, bodyLength 3, custom_metadata 4.
	if err := checkVector(&msg, 4, 4, n); err != nil {
		return err
	}
	if o := msg.Offset(6); o == 0 || msg.GetByte(flatbuffers.UOffsetT(o)+msg.Pos) != 1 {
		return errors.New("the first message is not a schema")
	}
	o := msg.Offset(8)
	if o == 0 {
		return errors.New("schema message without a schema")
	}
	var schema flatbuffers.Table
	msg.Union(&schema, flatbuffers.UOffsetT(o))
	// Schema: endianness 0, fields 1, custom_metadata 2, features 3.
	if err := checkVector(&schema, 2, 4, n); err != nil {
		return err
	}
	return checkFields(&schema, 1, n, 0)
}

// checkFields checks the vector of Field tables in slot of t, recursively.
func checkFields(t *flatbuffers.Table, slot int, n, depth int) error {
	if depth > MaxDepth+1 {
		return fmt.Errorf("fields nested deeper than %d", MaxDepth)
	}
	if err := checkVector(t, slot, 4, n); err != nil {
		return err
	}
	o := t.Offset(flatbuffers.VOffsetT(4 + 2*slot))
	if o == 0 {
		return nil
	}
	vec := t.Vector(flatbuffers.UOffsetT(o))
	for i := 0; i < t.VectorLen(flatbuffers.UOffsetT(o)); i++ {
		at := vec + flatbuffers.UOffsetT(4*i)
		f := flatbuffers.Table{Bytes: t.Bytes, Pos: t.Indirect(at)}
		// Field: name 0, nullable 1, type_type 2, type 3, dictionary 4, children 5,
		// custom_metadata 6.
		if err := checkVector(&f, 6, 4, n); err != nil {
			return err
		}
		if err := checkFields(&f, 5, n, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// checkVector checks that the vector in slot of t, if present, fits in the n-byte buffer
// with elements of size bytes.
func checkVector(t *flatbuffers.Table, slot, size, n int) error {
	o := t.Offset(flatbuffers.VOffsetT(4 + 2*slot))
	if o == 0 {
		return nil
	}
	l := t.VectorLen(flatbuffers.UOffsetT(o))
	start := int(t.Vector(flatbuffers.UOffsetT(o)))
	if l < 0 || l > n/size || start+l*size > n {
		return fmt.Errorf("a vector of %d entries does not fit in the %d-byte message", l, n)
	}
	return nil
}
