// Package walfmt is the byte format of Loam's WAL objects (format versions 1 and 2):
// the file a log node PUTs at wal/<class>/<node>/<ulid>.wal on every flush, holding one
// chunk of record batches per (stream, partition) it buffered.
//
// # Basics
//
// AppendObject encodes an object; Decode validates a whole object (every CRC) and returns
// its header and chunk index; ReadIndex gets the same from an object store with one suffix
// range read (two for objects whose index exceeds 64 KiB); ReadChunk and DecodeChunk read
// and validate a single chunk by its byte range, which is how fetch serves WAL data: the
// sequencer's offset index stores each chunk's (object, offset, length), the ChunkRef.
//
// A chunk's payload is stored verbatim and never interpreted here: for EncodingKafka it is
// concatenated Kafka RecordBatch v2 bytes (validated by the writer before it encodes the
// object), for EncodingArrow (reserved) Arrow IPC batches. The codec treats both as
// opaque bytes.
//
// # Layout
//
// All integers are big-endian; every CRC is CRC32C (Castagnoli). An object is
//
//	header | chunk 0 | chunk 1 | ... | chunk N-1 | index | footer
//
// with no gaps: chunk 0 starts right after the header, each chunk right after the one
// before, the index right after the last chunk and the footer ends the object.
//
// Header (34+n bytes, n = len(node id)):
//
//	off  size  field
//	0    8     magic "LOAMWAL\x00"
//	8    2     format version (1; 2 when a chunk is encrypted)
//	10   2     header length = 34+n
//	12   1     class (1 standard, 2 express, 3 quorum)
//	13   16    ULID (binary)
//	29   1     node id length n (1..255)
//	30   n     node id (UTF-8)
//	30+n 4     CRC32C of bytes [0, 30+n)
//
// Chunk (48-byte header + payload); a chunk is self-describing and self-checking, so one
// range GET of [Offset, Offset+Length) can be validated alone:
//
//	off  size  field
//	0    2     chunk magic "LC"
//	2    1     chunk version = 1 (2: an encrypted chunk, below)
//	3    1     flags; bit 0 = encrypted (version 2); v1 requires 0
//	4    2     chunk header length = 48
//	6    1     encoding (1 kafka, 2 arrow)
//	7    1     reserved, 0
//	8    8     stream id
//	16   4     partition (>= 0)
//	20   8     records: offsets the chunk consumes (>= 1)
//	28   8     max timestamp, ms
//	36   4     payload length (>= 1)
//	40   4     CRC32C of the payload
//	44   4     CRC32C of chunk header bytes [0, 44)
//	48   ...   payload: RecordBatch v2 bytes (kafka) or Arrow IPC (arrow), verbatim
//
// Encrypted chunk (chunk version 2, only in format version 2 objects; 52-byte header +
// sealed payload). A chunk of a namespace with a customer-managed key is sealed by
// shared/envelope; its payload is the sealed bytes, which begin with the envelope (the
// key-encryption key's id and the wrapped data key) of E bytes, followed by the nonce and
// ciphertext. Fields 0-43 are as in version 1, with version 2, flags 0x01 and header length
// 52; the payload length and CRC cover the whole sealed payload:
//
//	off  size  field
//	44   2     envelope length E (1..1024, less than the payload length)
//	46   2     reserved, 0
//	48   4     CRC32C of chunk header bytes [0, 48)
//	52   ...   sealed payload: envelope (E bytes), then nonce and ciphertext
//
// An object holding an encrypted chunk is format version 2 (header and footer); an object of
// plaintext chunks only is written as version 1, byte for byte what version-1 readers read.
// Index entries of encrypted chunks have flags 0x01.
//
// Index (22+n+42*N bytes); it repeats the header's identity so that a reader that only
// suffix-reads the object still gets a checked Header:
//
//	off  size  field
//	0    1     class
//	1    16    ULID
//	17   1     node id length n
//	18   n     node id
//	18+n 4     chunk count N (>= 1)
//	22+n 42*N  entries, sorted by (stream id, partition), unique:
//	             0  8 stream id     8 4 partition   12 1 encoding   13 1 flags (bit 0: encrypted; 0 in v1)
//	             14 8 chunk offset  22 4 chunk length (header+payload)
//	             26 8 records       34 8 max timestamp ms
//
// Footer (26 bytes, at the very end):
//
//	off  size  field
//	0    8     index offset
//	8    4     index length
//	12   4     CRC32C of the index bytes followed by footer bytes [0, 12)
//	16   2     format version, as in the header
//	18   8     magic "LOAMWAL\x00"
//
// Every byte of an object is covered by a CRC or checked against a fixed value, so any
// corruption or truncation is detected. Checks are per section: the header, each chunk and
// index+footer validate alone.
//
// # Errors
//
// Decoding fails with ErrBadMagic, ErrTruncated, ErrBadCRC or plain ErrCorrupt (each also
// matches ErrCorrupt with errors.Is), wrapped with the field and offset; a newer format
// version fails with ErrUnsupportedVersion, which does not match ErrCorrupt. Encoding bad
// input fails with ErrInvalid. Nothing here panics on malformed input.
//
// # Caveats
//
//   - Empty chunks are not allowed: every chunk has at least one record and one payload
//     byte, and every object at least one chunk (a flush with nothing buffered writes no
//     object).
//   - The codec does not check that payloads are valid RecordBatch v2 or Arrow IPC; the
//     write path validates batches before they reach AppendObject.
//   - ReadIndex trusts the identity in the index and does not read the header at offset 0;
//     Decode checks that both agree.
//   - DecodeChunk returns a payload that aliases its input; the ChunkRef it returns has
//     Offset 0 (a lone chunk does not know where it sits in its object).
//   - Version 2 (encrypted chunks) is not implemented: a v1 reader rejects v2
//     objects and chunks with ErrUnsupportedVersion. A v2 reader must still read v1, which
//     the chunk version byte and header length make possible.
package walfmt
