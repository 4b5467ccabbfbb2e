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
	KindSeal   byte = 4 // a partition sealed for its move to another journal (or reopened)
	KindAdopt  byte = 5 // a partition moved in from another journal, from its end on
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
//
//	Seal (kind 4):
//	  0  u8   version
//	  1  u8   kind = 4
//	  2  u64  stream id
//	  10 u32  partition
//	  14 i64  clock
//	  22 u8   1: sealed (appends refused with ErrMoved), 0: reopened
//
//	Adopt (kind 5):
//	  0  u8   version
//	  1  u8   kind = 5
//	  2  u64  stream id
//	  10 u32  partition
//	  14 i64  clock
//	  22 i64  start: the partition's end in the journal it moved from
//	  30 u16  n: producer states carried (at most meta.MaxMoveProducers), each:
//	          i64 producer id, i16 epoch, u8 c (<= meta.ProducerBatches),
//	          c x (i32 first sequence, i32 last sequence, i64 base offset)
const (
	appendHeader = 48
	trimHeader   = 48
	assignSize   = 22
	sealSize     = 23
	adoptHeader  = 32
)

// Seal is a Seal entry.
type Seal struct {
	Partition
	ClockMs int64
	Sealed  bool // false: reopen
}

// Adopt is an Adopt entry: the partition starts in this journal at Start (its end in the
// journal it moved from, which offloaded everything below) with the carried producer
// states.
type Adopt struct {
	Partition
	ClockMs   int64
	Start     int64
	Producers []meta.ProducerCarry
}

// SealEntry appends the encoding of s to dst.
func SealEntry(dst []byte, s Seal) []byte {
	dst = append(dst, EntryVersion, KindSeal)
	dst = binary.BigEndian.AppendUint64(dst, s.Stream)
	dst = binary.BigEndian.AppendUint32(dst, s.Partition.Partition)
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.ClockMs))
	if s.Sealed {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// DecodeSeal decodes a Seal entry.
func DecodeSeal(b []byte) (Seal, error) {
	if k, err := EntryKind(b); err != nil {
		return Seal{}, err
	} else if k != KindSeal {
		return Seal{}, fmt.Errorf("%w: kind %d, want seal (%d)", ErrBadEntry, k, KindSeal)
	}
	if len(b) != sealSize {
		return Seal{}, fmt.Errorf("%w: seal entry of %d bytes, want %d", ErrBadEntry, len(b), sealSize)
	}
	if b[22] > 1 {
		return Seal{}, fmt.Errorf("%w: seal flag %d, want 0 or 1", ErrBadEntry, b[22])
	}
	return Seal{Partition: Partition{Stream: binary.BigEndian.Uint64(b[2:]), Partition: binary.BigEndian.Uint32(b[10:])},
		ClockMs: int64(binary.BigEndian.Uint64(b[14:])), Sealed: b[22] == 1}, nil
}

// AdoptEntry appends the encoding of a to dst (CheckProducerCarry first: the counts
// must fit).
func AdoptEntry(dst []byte, a Adopt) ([]byte, error) {
	if err := meta.CheckProducerCarry(a.Producers); err != nil {
		return dst, err
	}
	if a.Start < 0 {
		return dst, fmt.Errorf("%w: adopt at %d", meta.ErrInvalidArgument, a.Start)
	}
	dst = append(dst, EntryVersion, KindAdopt)
	dst = binary.BigEndian.AppendUint64(dst, a.Stream)
	dst = binary.BigEndian.AppendUint32(dst, a.Partition.Partition)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.ClockMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.Start))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(a.Producers)))
	for _, p := range a.Producers {
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.ID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(p.Epoch))
		dst = append(dst, byte(len(p.First)))
		for j := range p.First {
			dst = binary.BigEndian.AppendUint32(dst, uint32(p.First[j]))
			dst = binary.BigEndian.AppendUint32(dst, uint32(p.Last[j]))
			dst = binary.BigEndian.AppendUint64(dst, uint64(p.Base[j]))
		}
	}
	return dst, nil
}

// DecodeAdopt decodes an Adopt entry.
func DecodeAdopt(b []byte) (Adopt, error) {
	if k, err := EntryKind(b); err != nil {
		return Adopt{}, err
	} else if k != KindAdopt {
		return Adopt{}, fmt.Errorf("%w: kind %d, want adopt (%d)", ErrBadEntry, k, KindAdopt)
	}
	if len(b) < adoptHeader {
		return Adopt{}, fmt.Errorf("%w: adopt entry of %d bytes, header needs %d", ErrBadEntry, len(b), adoptHeader)
	}
	a := Adopt{Partition: Partition{Stream: binary.BigEndian.Uint64(b[2:]), Partition: binary.BigEndian.Uint32(b[10:])},
		ClockMs: int64(binary.BigEndian.Uint64(b[14:])), Start: int64(binary.BigEndian.Uint64(b[22:]))}
	n := int(binary.BigEndian.Uint16(b[30:]))
	if a.Start < 0 || n > meta.MaxMoveProducers {
		return Adopt{}, fmt.Errorf("%w: adopt at %d with %d producer states (at most %d)", ErrBadEntry, a.Start, n, meta.MaxMoveProducers)
	}
	rest := b[adoptHeader:]
	for i := 0; i < n; i++ {
		if len(rest) < 11 {
			return Adopt{}, fmt.Errorf("%w: adopt producer state %d truncated", ErrBadEntry, i)
		}
		p := meta.ProducerCarry{ID: int64(binary.BigEndian.Uint64(rest)), Epoch: int16(binary.BigEndian.Uint16(rest[8:]))}
		c := int(rest[10])
		rest = rest[11:]
		if c > meta.ProducerBatches || len(rest) < c*16 {
			return Adopt{}, fmt.Errorf("%w: adopt producer %d: %d chunks in %d bytes (at most %d)", ErrBadEntry, p.ID, c, len(rest), meta.ProducerBatches)
		}
		for j := 0; j < c; j++ {
			p.First = append(p.First, int32(binary.BigEndian.Uint32(rest)))
			p.Last = append(p.Last, int32(binary.BigEndian.Uint32(rest[4:])))
			p.Base = append(p.Base, int64(binary.BigEndian.Uint64(rest[8:])))
			rest = rest[16:]
		}
		a.Producers = append(a.Producers, p)
	}
	if len(rest) != 0 {
		return Adopt{}, fmt.Errorf("%w: %d bytes after the adopt entry's producer states", ErrBadEntry, len(rest))
	}
	if err := meta.CheckProducerCarry(a.Producers); err != nil {
		return Adopt{}, fmt.Errorf("%w: %v", ErrBadEntry, err)
	}
	return a, nil
}

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
	if b[1] < KindAppend || b[1] > KindAdopt {
		return 0, fmt.Errorf("%w: kind %d is not append (%d), trim (%d), assign (%d), seal (%d) or adopt (%d)",
			ErrBadEntry, b[1], KindAppend, KindTrim, KindAssign, KindSeal, KindAdopt)
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
