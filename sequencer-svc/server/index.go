package server

import (
	"context"
	"fmt"
	"time"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
)

// The meta.Client operations of background work: leases, index swaps, trims and the
// retired set.

// AcquireLease grants or renews a lease (meta.Client.AcquireLease).
func (n *Node) AcquireLease(ctx context.Context, streamID uint64, partition int32, kind, holder string, ttl time.Duration) (meta.Lease, error) {
	ttlMs := ttl.Milliseconds()
	if err := fsm.CheckLeaseRequest(kind, holder, ttlMs); err != nil {
		return meta.Lease{}, err
	}
	res, err := n.propose(ctx, fsm.AcquireLease(streamID, partition, kind, holder, ttlMs))
	if err != nil {
		return meta.Lease{}, err
	}
	return res.Lease, nil
}

// ReleaseLease ends l if it is still the current grant (meta.Client.ReleaseLease).
func (n *Node) ReleaseLease(ctx context.Context, l meta.Lease) error {
	_, err := n.propose(ctx, fsm.ReleaseLease(l))
	return err
}

// SwapIndex replaces index entries under a lease (meta.Client.SwapIndex). A swap stamped
// more than meta.MaxClockAhead ahead of this leader's clock (or of the majority clock,
// when that is later) is refused before it is proposed.
func (n *Node) SwapIndex(ctx context.Context, s meta.IndexSwap) error {
	if err := fsm.CheckSwap(s); err != nil {
		return err
	}
	now, ahead, err := n.checkAhead(ctx, s.StampMs, meta.MaxClockAhead)
	if err != nil {
		return err
	}
	if ahead {
		return fmt.Errorf("swap index %d/%d: stamped %d ms ahead of the leader: %w",
			s.Lease.StreamID, s.Lease.Partition, s.StampMs-now, meta.ErrClockAhead)
	}
	_, err = n.propose(ctx, fsm.SwapIndex(s))
	return err
}

// TrimPartition moves a partition's log start forward (meta.Client.TrimPartition).
func (n *Node) TrimPartition(ctx context.Context, streamID uint64, partition int32, logStart int64) (meta.PartitionState, error) {
	if logStart < 0 {
		return meta.PartitionState{}, fmt.Errorf("trim partition %d/%d to %d: %w: negative log start", streamID, partition, logStart, meta.ErrInvalidArgument)
	}
	res, err := n.propose(ctx, fsm.TrimPartition(streamID, partition, logStart))
	if err != nil {
		return meta.PartitionState{}, err
	}
	return res.Partition, nil
}

// ListRetired reads the retired set from this node's state (meta.Client.ListRetired).
func (n *Node) ListRetired(ctx context.Context, after string, limit int) ([]meta.RetiredObject, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	return n.fsm.ListRetired(after, limit)
}

// ForgetRetired removes keys from the retired set (meta.Client.ForgetRetired). No keys:
// nothing is proposed.
func (n *Node) ForgetRetired(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return ctxErr(ctx)
	}
	if len(keys) > meta.MaxRetiredList {
		return fmt.Errorf("forget retired: %d keys: %w: want at most %d", len(keys), meta.ErrInvalidArgument, meta.MaxRetiredList)
	}
	_, err := n.propose(ctx, fsm.ForgetRetired(keys))
	return err
}

// Referenced reads reference counts from this node's state (meta.Client.Referenced).
func (n *Node) Referenced(ctx context.Context, keys []string) ([]bool, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	return n.fsm.Referenced(keys)
}
