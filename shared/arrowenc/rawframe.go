package arrowenc

import (
	"encoding/binary"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"
)

// Stored frames as their bytes, for serving them without decoding (Arrow Flight DoGet):
// SplitPayload cuts a chunk payload into its frames, FrameMessages cuts a frame's IPC
// stream into its record batch messages. Both only read the framing and the few
// flatbuffer fields they need (a message's type and body length, a batch's row count),
// bounds-checked; the arrays are not read. A caller that needs the values decodes the
// frame (DecodePayload).

// RawFrame is one frame of a chunk payload: its header, its bytes (header included, a
// payload DecodePayload reads alone) and its IPC stream, aliasing the payload.
type RawFrame struct {
	FrameHeader
	Bytes []byte
	IPC   []byte
}

// SplitPayload cuts p into its frames, checking each header.
func SplitPayload(p []byte) ([]RawFrame, error) {
	var out []RawFrame
	for off := 0; off < len(p); {
		h, err := ParseFrameHeader(p[off:])
		if err != nil {
			return nil, fmt.Errorf("frame at byte %d: %w", off, err)
		}
		n := FrameHeaderSize + int(h.IPCLen)
		out = append(out, RawFrame{FrameHeader: h, Bytes: p[off : off+n], IPC: p[off+FrameHeaderSize : off+n]})
		off += n
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty payload", ErrCorrupt)
	}
	return out, nil
}

// RawBatch is one record batch message of an IPC stream: its flatbuffer metadata (a
// FlightData's data_header), its body (data_body) and its row count.
type RawBatch struct {
	Meta []byte
	Body []byte
	Rows int64
}

// Arrow IPC message header types (Message.header_type).
const (
	msgSchema      = 1
	msgRecordBatch = 3
)

// FrameMessages cuts an IPC stream (a frame's) into its record batch messages. The
// stream must be a schema message, record batches and the end-of-stream marker (what
// EncodePayload writes); anything else, or messages that do not fit, is ErrCorrupt.
func FrameMessages(b []byte) (out []RawBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("%w: arrow ipc: malformed message (%v)", ErrCorrupt, r)
		}
	}()
	for i := 0; ; i++ {
		if len(b) == 0 {
			return nil, fmt.Errorf("%w: arrow ipc: no end-of-stream marker", ErrCorrupt)
		}
		if len(b) < 8 || binary.LittleEndian.Uint32(b) != 0xFFFFFFFF {
			return nil, fmt.Errorf("%w: arrow ipc: message %d: no continuation marker", ErrCorrupt, i)
		}
		n := int64(binary.LittleEndian.Uint32(b[4:]))
		if n == 0 {
			if len(b) != 8 {
				return nil, fmt.Errorf("%w: arrow ipc: %d bytes after the end-of-stream marker", ErrCorrupt, len(b)-8)
			}
			if i == 0 {
				return nil, fmt.Errorf("%w: arrow ipc: no schema message", ErrCorrupt)
			}
			return out, nil
		}
		if n < 8 || n > int64(len(b)-8) {
			return nil, fmt.Errorf("%w: arrow ipc: message %d: metadata length %d, %d bytes left", ErrCorrupt, i, n, len(b)-8)
		}
		meta := b[8 : 8+n]
		msg := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
		if int(msg.Pos) >= len(meta) {
			return nil, fmt.Errorf("%w: arrow ipc: message %d: bad root offset", ErrCorrupt, i)
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
		rest := int64(len(b)) - 8 - n
		if bodyLen < 0 || bodyLen > rest {
			return nil, fmt.Errorf("%w: arrow ipc: message %d: body length %d, %d bytes left", ErrCorrupt, i, bodyLen, rest)
		}
		switch {
		case i == 0 && typ != msgSchema:
			return nil, fmt.Errorf("%w: arrow ipc: the first message is of type %d, not a schema", ErrCorrupt, typ)
		case i > 0 && typ != msgRecordBatch:
			return nil, fmt.Errorf("%w: arrow ipc: message %d is of type %d, not a record batch", ErrCorrupt, i, typ)
		case i > 0:
			o := msg.Offset(8)
			if o == 0 {
				return nil, fmt.Errorf("%w: arrow ipc: message %d: a record batch without its header", ErrCorrupt, i)
			}
			var rb flatbuffers.Table
			msg.Union(&rb, flatbuffers.UOffsetT(o))
			var rows int64
			// RecordBatch: length 0, nodes 1, buffers 2, compression 3.
			if o := rb.Offset(4); o != 0 {
				rows = rb.GetInt64(flatbuffers.UOffsetT(o) + rb.Pos)
			}
			if o := rb.Offset(10); o != 0 {
				return nil, fmt.Errorf("%w: arrow ipc: message %d: a compressed record batch", ErrCorrupt, i)
			}
			if rows < 0 {
				return nil, fmt.Errorf("%w: arrow ipc: message %d: %d rows", ErrCorrupt, i, rows)
			}
			out = append(out, RawBatch{Meta: meta, Body: b[8+n : 8+n+bodyLen], Rows: rows})
		}
		b = b[8+n+bodyLen:]
	}
}
