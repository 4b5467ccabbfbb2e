// Package fsm is the sequencer's Raft state machine: namespaces, streams, partitions, the
// offset index and WAL-commit dedupe records, kept in one bbolt file. It implements
// hashicorp/raft's BatchingFSM; package server wraps it in a Raft node.
//
// # Basics
//
// Every mutation is a metapb.Command, protobuf-encoded as one Raft log entry (builders:
// CreateNamespace, CreateStream, UpdateStream, DeleteStream, CommitWal, RegisterNode,
// AcquireLease, ReleaseLease, SwapIndex, TrimPartition, ForgetRetired, InitProducer,
// ConsumerHeartbeat, CommitConsumerOffsets; then Encode). ApplyBatch applies a batch of entries in one bbolt write transaction and answers
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
//     write (a CommitWal's chunks refused per chunk are part of its answer, not a
//     failure). A storage error panics (the replica cannot answer without diverging; a
//     restart replays from the Raft log).
//
// CommitWal: an unexpired dedupe record for the object answers its first
// answer with Duplicate; else an object created more than meta.StaleAfter before the FSM
// clock is meta.ErrStaleCommit. Else each chunk whose stream or partition does not exist
// is refused alone (CommitResult.Status: meta.ChunkStreamNotFound or
// meta.ChunkPartitionNotFound, base offset -1), and the others are committed: base offsets
// are assigned in chunk order (two chunks of one partition get consecutive ranges), index
// entries are appended, high watermarks and bytes advance. A command without per_chunk
// (meta.CommitWal.AllOrNothing, and every command of leaders that predate per-chunk
// answers) instead fails whole on such a chunk, so replaying an old Raft log gives the
// state it gave. The object gains one reference per committed chunk; one with no committed
// chunk is never referenced and enters the retired set at once, so GC deletes it after its
// grace. The dedupe record (written whatever was refused) keeps the bases and the per-chunk
// statuses, so a retry answers exactly the first answer. A dedupe record's time is
// max(object creation, FSM clock at commit); it expires meta.DedupeWindow later. Expired records are treated as
// absent whether or not they were pruned yet, so when pruning runs (at most 4096 per batch,
// oldest first, via the time-ordered bucket) never changes an answer.
//
// Idempotent producers (producers.go, meta.ChunkProducer): a chunk carrying a producer is
// checked, in chunk order, against the producer's state on its partition after the
// stream/partition checks: a duplicate of one of its last meta.ProducerBatches chunks is
// answered meta.ChunkDuplicate with the original base offset and writes nothing; an
// out-of-order sequence, an older epoch and an unknown producer are refused alone. Producers
// expire after meta.ProducerIdleExpiry and are capped per namespace (the cap travels in the
// InitProducer command), least recently used evicted first.
//
// Named consumers (consumers.go, meta/consumer.go): consumer commands travel as field 100
// of a Command (an unknown field to the oneof, read back by apply). A heartbeat records its
// member live until clock + session, drops members whose session ended, and balances the
// stream's partition leases for that member (its share ⌊P/M⌋ or ⌈P/M⌉ by member order:
// extras released, free partitions claimed at the next epoch); an offset commit is applied
// whole only when every partition named is the member's live lease at the epoch given
// (else meta.ErrStaleConsumerEpoch).
//
// Object references: every index entry counts one reference to its object (refs). A
// CommitWal adds one per committed chunk; SwapIndex moves Old's references to New's; TrimPartition
// and DeleteStream release the references of the entries they drop. An object whose count
// reaches zero enters the retired set at the FSM clock (and leaves it if it gains a
// reference again); ForgetRetired removes keys from the set once GC deleted them.
//
// Leases (meta.Lease): AcquireLease grants (stream, partition, kind) to holder when no
// lease is live (ExpiresMs <= FSM clock), taking the next epoch, or renews the holder's
// live lease (same epoch, ExpiresMs = clock + ttl). ReleaseLease of the current grant sets
// its ExpiresMs to 0; the record stays so epochs are never reused (until the stream is
// deleted: stream ids are never reused either).
//
// SwapIndex checks, in order: the shape (CheckSwap); the partition exists; if the index
// already holds New exactly it answers nil and changes nothing (a retry of an applied
// swap; checked before the lease so a retry whose lease ran out is not told to discard
// referenced objects); the lease is the current grant and unexpired (else
// meta.ErrLeaseLost); Old is in the index exactly (else meta.ErrIndexChanged). It then
// deletes Old's entries, writes New's (those wholly below the log start, possible when
// Old's first entry straddles it, are not kept, and their objects retired if unreferenced),
// adjusts the partition's bytes and publishes a PartitionUpdate with Replaced.
//
// TrimPartition: a log start past the high watermark is meta.ErrOffsetOutOfRange; one at
// or below the current log start changes nothing; else entries with End() <= log start are
// dropped and the log start moves (a PartitionUpdate with the new LogStart, Replaced when
// entries were dropped).
//
// bbolt layout (format "loam-fsm v4"; v1, v2 and v3 files are migrated when opened); integers big-endian:
//
//	meta              format → "loam-fsm v4", next_producer_id → u64, applied → u64, clock → i64 ms, next_stream_id → u64,
//	                  last_event → u64 (index of the last entry that published an event);
//	                  older versions kept pending_commits → u64 here (deleted when opened)
//	namespaces        name → ""
//	streams           ns 0x00 name → metapb.Stream
//	stream_ids        id u64 → ns 0x00 name
//	partition_groups  id u64 | group u32 → metapb.PartitionGroup: partitions [256 group,
//	                  256 group + n) in columns (log start, high watermark, bytes, settled)
//	index_blocks      id u64 | partition u32 | base offset u64 → metapb.IndexBlock: up to 512
//	                  consecutive entries of the partition, in columns, object keys front-coded
//	pending           Raft index u64 → metapb.PendingCommit: an applied CommitWal and the
//	                  base offset of each chunk (of a commit with refused chunks: the
//	                  committed chunks only)
//	dedupe            object key → metapb.DedupeRecord
//	dedupe_time       time ms u64 | object key → ""
//	nodes             voter id → RPC address
//	refs              object key → count u64 (objects with at least one index entry)
//	retired           object key → retired time ms u64
//	leases            id u64 | partition u32 | kind → metapb.LeaseRecord
//	producers, producer_names, producer_lru, producer_time, producer_partitions,
//	producer_counts   idempotent producers (format v4; producers.go has their layout)
//
// Why this layout: a CommitWal naming a thousand partitions must not write a thousand
// bbolt pages. A commit writes its partitions' groups (four values for a thousand
// partitions of one stream), one pending record (the command and its base offsets) and its
// dedupe record. A partition's entries below its settled offset are in index blocks; those
// at or above it, its tail, are those of pending records, and are also kept in memory
// (tail.go), so a Lookup or a settle never decodes pending records: the bucket is their
// durable copy, read back when the database is opened or restored. A partition is settled
// (its tail written as index blocks) when its tail reaches a length between blockEntries/2
// and blockEntries fixed by a hash of the partition, so partitions written in lockstep
// settle a few per commit; a pending record is deleted with the settle of its last chunk.
// To bound memory and the bucket, when settleCommits (1024) records or maxPendingChunks
// (2^20) chunks are pending, the partitions holding the oldest record's chunks are settled
// whatever their length; a short tail is then merged into the partition's last block when
// both fit in one. A swap or trim that reaches a partition's tail settles that partition
// first. Where entries are stored never changes an answer: the golden traces also run with
// two-entry blocks and every commit settled at once, and the random histories reopen the
// database and compare.
//
// Lookup reads the index blocks from the one holding from, then the partition's tail.
//
// The events of a CommitWal or CommitWalBatch entry (one PartitionUpdate per partition,
// merged over the batch) share the tails' arrays instead of copying the entries: a tail only
// grows past what was published, and a settled tail is replaced, not changed.
//
// Durability (Options.LazySync, as package server runs it): commits are not fsynced; the
// Raft log is. A session marker beside the file says whether the last session closed it
// cleanly or under which kernel boot it ran; Open discards a file that a machine crash may
// have left with lost writes (session.go), and the server rebuilds it from the newest
// snapshot and the Raft log.
//
// Older formats are migrated when opened, in one transaction: v1 (v3 without refs,
// retired, leases; a bucket "partitions" of id | partition → metapb.PartitionRecord and a
// bucket "index" of id | partition | base → metapb.IndexRecord) gains reference counts
// computed from its index (objects that lost their last reference under v1 are not in the
// retired set; GC's orphan sweep finds them) and becomes v2; v2 (v1 with refs, retired and
// leases) has its index moved into index blocks and its partitions into groups, all
// settled. testdata/v1, v2 and v3 hold golden snapshots of each, never regenerated.
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
// Deleting a stream removes its partitions, index entries and leases in one transaction;
// the objects left unreferenced are retired, and dedupe records naming it stay until they
// expire (a retry of such a commit still answers its first offsets).
//
// Rolling upgrades: a voter of an older version answers the new commands with
// ErrBadCommand while the others apply them, so upgrade every voter before any client uses
// leases, swaps or trims. Likewise a voter that predates per-chunk answers ignores
// per_chunk and fails whole a commit the others apply in part: upgrade every voter before
// log nodes that ask for per-chunk answers (any current log node) commit. Dedupe records
// with refusals (chunk_status) are misread by such a version: do not downgrade past it.
//
// Deletes collect keys before deleting them: bbolt's Cursor.Delete followed by Next skips
// a key when the leaf was already changed in the same transaction.
//
// Stream configs accept class standard, express and quorum (only standard is served by log
// nodes today) and encoding kafka (arrow is reserved and refused). Zero retention fields
// mean the defaults (7 days, unbounded bytes); an empty namespace means "default", which
// exists in every new database.
package fsm
