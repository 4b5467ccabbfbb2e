package segfmt

import (
	"errors"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/loamhq/loam/shared/recordbatch"
)

// Version is the format version this package writes and reads.
const Version uint16 = 1

// Sizes of the fixed parts of the format (see the package comment).
const (
	HeaderSize        = 92 // header at offset 0; the data region starts right after it
	TrailerSize       = 42 // trailer at the end of every object
	SectionHeaderSize = 8  // type, flags and length before each index section's body
	IndexEntrySize    = 36 // one batch in the batch index section
)

// Index section types. A reader skips a section it does not know when the section's
// SectionOptional flag is set and rejects the object with ErrUnsupportedVersion when it
// is not.
const (
	SectionBatchIndex    uint16 = 1 // per-batch offset, timestamp and byte-range index
	SectionColumnRanges  uint16 = 2 // arrow segments: schemas and per-column byte ranges of each group (arrow.go)
	SectionOptional      uint16 = 1 << 0
	indexEntryCountField        = 4 // batch count before the entries of a batch index
)

const (
	magic = "LOAMSEG\x00"

	offHeaderCRC  = HeaderSize - 4
	offTrailerCRC = 28
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sentinel errors. ErrBadMagic, ErrTruncated and ErrBadCRC are kinds of corruption: errors
// wrapping them also match ErrCorrupt.
var (
	ErrCorrupt             = errors.New("segfmt: corrupt")
	ErrBadMagic            = errors.New("segfmt: bad magic")
	ErrTruncated           = errors.New("segfmt: truncated")
	ErrBadCRC              = errors.New("segfmt: bad crc32c")
	ErrUnsupportedVersion  = errors.New("segfmt: unsupported format version")
	ErrUnsupportedEncoding = errors.New("segfmt: unsupported encoding")
	ErrInvalid             = errors.New("segfmt: invalid input")
)

// corruptError carries one of the corruption kinds and also matches ErrCorrupt; cause, if
// set, is a lower-level error (from recordbatch) that also matches.
type corruptError struct {
	err   error
	cause error
}

func (e corruptError) Error() string { return e.err.Error() }
func (e corruptError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.err, ErrCorrupt, e.cause}
	}
	return []error{e.err, ErrCorrupt}
}

// bad returns a corruption error of the given kind (ErrCorrupt, ErrBadMagic, ErrTruncated
// or ErrBadCRC) with a message naming the field and offset.
func bad(kind error, format string, args ...any) error {
	err := fmt.Errorf(format+": %w", append(args, kind)...)
	if kind == ErrCorrupt {
		return err
	}
	return corruptError{err: err}
}

// badBatch is corruption found by recordbatch in a stored batch; the result matches
// ErrCorrupt, cause and, for a Kafka CRC mismatch, ErrBadCRC.
func badBatch(cause error, format string, args ...any) error {
	kind := ErrCorrupt
	if errors.Is(cause, recordbatch.ErrBadCRC) {
		kind = ErrBadCRC
	}
	return corruptError{err: fmt.Errorf(format+": %v: %w", append(args, cause, kind)...), cause: cause}
}

// Encoding says how a segment's batches are encoded; it is the same field, with
// the same values, as a WAL chunk's encoding.
type Encoding uint8

// The encodings.
const (
	EncodingKafka Encoding = 1 // Kafka RecordBatch v2, back to back
	EncodingArrow Encoding = 2 // groups of Arrow column chunks plus a column-ranges section (arrow.go)
)

// String returns "kafka" or "arrow", or "encoding(N)" for an unknown value.
func (e Encoding) String() string {
	switch e {
	case EncodingKafka:
		return "kafka"
	case EncodingArrow:
		return "arrow"
	}
	return fmt.Sprintf("encoding(%d)", uint8(e))
}

// Header describes a segment: whose data it holds, the offsets it stands for and summary
// figures over its batches. It is stored at the start of the object and again, byte for
// byte, at the start of the index, so that a reader that only reads the end gets it too.
//
// BaseOffset and EndOffset (exclusive) are the range of offsets the segment replaces in
// the partition's offset index. Every batch lies inside it; batches need not cover it
// (compaction removes records and whole batches, leaving gaps anywhere in the range).
type Header struct {
	Encoding     Encoding
	StreamID     uint64
	Partition    int32
	BaseOffset   int64
	EndOffset    int64
	MinTimestamp int64 // ms: smallest firstTimestamp of the batches
	MaxTimestamp int64 // ms: largest maxTimestamp of the batches
	CreatedMs    int64 // when the segment was written, ms since the epoch

	BatchCount  int64 // batches in the data region
	OffsetCount int64 // offsets the batches span: sum of lastOffsetDelta+1 (<= EndOffset-BaseOffset)
	RecordCount int64 // records the batches hold: sum of numRecords (<= OffsetCount)
}

// BatchRef locates one batch: bytes [Offset, Offset+Length) of the object hold the batch
// whose offsets are BaseOffset .. BaseOffset+Count-1 (some of them possibly removed by
// compaction). CRC is the CRC32C of those bytes as stored, baseOffset included.
type BatchRef struct {
	Offset       int64 // byte offset in the object
	Length       int32
	BaseOffset   int64
	Count        int64 // lastOffsetDelta+1
	MaxTimestamp int64
	CRC          uint32
}

// End is the offset after the batch's last offset.
func (b BatchRef) End() int64 { return b.BaseOffset + b.Count }

// Info is a segment's header and batch index. The data region, bytes [DataOffset,
// DataOffset+DataLength), is exactly the batches back to back: it is what the partition's
// offset-index entry for the segment points at. The index and trailer follow it up to Size.
type Info struct {
	Header     Header
	DataOffset int64
	DataLength int64
	Batches    []BatchRef
	Size       int64

	// Arrow is the column-ranges section of an arrow segment (nil for a kafka one):
	// Batches are then its groups, Arrow.Groups[k] the columns of Batches[k].
	Arrow *ArrowIndex

	// extra holds the optional index sections the reader skipped, in object order, so
	// that an accepted object can be re-encoded exactly (tests, fuzzing).
	extra []section
}

// section is an index section other than the batch index.
type section struct {
	typ, flags uint16
	body       []byte
}

// IndexOffset is where the index starts: right after the data region.
func (i *Info) IndexOffset() int64 { return i.DataOffset + i.DataLength }

// Find returns the position of the batch holding offset and true, or, when no batch holds
// it (it is before the first batch, in a gap or after the last), the position of the first
// batch after it and false; that position is len(i.Batches) when no batch follows. A fetch
// at offset serves batches from the returned position either way.
func (i *Info) Find(offset int64) (int, bool) {
	n := sort.Search(len(i.Batches), func(k int) bool { return i.Batches[k].End() > offset })
	return n, n < len(i.Batches) && i.Batches[n].BaseOffset <= offset
}

// Span returns the byte range [off, off+n) of the object holding batches [from, to).
// It panics if from and to are not 0 <= from <= to <= len(i.Batches), like slicing.
func (i *Info) Span(from, to int) (off, n int64) {
	_ = i.Batches[from:to]
	if from == to {
		if from == len(i.Batches) {
			return i.IndexOffset(), 0
		}
		return i.Batches[from].Offset, 0
	}
	last := i.Batches[to-1]
	off = i.Batches[from].Offset
	return off, last.Offset + int64(last.Length) - off
}
