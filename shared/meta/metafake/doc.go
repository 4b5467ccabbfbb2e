// Package metafake is an in-memory test double of the background-work subset of
// meta.Client: the calls the segmenter and the compactor make (ListNamespaces, ListStreams,
// Lookup, AcquireLease, ReleaseLease, SwapIndex, Referenced).
//
// # Basics
//
// New returns a Meta with one namespace, "default", and no streams. AddStream adds a stream
// (named "s<id>") with its partitions; Commit appends an index entry at a partition's high
// watermark, as a log node's flush does, and returns its base offset. Entries, HighWatermark
// and Swaps let a test look at the state; DropLeases forgets every lease, as if each had
// expired and been taken over.
//
// Leases and swaps follow the sequencer FSM's rules: a lease held by another holder and not
// expired is refused with meta.ErrLeaseHeld; a new holder, or the same holder after expiry,
// gets a new epoch; SwapIndex needs the current, unexpired lease (else meta.ErrLeaseLost),
// Old must be a run of the index exactly as it stands (else meta.ErrIndexChanged) and New
// must cover the same offsets (else meta.ErrInvalidArgument).
//
// # Caveats
//
// It is a test double, not a sequencer: nothing is durable, there is one namespace, Lookup
// answers every entry that ends after from (up to max) without a byte budget, and Referenced
// scans every entry. Now and BeforeSwap are set by the test before the Meta is used
// concurrently; BeforeSwap runs without the Meta's lock held, so it may call the Meta.
// Unknown partitions answer meta.ErrStreamNotFound; Commit, Entries and HighWatermark on an
// unknown partition panic (a test bug).
package metafake
