// Package fsm is the sequencer's Raft state machine: namespaces, streams, partitions, the
// offset index and WAL-commit dedupe records, kept in one bbolt file. It implements
// hashicorp/raft's BatchingFSM; package server wraps it in a Raft node.
//
// # Basics
//
// Every mutation is a metapb.Command, protobuf-encoded as one Raft log entry (builders:
// CreateNamespace, CreateStream, UpdateStream, DeleteStream, CommitWal, RegisterNode; then
// Encode). ApplyBatch applies a batch of entries in one bbolt write transaction and answers
// each with a *Result whose Err is a wrapped meta sentinel (nothing was changed) or nil.
//
// The FSM contract:
//
//   - Apply is deterministic: it uses only the log entry and the state. Time is the
//     command's StampMs (the leader's clock); the FSM clock is the largest stamp applied
//     and never moves backward. The local clock is never read.
//   - Entries at or below the stored applied index are skipped, so replaying the Raft log
//     after a restart is harmless (the node starts Raft without restoring its snapshot
//     when the database is at or past it).
//   - A command either applies whole or fails whole: every check runs before the first
//     write. A storage error panics (the replica cannot answer without diverging; a restart
//     replays from the Raft log).
//
// CommitWal (spec §3): an unexpired dedupe record for the object answers its first
// offsets with Duplicate; else an object created more than meta.StaleAfter before the FSM
// clock is meta.ErrStaleCommit; else every chunk's stream and partition must exist (or the
// whole commit fails), base offsets are assigned in chunk order (two chunks of one
// partition get consecutive ranges), index entries are appended, high watermarks and bytes
// advance, and a dedupe record is written. A dedupe record's time is max(object creation,
// FSM clock at commit); it expires meta.DedupeWindow later. Expired records are treated as
// absent whether or not they were pruned yet, so when pruning runs (at most 4096 per batch,
// oldest first, via the time-ordered bucket) never changes an answer.
//
// bbolt layout (format "loam-fsm v1"); integers big-endian:
//
//	meta          format → "loam-fsm v1", applied → u64, clock → i64 ms, next_stream_id → u64,
//	              last_event → u64 (index of the last entry that published an event)
//	namespaces    name → ""
//	streams       ns 0x00 name → metapb.Stream
//	stream_ids    id u64 → ns 0x00 name
//	partitions    id u64 | partition u32 → metapb.PartitionRecord
//	index         id u64 | partition u32 | base offset u64 → metapb.IndexRecord
//	dedupe        object key → metapb.DedupeRecord
//	dedupe_time   time ms u64 | object key → ""
//	nodes         voter id → RPC address
//
// Lookup is a cursor seek on index: the entry holding offset from is the last key at or
// below (id, partition, from).
//
// Snapshots stream the database with bbolt's tx.WriteTo, framed as
//
//	"LOAMSNAP" | version u32 = 1 | size u64 | bbolt bytes | crc32c u32 (Castagnoli, of the bbolt bytes)
//
// Restore checks the frame and the format into a temporary file, then swaps the file.
//
// # Caveats
//
// Lock order: FSM.mu, then a bbolt transaction. Reads and Apply hold mu shared; Restore
// holds it exclusively while it swaps the file.
//
// A snapshot holds a bbolt read transaction while Raft persists it; a writer that must grow
// the mmap then waits for it, which is why Options.InitialMmapSize defaults to 256 MiB.
//
// Deleting a stream removes its partitions and index entries in one transaction; the
// objects they referenced are left for GC, and dedupe records naming it stay until they
// expire (a retry of such a commit still answers its first offsets).
//
// Stream configs accept class standard, express and quorum (only standard is served by log
// nodes today) and encoding kafka (arrow is reserved and refused). Zero retention fields
// mean the defaults (7 days, unbounded bytes); an empty namespace means "default", which
// exists in every new database.
package fsm
