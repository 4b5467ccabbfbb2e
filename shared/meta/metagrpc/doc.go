// Package metagrpc is the gRPC client of the sequencer (meta.Client over the
// loam.meta.v1.Sequencer service) and the error mapping both ends share.
//
// # Basics
//
// Dial(ctx, addrs) returns a meta.Client that sends calls to the last voter that answered,
// follows NotLeader hints, fails over between addresses with bounded, backed-off attempts
// and reconnects Watch streams from the last event delivered (see Dial). Any voter accepts
// every call (followers forward to the leader); a forwarded answer names the leader in
// LeaderHeader and the client moves there (WithoutLeaderHeader keeps it on its voter).
// Addresses learned from such hints are bounded: the client keeps the addresses it was
// dialed with and the MaxLearned most recently preferred learned ones, and closes a
// forgotten address's connection once no call or Watch uses it (at most len(addrs) +
// MaxLearned connections).
//
// CommitWal asks for per-chunk answers (meta.CommitResult.Status; wire field per_chunk)
// unless meta.CommitWal.AllOrNothing is set.
//
// The client also implements Admin (c.(metagrpc.Admin)): AddVoter, AddNonvoter,
// RemoveServer, Members and ReadIndex, the sequencer group's membership calls, resent
// after ErrUnavailable like reads since repeating one changes nothing more.
//
// Errors: the server converts errors with Status into a status whose
// google.rpc.ErrorInfo (domain loam.meta.v1) carries the reason; FromStatus turns it back
// into an error that errors.Is matches against the meta sentinels:
//
//	NAMESPACE_NOT_FOUND, STREAM_NOT_FOUND, PARTITION_NOT_FOUND  NotFound
//	STREAM_EXISTS                                              AlreadyExists
//	INVALID_ARGUMENT                                           InvalidArgument
//	STALE_COMMIT, CLOCK_AHEAD, NOT_LEADER (metadata "leader")  FailedPrecondition
//	LEASE_HELD, LEASE_LOST                                     FailedPrecondition
//	INDEX_CHANGED                                              Aborted
//	UNAVAILABLE                                                Unavailable
//	OFFSET_OUT_OF_RANGE                                        OutOfRange
//
// A transport failure (Unavailable, DeadlineExceeded, Canceled without ErrorInfo) is
// meta.ErrUnavailable: the outcome of a write is unknown.
//
// # Caveats
//
// Writes whose repeat answers the same are resent after ErrUnavailable like reads:
// CreateNamespace, AcquireLease (the same holder renews: same epoch), ReleaseLease,
// SwapIndex (a repeat of an applied swap answers nil), TrimPartition and ForgetRetired.
// Other writes are never resent once sent: an unknown outcome is the caller's to resolve (for CommitWal the log node's, since a resend that answers
// ErrStaleCommit would otherwise look like a first attempt).
package metagrpc
