package metagrpc

import (
	"context"

	"google.golang.org/grpc"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Quorum placement over loam.meta.v1.JournalPlacement. Creating a journal, a membership
// change at an epoch an assignment and the steps of a move are idempotent (a repeat answers the record or
// changes nothing), so they are repeated like reads.

func (c *client) CreateJournal(ctx context.Context, j meta.Journal) (meta.Journal, error) {
	var out meta.Journal
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewJournalPlacementClient(cc).CreateJournal(ctx, &metapb.CreateJournalRequest{Journal: metapb.FromJournal(j)})
		out = metapb.ToJournal(r.GetJournal())
		return err
	})
	return out, err
}

func (c *client) SetJournalMembers(ctx context.Context, id string, epoch uint64, members []meta.JournalMember) (meta.Journal, error) {
	var out meta.Journal
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewJournalPlacementClient(cc).SetJournalMembers(ctx, &metapb.SetJournalMembersRequest{Id: id, Epoch: epoch,
			Members: metapb.FromJournalMembers(members)})
		out = metapb.ToJournal(r.GetJournal())
		return err
	})
	return out, err
}

func (c *client) AssignJournalPartitions(ctx context.Context, streamID uint64, partitions []int32, journal string) error {
	return c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		_, err := metapb.NewJournalPlacementClient(cc).AssignJournalPartitions(ctx, &metapb.AssignJournalPartitionsRequest{StreamId: streamID,
			Partitions: partitions, Journal: journal})
		return err
	})
}

func (c *client) ListJournals(ctx context.Context) (meta.Placement, error) {
	var out meta.Placement
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewJournalPlacementClient(cc).ListJournals(ctx, &metapb.ListJournalsRequest{})
		out = metapb.ToPlacement(r)
		return err
	})
	return out, err
}

func (c *client) SealJournalMove(ctx context.Context, m meta.JournalMove) error {
	return c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		_, err := metapb.NewJournalPlacementClient(cc).SealJournalMove(ctx, &metapb.SealJournalMoveRequest{Move: metapb.FromJournalMove(m)})
		return err
	})
}

func (c *client) CompleteJournalMove(ctx context.Context, streamID uint64, partition int32, journal string, end int64) error {
	return c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		_, err := metapb.NewJournalPlacementClient(cc).CompleteJournalMove(ctx, &metapb.CompleteJournalMoveRequest{StreamId: streamID,
			Partition: partition, Journal: journal, End: end})
		return err
	})
}
