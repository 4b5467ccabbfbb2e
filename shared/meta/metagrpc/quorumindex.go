package metagrpc

import (
	"context"

	"google.golang.org/grpc"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// The offset index of quorum streams over loam.meta.v1.QuorumIndex
// (meta.QuorumIndexClient). An append is repeated when its outcome is unknown: a repeat of
// an applied append answers nil.

var _ meta.QuorumIndexClient = (*client)(nil)

func (c *client) AppendSegments(ctx context.Context, a meta.SegmentAppend) error {
	cmd := &metapb.AppendSegmentsCmd{StreamId: a.Lease.StreamID, Partition: a.Lease.Partition, LeaseHolder: a.Lease.Holder,
		LeaseEpoch: a.Lease.Epoch, Entries: make([]*metapb.SegmentEntry, len(a.Entries))}
	for i, e := range a.Entries {
		cmd.Entries[i] = &metapb.SegmentEntry{BaseOffset: e.BaseOffset, Count: e.Count, Object: e.Object, Offset: e.Offset,
			Length: e.Length, MaxTimestamp: e.MaxTimestamp, Kind: uint32(e.Kind)}
	}
	req := &metapb.AppendSegmentsRequest{Append: cmd, StampMs: a.StampMs}
	return c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		_, err := metapb.NewQuorumIndexClient(cc).AppendSegments(ctx, req)
		return err
	})
}
