// Package segfmt is the byte format of Loam's segment objects (format version 1):
// one partition's record batches, moved out of WAL objects by the segmenter (or rewritten
// by compaction) into one object of 64–256 MiB, with an index of its batches at the end.
//
// # Basics
//
// A Writer builds a segment: NewWriter with the partition's identity, Add each batch in
// offset order (its RecordBatch v2 bytes with the assigned base offset already patched in
// by recordbatch.SetBaseOffset; nothing is re-encoded), Finish. Decode validates a whole
// object. ReadInfo reads only the index and trailer from an object store, with one suffix
// range read; ReadInfoAt does the same knowing only where the data region ends, which the
// offset index says.
//
// The data region is the batches back to back, nothing else: it is what the partition's
// single offset-index entry for the segment covers (Offset = Info.DataOffset, Length
// = Info.DataLength, [Header.BaseOffset, Header.EndOffset) its offsets), and any byte range
// of it that starts and ends on batch boundaries is valid Kafka fetch data as it stands.
// A fetch at an arbitrary offset reads the index (ReadInfo/ReadInfoAt, cached), finds the
// batch with Info.Find, range-reads just the batches it needs (Info.Span) and checks them
// (Info.CheckBatches); ReadBatches does the three.
//
// Offsets may have gaps: compaction removes records inside batches and whole batches, so
// each batch's base offset and offset count are in the index, base offsets strictly
// increase and batches never overlap. The header's [BaseOffset, EndOffset) is the range
// the segment replaces in the offset index; its batches lie inside it but need not cover
// it.
//
// # Layout
//
// All integers are big-endian, every CRC is CRC32C (Castagnoli). An object is
//
//	header | data region (batch 0 | batch 1 | ... | batch N-1) | index | trailer
//
// with no gaps: the data region starts at offset 92, right after the header; the index
// starts where the data region ends and the trailer is the object's last 42 bytes.
//
// Header (92 bytes):
//
//	off  size  field
//	0    8     magic "LOAMSEG\x00"
//	8    2     format version = 1
//	10   2     header length = 92
//	12   1     encoding (1 kafka; 2 arrow: see arrow.go)
//	13   1     flags, 0
//	14   2     reserved, 0
//	16   8     stream id
//	24   4     partition (>= 0)
//	28   4     batch count N (>= 1)
//	32   8     base offset: first offset the segment stands for (>= 0)
//	40   8     end offset, exclusive (> base offset)
//	48   8     offset count: sum of the batches' lastOffsetDelta+1 (N..end-base)
//	56   8     record count: sum of the batches' numRecords (0..offset count)
//	64   8     min timestamp, ms: smallest firstTimestamp of the batches
//	72   8     max timestamp, ms: largest maxTimestamp of the batches
//	80   8     created at, ms since the epoch
//	88   4     CRC32C of bytes [0, 88)
//
// Data region: the N batches, each a Kafka RecordBatch v2 stored verbatim (with its own
// CRC32C over attributes..end) except for baseOffset, which holds the assigned offset.
//
// Index: a copy of the header, byte for byte (so that a reader of the object's end gets a
// checked header), then sections, the batch index first:
//
//	off  size  field
//	0    92    header copy
//	92   ...   sections, each:
//	             0 2 type   2 2 flags   4 4 body length n   8 n body
//
// Section types: 1 batch index (flags 0, exactly once, first); 2 column ranges (flags 1,
// exactly once in an arrow segment: its schemas and each group's column byte ranges,
// arrow.go). A reader that meets a type it does not know skips it when flags bit 0
// ("optional") is set and otherwise rejects the object with ErrUnsupportedVersion. Kafka
// segments hold only the batch index.
//
// Batch index body (4+36*N bytes):
//
//	off  size  field
//	0    4     N, equal to the header's batch count
//	4    36*N  entries, in data-region order:
//	             0  8 base offset      8  4 offset count (lastOffsetDelta+1)
//	             12 8 max timestamp    20 8 byte offset from the start of the data region
//	             28 4 length           32 4 CRC32C of the batch's bytes as stored
//
// Entry i's byte offset is the sum of the lengths before it (the batches tile the data
// region); base offsets strictly increase and each is at or after the previous batch's
// end.
//
// Trailer (42 bytes, at the very end):
//
//	off  size  field
//	0    8     data offset = 92
//	8    8     data length
//	16   8     index offset = data offset + data length
//	24   4     index length
//	28   4     CRC32C of the index bytes followed by trailer bytes [0, 28)
//	32   2     format version = 1
//	34   8     magic "LOAMSEG\x00"
//
// Every byte is covered by a CRC or checked against a fixed value: the header by its
// CRC, each batch wholly by its index entry's CRC (the Kafka CRC leaves baseOffset,
// batchLength, partitionLeaderEpoch and magic out), the index by the trailer's CRC. A
// range read of some batches is checkable alone once the index is known.
//
// # Errors
//
// Decoding fails with ErrBadMagic, ErrTruncated, ErrBadCRC or plain ErrCorrupt (each also
// matches ErrCorrupt with errors.Is; a batch that recordbatch rejects also matches the
// recordbatch error), wrapped with the operation, key, field and offset. A newer format
// version, or a section a version 1 reader must understand and does not, fails with
// ErrUnsupportedVersion, as does a column-ranges section of another version; it does not
// match ErrCorrupt. Writing bad input fails with ErrInvalid. Nothing here panics on malformed
// input.
//
// # Caveats
//
//   - The Writer holds the whole object in memory (the header, at the front, is written
//     last): a 256 MiB segment costs 256 MiB plus its index. Reserve(Size(...))
//     preallocates; NewWriterBuffer reuses a buffer across segments, which matters more
//     than anything else here (first-touching fresh memory costs more than the copy).
//   - Min timestamp is the smallest batch firstTimestamp, not of every record: finding
//     the true minimum would mean decompressing every batch. Max timestamp is exact, as
//     Kafka's batch maxTimestamp is.
//   - Decode does not decompress or walk records; Add and Decode check the batch header
//     only (recordbatch.Parse plus codec, lastOffsetDelta and numRecords ranges). The
//     produce path validated the records long before (recordbatch.Validate).
//   - Empty batches (numRecords 0, left by compaction) are allowed; an empty segment is
//     not.
//   - ReadInfo and ReadInfoAt trust the header copy in the index and do not read offset
//     0; Decode checks that both agree. The record count and min timestamp of the header
//     are only confirmed by Decode, which reads every batch.
//   - Arrow segments (encoding 2, arrow.go): the data region is groups of column chunks,
//     which this package checks by CRC only (shared/arrowenc decodes them); the header's
//     min timestamp of an arrow segment is only checked against every group's max.
//     Readers from before arrow segments reject them with ErrUnsupportedEncoding.
//   - Span panics on positions out of range, like slicing; CheckBatches returns ErrInvalid.
package segfmt
