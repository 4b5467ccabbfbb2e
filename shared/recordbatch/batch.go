package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/loamhq/loam/shared/crc32c"
)

// Sentinel errors. Every error this package returns wraps exactly one of them, with the
// operation, the batch's byte position or base offset and the field at fault.
var (
	// ErrTruncated: the input ends inside a batch (or holds no batch at all). A fetch
	// response may legitimately end with a partial batch; callers that read such
	// responses stop at ErrTruncated.
	ErrTruncated = errors.New("recordbatch: truncated")
	// ErrBadMagic: the magic byte is not 2 (a v0/v1 message set or garbage).
	ErrBadMagic = errors.New("recordbatch: bad magic")
	// ErrBadCRC: the stored CRC32C does not match the bytes from attributes to the end.
	ErrBadCRC = errors.New("recordbatch: bad crc")
	// ErrCorrupt: the batch is well framed and its CRC matches, but a field or a record
	// inside it is malformed (bad lengths, counts, offset deltas, undecodable payload).
	ErrCorrupt = errors.New("recordbatch: corrupt")
	// ErrUnsupportedCompression: attribute bits 0-2 hold a codec other than 0-4.
	ErrUnsupportedCompression = errors.New("recordbatch: unsupported compression")
	// ErrTooLarge: a payload decompresses to more than the allowed size, or a batch
	// being built would not fit the format's int32 lengths.
	ErrTooLarge = errors.New("recordbatch: too large")
	// ErrBadRecords: Append was given records it cannot encode (none at all, or offset
	// deltas that are not strictly increasing from zero or more).
	ErrBadRecords = errors.New("recordbatch: bad records")
)

// Magic is the only batch format version this package reads and writes.
const Magic int8 = 2

// HeaderSize is the size of the fixed batch header; records start at this offset.
const HeaderSize = 61

// DefaultMaxDecompressed bounds what one batch's records may decompress to when no
// other limit is given (Records, Validate).
const DefaultMaxDecompressed = 64 << 20

// Byte offsets of the header fields, counted from the start of the batch.
const (
	offBaseOffset           = 0
	offBatchLength          = 8
	offPartitionLeaderEpoch = 12
	offMagic                = 16
	offCRC                  = 17
	offAttributes           = 21 // the CRC covers everything from here to the end
	offLastOffsetDelta      = 23
	offFirstTimestamp       = 27
	offMaxTimestamp         = 35
	offProducerID           = 43
	offProducerEpoch        = 51
	offBaseSequence         = 53
	offNumRecords           = 57

	// lengthPrefix is the part of the batch not counted by batchLength.
	lengthPrefix = offPartitionLeaderEpoch
	// minBatchLength is batchLength for a batch with an empty records section.
	minBatchLength = HeaderSize - lengthPrefix
)

// Attribute bits.
const (
	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Compression is a batch's codec, as stored in attribute bits 0-2.
type Compression int8

// Kafka's codec numbers.
const (
	None   Compression = 0
	Gzip   Compression = 1
	Snappy Compression = 2
	LZ4    Compression = 3
	Zstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", int8(c))
}

func (c Compression) valid() bool { return c >= None && c <= Zstd }

// Header is one record header. Kafka header keys cannot be null; a nil Value is a null
// value.
type Header struct {
	Key   string
	Value []byte
}

// Record is one decoded record. Key and Value (and header values) returned by Records
// alias the batch's bytes (uncompressed batches) or a buffer owned by the returned
// records (compressed ones): copy them before changing the input.
type Record struct {
	OffsetDelta int32
	Timestamp   int64  // absolute ms (firstTimestamp + timestampDelta)
	Key         []byte // nil = null key
	Value       []byte // nil = null value (tombstone)
	Headers     []Header
}

// Batch is a parsed batch header. Its fields mirror the wire layout drawn in the package
// doc; Raw is the whole batch and aliases the input given to Parse.
type Batch struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
	Raw                  []byte // the whole batch, aliasing the input
}

// Compression returns the codec named by attribute bits 0-2 (possibly an unsupported
// value 5-7).
func (b Batch) Compression() Compression { return Compression(b.Attributes & attrCompressionMask) }

// OffsetCount is the number of offsets the batch spans: LastOffsetDelta+1.
func (b Batch) OffsetCount() int64 { return int64(b.LastOffsetDelta) + 1 }

// LastOffset is the offset of the batch's last record: BaseOffset+LastOffsetDelta.
func (b Batch) LastOffset() int64 { return b.BaseOffset + int64(b.LastOffsetDelta) }

// LogAppendTime reports attribute bit 3: timestamps are the broker's append time.
func (b Batch) LogAppendTime() bool { return b.Attributes&attrLogAppendTime != 0 }

// Transactional reports attribute bit 4.
func (b Batch) Transactional() bool { return b.Attributes&attrTransactional != 0 }

// Control reports attribute bit 5: the batch holds a transaction marker.
func (b Batch) Control() bool { return b.Attributes&attrControl != 0 }

// Records decodes every record of the batch, decompressing with the default limit
// (DefaultMaxDecompressed). See RecordsLimit.
func (b Batch) Records() ([]Record, error) { return b.RecordsLimit(DefaultMaxDecompressed) }

// RecordsLimit decodes every record of the batch, refusing with ErrTooLarge a payload
// that decompresses to more than maxDecompressed bytes. It checks each record's framing,
// that the record count equals NumRecords and that offset deltas are strictly increasing
// within 0..LastOffsetDelta (gaps are allowed: compacted batches have them).
// maxDecompressed <= 0 means DefaultMaxDecompressed.
func (b Batch) RecordsLimit(maxDecompressed int) ([]Record, error) {
	if maxDecompressed <= 0 {
		maxDecompressed = DefaultMaxDecompressed
	}
	if err := b.checkHeader(false); err != nil {
		return nil, fmt.Errorf("recordbatch: records: %w", err)
	}
	data, err := decompress(nil, b.Raw[HeaderSize:], b.Compression(), maxDecompressed)
	if err != nil {
		return nil, fmt.Errorf("recordbatch: records: %w", b.errf("decompress %s records: %w", b.Compression(), err))
	}
	// Every record takes at least minRecordSize bytes, which bounds the allocation a
	// forged NumRecords can cause.
	recs := make([]Record, 0, min(int(b.NumRecords), len(data)/minRecordSize))
	err = b.walk(data, false, func(r *Record) { recs = append(recs, *r) })
	if err != nil {
		return nil, fmt.Errorf("recordbatch: records: %w", err)
	}
	return recs, nil
}

// Scan checks every record of the batch as RecordsLimit does (framing, record count,
// offset deltas; decompressing into a pooled buffer, refusing with ErrTooLarge a payload
// over maxDecompressed bytes, <= 0 meaning DefaultMaxDecompressed) without building any
// record: it calls fn with each record's index, absolute timestamp and size (the bytes of
// its key, value and header keys and values). An error from fn stops the scan and is
// returned as is; Scan's own errors wrap ErrCorrupt, ErrUnsupportedCompression or
// ErrTooLarge. An uncompressed batch is scanned in place, allocating nothing.
func (b Batch) Scan(maxDecompressed int, fn func(i int, timestamp int64, size int) error) error {
	if maxDecompressed <= 0 {
		maxDecompressed = DefaultMaxDecompressed
	}
	if err := b.checkHeader(false); err != nil {
		return fmt.Errorf("recordbatch: scan: %w", err)
	}
	data := b.Raw[HeaderSize:]
	if b.Compression() != None {
		buf := getBuf()
		defer putBuf(buf)
		var err error
		data, err = decompress((*buf)[:0], data, b.Compression(), maxDecompressed)
		if cap(data) <= maxPooledBuf {
			*buf = data[:0]
		}
		if err != nil {
			return fmt.Errorf("recordbatch: scan: %w", b.errf("decompress %s records: %w", b.Compression(), err))
		}
	}
	var fnErr error
	err := b.walkStat(data, false, nil, func(i int, ts int64, size int) error {
		fnErr = fn(i, ts, size)
		return fnErr
	})
	switch {
	case err == nil:
		return nil
	case fnErr != nil:
		return fnErr
	}
	return fmt.Errorf("recordbatch: scan: %w", err)
}

// errf wraps an error about this batch with its base offset; the exported caller adds
// the package and operation.
func (b Batch) errf(format string, args ...any) error {
	return fmt.Errorf("batch at base offset %d: "+format, append([]any{b.BaseOffset}, args...)...)
}

// checkHeader checks the header fields Parse leaves alone. strict adds the produce-path
// rules: at least one record and LastOffsetDelta == NumRecords-1.
func (b Batch) checkHeader(strict bool) error {
	if c := b.Compression(); !c.valid() {
		return b.errf("attributes 0x%04x: codec %d: %w", uint16(b.Attributes), int8(c), ErrUnsupportedCompression)
	}
	if b.NumRecords < 0 {
		return b.errf("numRecords %d is negative: %w", b.NumRecords, ErrCorrupt)
	}
	if b.LastOffsetDelta < 0 {
		return b.errf("lastOffsetDelta %d is negative: %w", b.LastOffsetDelta, ErrCorrupt)
	}
	if int64(b.NumRecords) > b.OffsetCount() {
		return b.errf("numRecords %d exceeds lastOffsetDelta+1 = %d: %w", b.NumRecords, b.OffsetCount(), ErrCorrupt)
	}
	if strict {
		if b.NumRecords == 0 {
			return b.errf("numRecords is 0: %w", ErrCorrupt)
		}
		if int64(b.NumRecords) != b.OffsetCount() {
			return b.errf("numRecords %d != lastOffsetDelta+1 = %d: %w", b.NumRecords, b.OffsetCount(), ErrCorrupt)
		}
	}
	return nil
}

// Parse reads the batch at the start of b, checking its length, magic and CRC32C
// (Castagnoli, over attributes..end), and returns it with the bytes that follow it.
// It does not look at the records; Records and Validate do. Batch.Raw aliases b.
func Parse(b []byte) (Batch, []byte, error) {
	bt, rest, err := parse(b)
	if err != nil {
		return Batch{}, b, fmt.Errorf("recordbatch: parse: %w", err)
	}
	return bt, rest, nil
}

// Checksum is the CRC-32C of the whole batch, b.Raw with its first 21 bytes, combined from
// its CRC field without reading the bytes that field covers: b must come from Parse (which
// checked that field against them), its Raw unchanged since.
func (b Batch) Checksum() uint32 {
	return crc32c.Combine(crc32.Checksum(b.Raw[:offAttributes], castagnoli), b.CRC, len(b.Raw)-offAttributes)
}

// ChecksumAfter is the CRC-32C of the bytes whose checksum is sum followed by the batch:
// folded over batches from 0, the checksum of their concatenation (a produce's body).
func ChecksumAfter(sum uint32, b Batch) uint32 {
	return crc32c.Combine(sum, b.Checksum(), len(b.Raw))
}

func parse(b []byte) (Batch, []byte, error) {
	if len(b) < lengthPrefix {
		return Batch{}, b, fmt.Errorf("%d bytes, need %d for baseOffset and batchLength: %w", len(b), lengthPrefix, ErrTruncated)
	}
	base := int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	length := int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	if len(b) > offMagic && int8(b[offMagic]) != Magic {
		return Batch{}, b, fmt.Errorf("batch at base offset %d: magic %d at byte %d, want %d: %w", base, int8(b[offMagic]), offMagic, Magic, ErrBadMagic)
	}
	if length < minBatchLength {
		return Batch{}, b, fmt.Errorf("batch at base offset %d: batchLength %d at byte %d, minimum %d: %w", base, length, offBatchLength, minBatchLength, ErrCorrupt)
	}
	end := int64(lengthPrefix) + int64(length)
	if int64(len(b)) < end {
		return Batch{}, b, fmt.Errorf("batch at base offset %d: batchLength %d needs %d bytes, have %d: %w", base, length, end, len(b), ErrTruncated)
	}
	raw := b[:end:end]
	bt := Batch{
		BaseOffset:           base,
		BatchLength:          length,
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(raw[offPartitionLeaderEpoch:])),
		Magic:                int8(raw[offMagic]),
		CRC:                  binary.BigEndian.Uint32(raw[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(raw[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(raw[offLastOffsetDelta:])),
		FirstTimestamp:       int64(binary.BigEndian.Uint64(raw[offFirstTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(raw[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(raw[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(raw[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(raw[offBaseSequence:])),
		NumRecords:           int32(binary.BigEndian.Uint32(raw[offNumRecords:])),
		Raw:                  raw,
	}
	if sum := crc32.Checksum(raw[offAttributes:], castagnoli); sum != bt.CRC {
		return Batch{}, b, fmt.Errorf("batch at base offset %d: crc 0x%08x stored, 0x%08x computed over bytes %d..%d: %w", base, bt.CRC, sum, offAttributes, end, ErrBadCRC)
	}
	return bt, b[end:], nil
}

// Validate checks every batch of a concatenation fully and returns them: header,
// CRC, codec, decompression (bounded by DefaultMaxDecompressed), each record's framing,
// record count == NumRecords > 0, offset deltas exactly 0..LastOffsetDelta, and no
// trailing bytes after the last batch. These are the rules Kafka's broker applies to a
// producer's batches; the produce path runs it on client-supplied bytes. Empty input is
// ErrTruncated.
func Validate(b []byte) ([]Batch, error) { return ValidateLimit(b, DefaultMaxDecompressed) }

// ValidateLimit is Validate with a caller-chosen decompressed size limit per batch;
// maxDecompressed <= 0 means DefaultMaxDecompressed.
func ValidateLimit(b []byte, maxDecompressed int) ([]Batch, error) {
	if maxDecompressed <= 0 {
		maxDecompressed = DefaultMaxDecompressed
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("recordbatch: validate: empty input, no batch: %w", ErrTruncated)
	}
	var batches []Batch
	total := len(b)
	for len(b) > 0 {
		at := total - len(b)
		bt, rest, err := parse(b)
		if err != nil {
			return nil, fmt.Errorf("recordbatch: validate: batch %d at byte %d: %w", len(batches), at, err)
		}
		if err := bt.check(maxDecompressed); err != nil {
			return nil, fmt.Errorf("recordbatch: validate: batch %d at byte %d: %w", len(batches), at, err)
		}
		batches = append(batches, bt)
		b = rest
	}
	return batches, nil
}

// check is the strict record walk of Validate, decoding into a pooled buffer and
// building no records.
func (b Batch) check(maxDecompressed int) error {
	if err := b.checkHeader(true); err != nil {
		return err
	}
	payload := b.Raw[HeaderSize:]
	if b.Compression() == None {
		return b.walk(payload, true, nil)
	}
	buf := getBuf()
	defer putBuf(buf)
	data, err := decompress((*buf)[:0], payload, b.Compression(), maxDecompressed)
	if cap(data) <= maxPooledBuf {
		*buf = data[:0]
	}
	if err != nil {
		return b.errf("decompress %s records: %w", b.Compression(), err)
	}
	return b.walk(data, true, nil)
}

// SetBaseOffset patches the baseOffset field of the batch at raw[0:]. baseOffset lies
// outside the CRC, so nothing else changes. raw must hold at least a whole batch header
// with magic 2.
func SetBaseOffset(raw []byte, off int64) error {
	if len(raw) < HeaderSize {
		return fmt.Errorf("recordbatch: set base offset: %d bytes, need a %d-byte header: %w", len(raw), HeaderSize, ErrTruncated)
	}
	if int8(raw[offMagic]) != Magic {
		return fmt.Errorf("recordbatch: set base offset: magic %d at byte %d, want %d: %w", int8(raw[offMagic]), offMagic, Magic, ErrBadMagic)
	}
	binary.BigEndian.PutUint64(raw[offBaseOffset:], uint64(off))
	return nil
}

// SetBaseOffsets sets the baseOffset of each batch of a concatenation, in order, from base
// on (each next one at the previous one's base + lastOffsetDelta + 1), walking the batches
// by their batchLength without checking their CRCs: it is for bytes already validated. A
// concatenation that does not frame (a batch shorter than its header, a batchLength running
// past the end) fails with ErrTruncated or ErrCorrupt, the batches before it patched.
func SetBaseOffsets(b []byte, base int64) error {
	for at := 0; at < len(b); {
		rest := b[at:]
		if len(rest) < HeaderSize {
			return fmt.Errorf("recordbatch: set base offsets: %d bytes at byte %d, need a %d-byte header: %w", len(rest), at, HeaderSize, ErrTruncated)
		}
		length := int64(int32(binary.BigEndian.Uint32(rest[offBatchLength:])))
		if length < minBatchLength || int64(len(rest)) < lengthPrefix+length {
			return fmt.Errorf("recordbatch: set base offsets: batchLength %d at byte %d with %d bytes left: %w", length, at+offBatchLength, len(rest), ErrCorrupt)
		}
		if int8(rest[offMagic]) != Magic {
			return fmt.Errorf("recordbatch: set base offsets: magic %d at byte %d, want %d: %w", int8(rest[offMagic]), at+offMagic, Magic, ErrBadMagic)
		}
		binary.BigEndian.PutUint64(rest[offBaseOffset:], uint64(base))
		base += int64(int32(binary.BigEndian.Uint32(rest[offLastOffsetDelta:]))) + 1
		at += int(lengthPrefix + length)
	}
	return nil
}

// SetProducer writes an idempotent producer (id, epoch, base sequence) into the header of
// the one batch raw starts with and recomputes its CRC, which covers those fields (unlike
// the base offset).
func SetProducer(raw []byte, id int64, epoch int16, baseSequence int32) error {
	if len(raw) < HeaderSize {
		return fmt.Errorf("recordbatch: set producer: %d bytes, need a %d-byte header: %w", len(raw), HeaderSize, ErrTruncated)
	}
	if int8(raw[offMagic]) != Magic {
		return fmt.Errorf("recordbatch: set producer: magic %d at byte %d, want %d: %w", int8(raw[offMagic]), offMagic, Magic, ErrBadMagic)
	}
	binary.BigEndian.PutUint64(raw[offProducerID:], uint64(id))
	binary.BigEndian.PutUint16(raw[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(raw[offBaseSequence:], uint32(baseSequence))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	return nil
}

// maxInt32 as an int, for length checks.
const maxInt32 = math.MaxInt32
