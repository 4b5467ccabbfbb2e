// Package journal is the quorum durability class's journal: one Raft group
// (hashicorp/raft) of three members, on three log nodes, hosting many partitions of
// quorum streams.
//
// A produce to a quorum partition is one Raft entry (Entry, kind Append) carrying the
// partition, the idempotent producer of the chunk (if any), the proposing leader's clock
// and Kafka RecordBatch v2 batches, as the standard class stores them. It is acknowledged
// once a majority of the members has it in its fsynced log (sequencer-svc/raftlog, one
// fsynced bbolt transaction per write). The state machine (State) then assigns the
// partition's next offsets to the batches in log order and writes them into each batch's
// baseOffset field, which lies outside the batch CRC, so the stored bytes are the client's
// bytes with the assigned offsets, exactly as the standard class's reader serves them.
// Every member applies the same entries in the same order, so every member assigns the
// same offsets and any member, followers included, serves committed batches by offset
// (Member.Read) from its own state.
//
// Idempotent producers follow the sequencer's rules (meta.ChunkProducer): per producer and
// partition the last meta.ProducerBatches chunks are kept; a chunk whose sequence range is
// one of them is a duplicate answered with the original base offset and writes nothing; a
// base sequence that does not follow the last one is meta.ErrOutOfOrderSequence (a first
// chunk, and the first of a new epoch, start at 0); an epoch older than the one the
// partition last saw is meta.ErrProducerFenced. The journal does not hold the sequencer's
// producer registry, so it does not refuse a producer id or epoch the sequencer never
// issued (meta.ErrUnknownProducer): such a chunk starts its own sequence state.
//
// Memory: a member keeps the committed batches of its partitions that are not offloaded
// to segments yet in memory (they are also its snapshot). The leader refuses an append
// with ErrJournalFull while the retained bytes are at Config.MaxRetainedBytes, and at most
// Config.MaxInflight appends of at most Config.MaxEntryBytes are in flight, so the
// retained bytes stay below MaxRetainedBytes + MaxInflight x MaxEntryBytes. Producer
// states are at most MaxProducerStates per journal (least recently used evicted first;
// an evicted producer's next chunk on that partition must start a new sequence) and are
// forgotten after meta.ProducerIdleExpiry without a chunk, on the journal's clock.
//
// Offload (offload.go): the leader seals ranges of its partitions into segfmt segments in
// the bucket, appends them to the sequencer's offset index under the partition's offload
// lease (meta.QuorumIndexClient) and then trims the journal behind them with a Trim entry,
// which every member applies; readers find the offloaded offsets through the index. A node
// without a member reads the journal's part from a member (remote.go).
//
// Transport: each member speaks Raft over raft.NetworkTransport on a TCP stream layer.
// One Mux listener per log node carries every journal the node hosts: a connection starts
// with the journal id it is for, and a member's Raft address is "host:port/journal".
package journal
