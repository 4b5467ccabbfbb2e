// Package recordbatch reads, checks and builds Kafka RecordBatch v2 (magic 2) bytes, the
// format Loam stores in WAL chunks and segments and serves to Kafka clients unchanged.
//
// # Basics
//
// Parse reads the header of the first batch in a byte slice, checks its length, magic
// and CRC32C, and returns the rest of the slice; it copies nothing (Batch.Raw aliases
// the input). Batch.Records decompresses and decodes the records. Validate runs both
// over every batch of a concatenation with the rules Kafka's broker applies to a
// producer's batches, without building records; the produce path calls it on
// client-supplied bytes. Append builds a batch, compressed with any of Kafka's codecs.
// SetBaseOffset rewrites the one field the log assigns; it lies outside the CRC, so a
// stored batch is served with its assigned offset without re-encoding.
//
//	recs, err := b.Records()           // b from Parse or Validate
//	buf, err = recordbatch.Append(buf, recs, recordbatch.DefaultBuildOptions())
//	err = recordbatch.SetBaseOffset(batch.Raw, assigned)
//
// # Layout
//
// All integers in the header are big-endian. The CRC is CRC32C (Castagnoli) of bytes
// 21..end: everything from attributes on, so baseOffset, batchLength,
// partitionLeaderEpoch and magic can change without touching it.
//
//	byte  0 ┌─────────────────────────────────────────────┐
//	        │ baseOffset            int64                 │ ← set by the log, not in CRC
//	      8 ├─────────────────────────────────────────────┤
//	        │ batchLength           int32 (bytes after it)│   total size = 12 + batchLength
//	     12 ├─────────────────────────────────────────────┤
//	        │ partitionLeaderEpoch  int32                 │
//	     16 ├─────────────────────────────────────────────┤
//	        │ magic                 int8 = 2              │
//	     17 ├─────────────────────────────────────────────┤
//	        │ crc                   uint32, CRC32C 21..end│
//	     21 ├═════════════════════════════════════════════┤ ← CRC starts here
//	        │ attributes            int16                 │   bits 0-2 codec (0 none, 1 gzip,
//	        │                                             │   2 snappy, 3 lz4, 4 zstd), 3 log
//	        │                                             │   append time, 4 transactional,
//	        │                                             │   5 control, 6 delete horizon
//	     23 ├─────────────────────────────────────────────┤
//	        │ lastOffsetDelta       int32                 │
//	     27 ├─────────────────────────────────────────────┤
//	        │ firstTimestamp        int64 (ms)            │
//	     35 ├─────────────────────────────────────────────┤
//	        │ maxTimestamp          int64 (ms)            │
//	     43 ├─────────────────────────────────────────────┤
//	        │ producerId            int64 (-1: none)      │
//	     51 ├─────────────────────────────────────────────┤
//	        │ producerEpoch         int16 (-1: none)      │
//	     53 ├─────────────────────────────────────────────┤
//	        │ baseSequence          int32 (-1: none)      │
//	     57 ├─────────────────────────────────────────────┤
//	        │ numRecords            int32                 │
//	     61 ├─────────────────────────────────────────────┤
//	        │ records: numRecords × record, compressed as │
//	        │ one blob with the codec when bits 0-2 ≠ 0   │
//	        └─────────────────────────────────────────────┘
//
// A record uses zigzag varints (varint: int32 range, varlong: int64), like protobuf's
// sint32/sint64; a length of -1 means null:
//
//	length          varint   bytes after this field
//	attributes      int8     unused, written 0
//	timestampDelta  varlong  timestamp - firstTimestamp
//	offsetDelta     varint   offset - baseOffset
//	keyLength       varint   -1 = null key
//	key             keyLength bytes
//	valueLength     varint   -1 = null value
//	value           valueLength bytes
//	headerCount     varint
//	headers         headerCount × { keyLength varint (≥ 0), key, valueLength varint (-1 = null), value }
//
// Compressed payloads: gzip (RFC 1952), snappy in xerial framing (magic 82 53 4E 41
// 50 50 59 00, two big-endian int32 versions, then big-endian int32 length + raw
// snappy block, repeated) or a raw snappy block (both are read; xerial is written),
// LZ4 frame format, zstd frames.
//
// # Caveats
//
//   - Records returned by Records alias their source: the batch bytes for uncompressed
//     batches, one fresh buffer per batch for compressed ones. Copy before reusing the
//     input.
//   - Decompression is capped (DefaultMaxDecompressed, 64 MiB, or the caller's limit)
//     so that a small hostile batch cannot exhaust memory; a batch over the cap fails
//     with ErrTooLarge, also for Append, which refuses to build a compressed batch that
//     default readers would refuse.
//   - Validate is the strict produce-path check: numRecords > 0 and offset deltas exactly
//     0..lastOffsetDelta. Records is lenient: deltas only need to increase within
//     0..lastOffsetDelta and numRecords may be 0, as in batches rewritten by compaction.
//   - Nothing checks maxTimestamp against the records, nor the record attributes (unused
//     by Kafka, dropped on decode), nor whether a client may send control or
//     transactional batches: those are the caller's policy, read from Batch.
//   - Byte positions in record errors count from the start of the (decompressed)
//     records section; header errors count from the start of the batch.
//   - BuildOptions' zero value means producer 0, epoch 0, sequence 0 (idempotent); use
//     DefaultBuildOptions for a batch without producer.
//   - Only magic 2 exists here: v0/v1 message sets fail with ErrBadMagic.
package recordbatch
