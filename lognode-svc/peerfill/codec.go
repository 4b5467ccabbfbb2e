package peerfill

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
)

// A frame carries committed chunks from the node that wrote them to a zone peer. Integers
// are big-endian:
//
//	magic     "LTF1"
//	count     u32                  chunks that follow (1..MaxChunks)
//	per chunk:
//	  stream     u64
//	  partition  i32
//	  base       i64                entry: first offset
//	  records    i64                entry: offsets it holds (>= 1)
//	  kind       u8                 entry: meta.EntryKind
//	  offset     i64                entry: byte offset of the chunk in its object
//	  length     i64                entry: chunk length in its object
//	  max_ts     i64                entry: largest record timestamp (ms)
//	  object_len u16, object        entry: the object key (1..MaxObjectKey bytes)
//	  data_len   u32, data          the chunk's RecordBatch v2 batches, base offsets patched
//
// The decoder checks every length against what remains, and every batch's CRC and offsets
// against its entry: a frame that does not decode whole is refused whole.
const (
	magic        = "LTF1"
	MaxChunks    = 1 << 16
	MaxObjectKey = 1024
	chunkFixed   = 8 + 4 + 8 + 8 + 1 + 8 + 8 + 8 + 2 + 4
)

// ErrFrame is wrapped by every decoding error.
var ErrFrame = errors.New("peerfill: bad frame")

// Chunk is one committed chunk: its index entry and its batches, in parts (the produce
// requests' own bytes, as the writer hands them over; Decode answers one part).
type Chunk struct {
	StreamID  uint64
	Partition int32
	Entry     meta.IndexEntry
	Batches   [][]byte
}

func (c Chunk) dataLen() int {
	n := 0
	for _, p := range c.Batches {
		n += len(p)
	}
	return n
}

func (c Chunk) size() int { return chunkFixed + len(c.Entry.Object) + c.dataLen() }

// Append appends the frame of chunks to dst.
func Append(dst []byte, chunks []Chunk) []byte {
	dst = append(dst, magic...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(chunks)))
	for _, c := range chunks {
		dst = binary.BigEndian.AppendUint64(dst, c.StreamID)
		dst = binary.BigEndian.AppendUint32(dst, uint32(c.Partition))
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.Entry.BaseOffset))
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.Entry.Count))
		dst = append(dst, byte(c.Entry.Kind))
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.Entry.Offset))
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.Entry.Length))
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.Entry.MaxTimestamp))
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(c.Entry.Object)))
		dst = append(dst, c.Entry.Object...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(c.dataLen()))
		for _, p := range c.Batches {
			dst = append(dst, p...)
		}
	}
	return dst
}

// Decode decodes a frame. Each chunk's Batches is one part, aliasing b.
func Decode(b []byte) ([]Chunk, error) {
	if len(b) < len(magic)+4 || string(b[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: no %q header", ErrFrame, magic)
	}
	n := binary.BigEndian.Uint32(b[len(magic):])
	b = b[len(magic)+4:]
	if n == 0 || n > MaxChunks {
		return nil, fmt.Errorf("%w: %d chunks (want 1..%d)", ErrFrame, n, MaxChunks)
	}
	// Each chunk takes at least chunkFixed bytes: a count the body cannot hold is refused
	// before anything is allocated for it.
	if uint64(n)*chunkFixed > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d chunks in %d bytes", ErrFrame, n, len(b))
	}
	out := make([]Chunk, 0, n)
	for i := range int(n) {
		if len(b) < chunkFixed {
			return nil, fmt.Errorf("%w: chunk %d: truncated header", ErrFrame, i)
		}
		var c Chunk
		c.StreamID = binary.BigEndian.Uint64(b)
		c.Partition = int32(binary.BigEndian.Uint32(b[8:]))
		c.Entry.BaseOffset = int64(binary.BigEndian.Uint64(b[12:]))
		c.Entry.Count = int64(binary.BigEndian.Uint64(b[20:]))
		c.Entry.Kind = meta.EntryKind(b[28])
		c.Entry.Offset = int64(binary.BigEndian.Uint64(b[29:]))
		c.Entry.Length = int64(binary.BigEndian.Uint64(b[37:]))
		c.Entry.MaxTimestamp = int64(binary.BigEndian.Uint64(b[45:]))
		ol := int(binary.BigEndian.Uint16(b[53:]))
		b = b[55:]
		if ol == 0 || ol > MaxObjectKey || len(b) < ol+4 {
			return nil, fmt.Errorf("%w: chunk %d: object key of %d bytes (want 1..%d, %d left)", ErrFrame, i, ol, MaxObjectKey, len(b))
		}
		c.Entry.Object = string(b[:ol])
		dl := uint64(binary.BigEndian.Uint32(b[ol:]))
		b = b[ol+4:]
		if dl == 0 || dl > uint64(len(b)) {
			return nil, fmt.Errorf("%w: chunk %d: %d data bytes, %d left", ErrFrame, i, dl, len(b))
		}
		c.Batches, b = [][]byte{b[:dl:dl]}, b[dl:]
		if err := check(c); err != nil {
			return nil, fmt.Errorf("%w: chunk %d (stream %d partition %d): %v", ErrFrame, i, c.StreamID, c.Partition, err)
		}
		out = append(out, c)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last chunk", ErrFrame, len(b))
	}
	return out, nil
}

// check verifies that c's batches parse (CRC included) and hold exactly the entry's
// offsets, in order.
func check(c Chunk) error {
	e := c.Entry
	if c.Partition < 0 || e.BaseOffset < 0 || e.Count < 1 || e.BaseOffset > (1<<62) || e.Count > (1<<62) || e.Offset < 0 || e.Length < 0 {
		return fmt.Errorf("entry base %d count %d offset %d length %d out of range", e.BaseOffset, e.Count, e.Offset, e.Length)
	}
	if e.Kind != meta.KindWAL {
		return fmt.Errorf("entry kind %d: only WAL chunks are filled", e.Kind)
	}
	next := e.BaseOffset
	for rest := c.Batches[0]; len(rest) > 0; {
		bt, r, err := recordbatch.Parse(rest)
		if err != nil {
			return err
		}
		if bt.BaseOffset != next {
			return fmt.Errorf("batch at base offset %d, want %d", bt.BaseOffset, next)
		}
		next = bt.LastOffset() + 1
		rest = r
	}
	if next != e.End() {
		return fmt.Errorf("batches end at offset %d, entry at %d", next, e.End())
	}
	return nil
}
