package meta

import "context"

// The offset index of quorum streams. A partition of a quorum stream lives in a journal
// (lognode-svc/journal), which assigns its offsets; the sequencer does not. What the
// journal seals is offloaded to segments, and the segments are appended to the partition's
// index here, so readers find them through Lookup like any other stream's. The partition's
// high watermark in the sequencer is the end of its last offloaded segment (what the index
// covers), the journal's own is ahead of it.

// LeaseOffload is the lease kind that fences a journal's offload of a partition.
const LeaseOffload = "offload"

// SegmentAppend appends segment entries to a quorum partition's index.
type SegmentAppend struct {
	// Lease is the current grant of the partition's LeaseOffload lease.
	Lease Lease
	// Entries start at the partition's high watermark, are contiguous, of kind
	// KindSegment, at most MaxSwapEntries.
	Entries []IndexEntry
	StampMs int64 // the proposer's clock (checked like CommitWal's)
}

// QuorumIndexClient appends offloaded segments to quorum partitions' indexes. The
// sequencer's clients (metagrpc, the in-process servertest client) implement it besides
// Client.
type QuorumIndexClient interface {
	// AppendSegments appends a.Entries at the end of a quorum partition's index and
	// moves its high watermark to their end, in one Raft proposal. An index that already
	// holds a.Entries exactly answers nil (a retry of an applied append, checked before
	// the lease); else only under the current, unexpired grant of a.Lease (ErrLeaseLost);
	// entries that do not start at the high watermark are ErrIndexChanged (another
	// append came first); a stream of another class is ErrInvalidArgument. Watch reports
	// the partition with the entries Added.
	AppendSegments(ctx context.Context, a SegmentAppend) error
}
