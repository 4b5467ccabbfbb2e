// Package raftlog is the sequencer's Raft log and stable store: a raft.LogStore and
// raft.StableStore in one bbolt file.
//
// # Basics
//
// Buckets: logs (index u64 big-endian → entry), stable (key → value), meta (format →
// "loam-raftlog v1"). Each write is one fsynced bbolt transaction; StoreLogs writes a batch
// in one. Entries are framed (version 1):
//
//	version u8 (=1) | type u8 | term uvarint | appended_at unix ns varint |
//	data length uvarint | data | extensions length uvarint | extensions | crc32c u32 BE
//
// with the CRC32C (Castagnoli) over everything before it; the golden file
// testdata/v1/entry.bin pins the layout.
//
// # Caveats
//
// It stands in for hashicorp/raft-boltdb/v2, whose latest release served here (v2.3.1)
// imports go-metrics/compat, which go-metrics v0.7.0 (required by raft v1.8.0) removed:
// the two do not build together. It is not file-compatible with raft-boltdb.
//
// bbolt never shrinks its file: after log truncation the free pages are reused, not
// returned to the file system.
package raftlog
