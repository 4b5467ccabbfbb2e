package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/loamhq/loam/shared/meta"
)

// ErrBadEntry: a Raft entry of the journal does not decode.
var ErrBadEntry = errors.New("journal: bad entry")

// Entry kinds.
const (
	KindAppend byte = 1 // batches appended to a partition
	KindTrim   byte = 2 // a partition's journal entries below an offset offloaded to a segment
	KindAssign byte = 3 // a stream's partitions placed in the journal (or, at 0, removed)
)

// EntryVersion is the entry format's version byte.
const EntryVersion byte = 1

// Entry layouts (big-endian). Every entry starts with the version byte (1) and its kind.
//
//	Append (kind 1):
//	  0  u8   version
//	  1  u8   kind = 1
//	  2  u64  stream id
//	  10 u32  partition
//	  14 i64  producer id (<= 0: none)
//	  22 i16  producer epoch
//	  24 i32  base sequence
//	  28 i64  clock: the proposing leader's wall clock, unix ms
//	  36 u64  request id: the same on every retry of one append (0: none), see State
//	  44 u32  n: length of the batches
//	  48 n    RecordBatch v2 batches, concatenated
//
//	Trim (kind 2):
//	  0  u8   version
//	  1  u8   kind = 2
//	  2  u64  stream id
//	  10 u32  partition
//	  14 i64  clock
//	  22 i64  offset: entries wholly below it leave the journal
//	  30 i64  segment base offset
//	  38 i64  segment end offset (exclusive)
//	  46 u16  k: length of the segment's object key
//	  48 k    object key
//
//	Assign (kind 3):
//	  0  u8   version
//	  1  u8   kind = 3
//	  2  u64  stream id
//	  10 u32  partitions: the stream's partitions 0..n-1 are in the journal, others not
//	  14 i64  clock
const (
	appendHeader = 48
	trimHeader   = 48
	assignSize   = 22
)

// Assign is an Assign entry.
type Assign struct {
	Stream     uint64
	Partitions uint32
	ClockMs    int64
}

// AssignEntry appends the encoding of a to dst.
func AssignEntry(dst []byte, a Assign) []byte {
	dst = append(dst, EntryVersion, KindAssign)
	dst = binary.BigEndian.AppendUint64(dst, a.Stream)
	dst = binary.BigEndian.AppendUint32(dst, a.Partitions)
	return binary.BigEndian.AppendUint64(dst, uint64(a.ClockMs))
}

// DecodeAssign decodes an Assign entry.
func DecodeAssign(b []byte) (Assign, error) {
	if k, err := EntryKind(b); err != nil {
		return Assign{}, err
	} else if k != KindAssign {
		return Assign{}, fmt.Errorf("%w: kind %d, want assign (%d)", ErrBadEntry, k, KindAssign)
	}
	if len(b) != assignSize {
		return Assign{}, fmt.Errorf("%w: assign entry of %d bytes, want %d", ErrBadEntry, len(b), assignSize)
	}
	a := Assign{Stream: binary.BigEndian.Uint64(b[2:]), Partitions: binary.BigEndian.Uint32(b[10:]), ClockMs: int64(binary.BigEndian.Uint64(b[14:]))}
	if a.Partitions > meta.MaxPartitions {
		return Assign{}, fmt.Errorf("%w: assign of %d partitions, at most %d", ErrBadEntry, a.Partitions, meta.MaxPartitions)
	}
	return a, nil
}

// Partition names one partition of one stream.
type Partition struct {
	Stream    uint64
	Partition uint32
}

func (p Partition) String() string {
	return fmt.Sprintf("stream %d partition %d", p.Stream, p.Partition)
}

// Append is an Append entry.
type Append struct {
	Partition
	Producer meta.ChunkProducer
	ClockMs  int64
	// RequestID identifies one append across its retries (0: none): a retry of an append
	// the journal committed is answered with its first result and writes nothing.
	RequestID uint64
	Batches   []byte
}

// Trim is a Trim entry: the journal's entries of the partition wholly below Offset are
// in the segment Segment and leave the journal.
type Trim struct {
	Partition
	ClockMs int64
	Offset  int64
	Segment SegmentRef
}

// SegmentRef points at an offloaded segment: its object key and offsets [Base, End).
type SegmentRef struct {
	Key  string
	Base int64
	End  int64
}

// AppendEntry appends the encoding of a to dst.
func AppendEntry(dst []byte, a Append) []byte {
	dst = append(dst, EntryVersion, KindAppend)
	dst = binary.BigEndian.AppendUint64(dst, a.Stream)
	dst = binary.BigEndian.AppendUint32(dst, a.Partition.Partition)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.Producer.ID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(a.Producer.Epoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(a.Producer.BaseSequence))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.ClockMs))
	dst = binary.BigEndian.AppendUint64(dst, a.RequestID)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(a.Batches)))
	return append(dst, a.Batches...)
}

// TrimEntry appends the encoding of t to dst.
func TrimEntry(dst []byte, t Trim) []byte {
	dst = append(dst, EntryVersion, KindTrim)
	dst = binary.BigEndian.AppendUint64(dst, t.Stream)
	dst = binary.BigEndian.AppendUint32(dst, t.Partition.Partition)
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.ClockMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.Offset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.Segment.Base))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.Segment.End))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(t.Segment.Key)))
	return append(dst, t.Segment.Key...)
}

// EntryKind checks b's version and returns its kind.
func EntryKind(b []byte) (byte, error) {
	if len(b) < 2 {
		return 0, fmt.Errorf("%w: %d bytes, need 2 for version and kind", ErrBadEntry, len(b))
	}
	if b[0] != EntryVersion {
		return 0, fmt.Errorf("%w: version %d, want %d", ErrBadEntry, b[0], EntryVersion)
	}
	if b[1] != KindAppend && b[1] != KindTrim && b[1] != KindAssign {
		return 0, fmt.Errorf("%w: kind %d is not append (%d), trim (%d) or assign (%d)", ErrBadEntry, b[1], KindAppend, KindTrim, KindAssign)
	}
	return b[1], nil
}

// DecodeAppend decodes an Append entry. Batches aliases b. The batches themselves are
// checked when the entry is applied.
func DecodeAppend(b []byte) (Append, error) {
	if k, err := EntryKind(b); err != nil {
		return Append{}, err
	} else if k != KindAppend {
		return Append{}, fmt.Errorf("%w: kind %d, want append (%d)", ErrBadEntry, k, KindAppend)
	}
	if len(b) < appendHeader {
		return Append{}, fmt.Errorf("%w: append entry of %d bytes, header needs %d", ErrBadEntry, len(b), appendHeader)
	}
	a := Append{
		Partition: Partition{Stream: binary.BigEndian.Uint64(b[2:]), Partition: binary.BigEndian.Uint32(b[10:])},
		Producer: meta.ChunkProducer{ID: int64(binary.BigEndian.Uint64(b[14:])), Epoch: int16(binary.BigEndian.Uint16(b[22:])),
			BaseSequence: int32(binary.BigEndian.Uint32(b[24:]))},
		ClockMs:   int64(binary.BigEndian.Uint64(b[28:])),
		RequestID: binary.BigEndian.Uint64(b[36:]),
	}
	n := binary.BigEndian.Uint32(b[44:])
	if uint64(n) != uint64(len(b)-appendHeader) {
		return Append{}, fmt.Errorf("%w: append entry says %d bytes of batches, has %d", ErrBadEntry, n, len(b)-appendHeader)
	}
	if n == 0 {
		return Append{}, fmt.Errorf("%w: append entry without batches", ErrBadEntry)
	}
	a.Batches = b[appendHeader:]
	return a, nil
}

// DecodeTrim decodes a Trim entry.
func DecodeTrim(b []byte) (Trim, error) {
	if k, err := EntryKind(b); err != nil {
		return Trim{}, err
	} else if k != KindTrim {
		return Trim{}, fmt.Errorf("%w: kind %d, want trim (%d)", ErrBadEntry, k, KindTrim)
	}
	if len(b) < trimHeader {
		return Trim{}, fmt.Errorf("%w: trim entry of %d bytes, header needs %d", ErrBadEntry, len(b), trimHeader)
	}
	t := Trim{
		Partition: Partition{Stream: binary.BigEndian.Uint64(b[2:]), Partition: binary.BigEndian.Uint32(b[10:])},
		ClockMs:   int64(binary.BigEndian.Uint64(b[14:])),
		Offset:    int64(binary.BigEndian.Uint64(b[22:])),
		Segment:   SegmentRef{Base: int64(binary.BigEndian.Uint64(b[30:])), End: int64(binary.BigEndian.Uint64(b[38:]))},
	}
	k := int(binary.BigEndian.Uint16(b[46:]))
	if k != len(b)-trimHeader {
		return Trim{}, fmt.Errorf("%w: trim entry says a %d-byte segment key, has %d bytes", ErrBadEntry, k, len(b)-trimHeader)
	}
	t.Segment.Key = string(b[trimHeader:])
	switch {
	case t.Offset < 0 || t.Segment.Base < 0 || t.Segment.End < t.Segment.Base:
		return Trim{}, fmt.Errorf("%w: trim to %d with segment [%d, %d)", ErrBadEntry, t.Offset, t.Segment.Base, t.Segment.End)
	case t.Segment.End != t.Offset:
		return Trim{}, fmt.Errorf("%w: trim to %d, the segment ends at %d", ErrBadEntry, t.Offset, t.Segment.End)
	case t.Segment.Key == "":
		return Trim{}, fmt.Errorf("%w: trim with an empty segment key", ErrBadEntry)
	}
	return t, nil
}

// maxEntry is the largest batches length the u32 field holds.
const maxEntry = math.MaxUint32
