package walfmt

import (
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
)

// Version is the newest format version this package writes and reads. An object whose
// chunks are all plaintext is written as version 1, byte for byte what version-1 readers
// read; an object with an encrypted chunk is version 2.
const Version uint16 = 2

// The format versions.
const (
	Version1 uint16 = 1 // plaintext chunks only
	Version2 uint16 = 2 // chunks may be encrypted (chunk version 2)
)

// Sizes of the fixed parts of the format (see the package comment).
const (
	ChunkHeaderSize   = 48 // v1 chunk header, before the payload
	ChunkHeaderSizeV2 = 52 // v2 (encrypted) chunk header, before the payload
	// MaxEnvelope is the longest envelope (key id and wrapped data key) of an encrypted chunk.
	MaxEnvelope    = 1024
	FooterSize     = 26 // footer at the end of every object
	IndexEntrySize = 42 // one chunk index entry

	// MaxNodeIDLen is the longest node id, in bytes.
	MaxNodeIDLen = 255
	// MaxPayload is the largest chunk payload, in bytes.
	MaxPayload = 1<<31 - 1 - ChunkHeaderSize
)

const (
	magic      = "LOAMWAL\x00"
	chunkMagic = "LC"

	headerFixed = 8 + 2 + 2 + 1 + 16 + 1 + 4 // header without the node id
	indexFixed  = 1 + 16 + 1 + 4             // index without node id and entries

	chunkVersion   = 1
	chunkVersionV2 = 2
	flagEncrypted  = 0x01
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sentinel errors. ErrBadMagic, ErrTruncated and ErrBadCRC are kinds of corruption: errors
// wrapping them also match ErrCorrupt.
var (
	ErrCorrupt            = errors.New("walfmt: corrupt")
	ErrBadMagic           = errors.New("walfmt: bad magic")
	ErrTruncated          = errors.New("walfmt: truncated")
	ErrBadCRC             = errors.New("walfmt: bad crc32c")
	ErrUnsupportedVersion = errors.New("walfmt: unsupported format version")
	ErrInvalid            = errors.New("walfmt: invalid input")
)

// corruptError carries one of the corruption kinds and also matches ErrCorrupt.
type corruptError struct{ err error }

func (e corruptError) Error() string   { return e.err.Error() }
func (e corruptError) Unwrap() []error { return []error{e.err, ErrCorrupt} }

// bad returns a corruption error of the given kind (ErrCorrupt, ErrBadMagic, ErrTruncated
// or ErrBadCRC) with a message naming the field and offset.
func bad(kind error, format string, args ...any) error {
	err := fmt.Errorf(format+": %w", append(args, kind)...)
	if kind == ErrCorrupt {
		return err
	}
	return corruptError{err}
}

// Class is a WAL durability class.
type Class uint8

// The durability classes.
const (
	ClassStandard Class = 1
	ClassExpress  Class = 2
	ClassQuorum   Class = 3
)

var classNames = [...]string{ClassStandard: "standard", ClassExpress: "express", ClassQuorum: "quorum"}

// Valid reports whether c is a known class.
func (c Class) Valid() bool { return c >= ClassStandard && c <= ClassQuorum }

// String returns "standard", "express" or "quorum", or "class(N)" for an unknown value.
func (c Class) String() string {
	if c.Valid() {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// ParseClass parses the name String returns.
func ParseClass(s string) (Class, error) {
	for c := ClassStandard; c <= ClassQuorum; c++ {
		if classNames[c] == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("walfmt: parse class %q: %w", s, ErrInvalid)
}

// Encoding says how a chunk's payload is encoded.
type Encoding uint8

// The chunk encodings.
const (
	EncodingKafka Encoding = 1 // concatenated Kafka RecordBatch v2
	EncodingArrow Encoding = 2 // Arrow IPC record batches (reserved; opaque to this codec)
)

var encodingNames = [...]string{EncodingKafka: "kafka", EncodingArrow: "arrow"}

// Valid reports whether e is a known encoding.
func (e Encoding) Valid() bool { return e == EncodingKafka || e == EncodingArrow }

// String returns "kafka" or "arrow", or "encoding(N)" for an unknown value.
func (e Encoding) String() string {
	if e.Valid() {
		return encodingNames[e]
	}
	return fmt.Sprintf("encoding(%d)", uint8(e))
}

// ParseEncoding parses the name String returns.
func ParseEncoding(s string) (Encoding, error) {
	for e := EncodingKafka; e <= EncodingArrow; e++ {
		if encodingNames[e] == s {
			return e, nil
		}
	}
	return 0, fmt.Errorf("walfmt: parse encoding %q: %w", s, ErrInvalid)
}

// Header identifies a WAL object: the node that wrote it, its ULID (whose time is the
// object's creation time) and its durability class.
type Header struct {
	NodeID string
	ULID   ulid.ULID
	Class  Class
}

// Chunk is one (stream, partition)'s data in an object.
type Chunk struct {
	StreamID     uint64
	Partition    int32
	Encoding     Encoding
	Records      int64 // offsets the chunk consumes (kafka: sum of lastOffsetDelta+1)
	MaxTimestamp int64 // ms
	Payload      []byte
	// Parts, when Payload is nil, is the payload given in parts: the chunk holds their
	// concatenation, byte for byte what Payload set to it would write, without joining
	// them first (a chunk built from several produce requests). Empty parts are allowed;
	// the payload they add up to must not be empty. Set Payload or Parts, not both.
	Parts [][]byte
	// PartCRCs, optional with Parts, are the CRC-32C of each part as the caller has them
	// (a produce's batches arrive with checked CRCs): the payload's checksum is combined
	// from them instead of read from the parts again. A wrong one makes a chunk that fails
	// its check on every read. Either nil or one per part.
	PartCRCs []uint32
	// Encrypted marks a sealed chunk (chunk version 2): Payload is the sealed bytes, whose
	// first EnvelopeLen bytes are the envelope (key id and wrapped data key) and the rest
	// the ciphertext.
	Encrypted   bool
	EnvelopeLen int
}

// payloadLen is the length of the chunk's payload, given whole or in parts.
func (c *Chunk) payloadLen() int {
	if c.Payload != nil {
		return len(c.Payload)
	}
	n := 0
	for _, p := range c.Parts {
		n += len(p)
	}
	return n
}

// ChunkRef describes a chunk and where it is: bytes [Offset, Offset+Length) of its object
// hold the whole chunk (header and payload).
type ChunkRef struct {
	StreamID     uint64
	Partition    int32
	Encoding     Encoding
	Records      int64
	MaxTimestamp int64
	Offset       int64
	Length       int64
	Encrypted    bool // a version-2 chunk sealed with a namespace key
	// EnvelopeLen is an encrypted chunk's envelope length, from its chunk header (index
	// entries do not carry it: 0 in refs from an index).
	EnvelopeLen int
}

// Object is a decoded object's header and chunk index, chunks in object order (sorted by
// stream id, then partition).
type Object struct {
	Header  Header
	Version uint16
	Chunks  []ChunkRef
}

// Lookup returns the chunk of (streamID, partition), if the object holds one.
func (o *Object) Lookup(streamID uint64, partition int32) (ChunkRef, bool) {
	i, ok := slices.BinarySearchFunc(o.Chunks, key{streamID, partition}, func(r ChunkRef, k key) int {
		return compareKey(key{r.StreamID, r.Partition}, k)
	})
	if !ok {
		return ChunkRef{}, false
	}
	return o.Chunks[i], true
}

type key struct {
	stream    uint64
	partition int32
}

func compareKey(a, b key) int {
	switch {
	case a.stream < b.stream:
		return -1
	case a.stream > b.stream:
		return 1
	case a.partition < b.partition:
		return -1
	case a.partition > b.partition:
		return 1
	}
	return 0
}

// ValidateNodeID checks that id can name a node in a header and an object key: 1 to 255
// bytes of UTF-8 without '/' or control characters, and not "." or "..".
func ValidateNodeID(id string) error {
	if msg := nodeIDProblem(id); msg != "" {
		return fmt.Errorf("walfmt: node id %q: %s: %w", id, msg, ErrInvalid)
	}
	return nil
}

func nodeIDProblem(id string) string {
	switch {
	case id == "":
		return "empty"
	case len(id) > MaxNodeIDLen:
		return "longer than 255 bytes"
	case id == "." || id == "..":
		return "is a relative path part"
	case !utf8.ValidString(id):
		return "not UTF-8"
	}
	for _, r := range id {
		if r == '/' || r < 0x20 || r == 0x7f {
			return fmt.Sprintf("holds %q", r)
		}
	}
	return ""
}
