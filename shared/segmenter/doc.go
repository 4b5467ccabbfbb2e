// Package segmenter is the segmenter function's handler: it rewrites a
// partition's WAL chunks into one segment object and swaps the partition's index entries
// for the segment's single entry, under a lease the sequencer fences.
//
// # Basics
//
// A Segmenter handles WAL-object-created notifications (HandleS3: the AWS S3 event shape,
// directly or wrapped in SQS through Handler) and a periodic Sweep. For a new WAL object it
// counts each chunk's bytes as pending for its partition (coord.WALWork, when a
// coordination store is configured: one write per WAL object, to the item of the log node
// that wrote it) and, once a partition's pending bytes reach TargetBytes (judged from the
// node's share times the number of writing nodes) or its oldest unsegmented WAL object is
// older than MaxAge, calls Partition:
//
//  1. Lookup the partition's index from the log start (or from where the last segment ended)
//     and take the run of WAL entries that follows the last segment.
//  2. Pick a prefix of it: entries until they reach TargetBytes, or the whole run when its
//     oldest object (by its ULID time) is past MaxAge. Nothing picked: done, no lease taken.
//  3. AcquireLease(stream, partition, "segment"). Another holder has it: done (Busy).
//  4. Range-GET the chunks (ReadAhead at a time, neighbours in one GET), check each against
//     its entry (walfmt.DecodeChunk, stream, partition, record count), patch each batch's
//     baseOffset to its assigned offset and add it to a segfmt.Writer: batch bytes are
//     copied verbatim, never re-encoded.
//  5. Put the segment with IfAbsent under seg/<stream>/<partition>/<base>-<ULID>.seg.
//  6. SwapIndex(Old: the picked WAL entries exactly as the index holds them, New: the
//     segment's entry {KindSegment, Offset: data offset, Length: data length}). The sequencer
//     retires WAL objects that no entry references any more; gc deletes them after grace.
//  7. Repeat from 1 while a full segment's worth is pending (at most 64 rounds), then
//     ReleaseLease.
//
// Work accounting costs one coordination-store write per WAL object, plus one per node
// whose objects a notification's segments covered (the bytes done are subtracted), plus,
// per sweep, one per node whose counts were off. Sweep corrects the counts from the index
// and drops the counts that reached zero, so a node's item holds only partitions with
// pending bytes.
//
// # Failures
//
// Notifications arrive at least once, out of order, and may race: a claim in the
// coordination store (coord.Notifications, keyed by bucket, key and S3 sequencer) makes a
// redelivery a no-op, and the lease plus the sequencer's check that Old still matches the
// index make two segmenters on one partition safe: one swap wins, the other is refused
// (meta.ErrLeaseLost or meta.ErrIndexChanged) and deletes the object it wrote once the
// sequencer confirms no entry references it (Referenced). A segmenter that dies
// after its PUT leaves an object no entry references (the swap is one Raft proposal: it
// happened or it did not); gc's orphan sweep deletes it. Its lease lapses after LeaseTTL and
// the next invocation redoes the work under a fresh key. A swap whose outcome is unknown
// (ErrUnavailable) leaves the object alone, since deleting a referenced object would lose
// data; gc decides later by asking the sequencer whether it is referenced.
//
// # Caveats
//
//   - A segment is built in memory: up to about TargetBytes plus one WAL chunk, per
//     partition being segmented (Config.SweepParallel of them during a sweep).
//   - Partitions segmented by age produce small segments; nothing merges them yet.
//   - The number of writing nodes a notification scales its node's share by is the count
//     of live nodes in the registry (read at most once a minute) or of nodes with pending
//     bytes at this process's last Sweep, whichever is more. An underestimate delays
//     segmenting (a partition written by n nodes counted as 1 waits for about n x
//     TargetBytes, then Partition writes several segments) or leaves it to MaxAge; an
//     overestimate costs Lookups, never a wrong segment.
//   - A sweep holds every node's counts in memory (at most 400 KB per node item) and the
//     index's pending bytes per partition and node for partitions with WAL data.
//   - Without a coordination store every notification Lookups each partition of its object
//     (read-only; no lease is taken unless there is work).
//   - Partitions of namespaces with a key (Config.Keys, sealed.go) are segmented under
//     ns/<id>/seg/, sealed in pages; building one holds the segment twice (plaintext and
//     sealed). Without Keys their sealed chunks stay in the WAL (ErrSealedChunk).
//   - Partitions of arrow streams become arrow segments (arrow.go): their record batches
//     regrouped column by column, no value re-encoded. Memory: the segment plus one group
//     (about ArrowGroupBytes) and the chunk it is being cut from.
package segmenter
