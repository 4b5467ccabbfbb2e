// Package metafake is an in-memory test double of the sequencer for the calls the
// background functions make: CreateStream, ListNamespaces, ListStreams, CommitWal, Lookup,
// AcquireLease, ReleaseLease, SwapIndex, TrimPartition, ListRetired, ForgetRetired and
// Referenced (what the segmenter, compaction, retention and GC use), idempotent producers
// (InitProducer, producer chunks in CommitWal) and named consumers (heartbeats, fenced
// offset commits, describe, list, delete and reset).
//
// # Basics
//
// New returns a Meta with one namespace, "default", and no streams. CreateStream (or
// AddStream, with a chosen ID) adds a stream with its partitions; CommitWal (or Commit, one
// entry of any kind) appends index entries at a partition's high watermark, as a log
// node's flush does. Entries, HighWatermark and Swaps let a test look at the state;
// DropLeases ends every lease, as if each had expired and been taken over.
//
// It follows the sequencer's rules, and package metatest proves it by running the same
// conformance suite over Meta and over the real sequencer: leases (ErrLeaseHeld, a new
// epoch for every grant to a holder without a live lease, ErrInvalidArgument for a bad
// kind, holder or ttl), SwapIndex's checks in the sequencer's order (shape:
// ErrInvalidArgument; a retry of an applied swap: nil; lease: ErrLeaseLost; Old as the
// index holds it, MaxTimestamp aside: ErrIndexChanged), TrimPartition, Lookup's bounds,
// reference counts per object, and the retired set (an object whose last entry goes is
// retired at Now), producers (ids, epochs, fencing, the last meta.ProducerBatches chunks
// per producer and partition answering duplicates, out-of-order and unknown chunks refused
// in CommitResult.Status) and consumers (lease balancing, epochs, fencing, ErrConsumerActive).
//
// # Caveats
//
// It is a test double, not a sequencer: nothing is durable, there is one namespace, no
// Watch, CommitWal has no commit window or clock checks and fails a whole commit for one
// chunk of a missing stream, Lookup has no byte budget, producers never expire nor are
// evicted, consumers and members have no cap, and ingest quotas are refused. Now and BeforeSwap are set by
// the test before the Meta is used concurrently; BeforeSwap runs without the Meta's lock
// held, so it may call the Meta. Commit, Entries and HighWatermark on an unknown partition
// panic (a test bug).
package metafake
