package server

import (
	"context"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// NewLocalClient returns a meta.Client that calls node directly, without gRPC (loam dev
// runs the sequencer and a log node in one process). It answers exactly what the gRPC
// client would for the same node; a follower answers meta.NotLeaderError (no forwarding).
// Close does not close the node.
func NewLocalClient(node *Node) meta.Client { return localClient{node} }

type localClient struct{ n *Node }

func (c localClient) CreateNamespace(ctx context.Context, name string) error {
	return c.n.CreateNamespace(ctx, name)
}

func (c localClient) ListNamespaces(ctx context.Context) ([]string, error) {
	return c.n.ListNamespaces(ctx)
}

func (c localClient) CreateStream(ctx context.Context, cfg meta.StreamConfig) (meta.Stream, error) {
	return c.n.CreateStream(ctx, cfg)
}

func (c localClient) UpdateStream(ctx context.Context, ns, name string, p meta.StreamPatch) (meta.Stream, error) {
	return c.n.UpdateStream(ctx, ns, name, p)
}

func (c localClient) DeleteStream(ctx context.Context, ns, name string) error {
	return c.n.DeleteStream(ctx, ns, name)
}

func (c localClient) GetStream(ctx context.Context, ns, name string) (meta.Stream, []meta.PartitionState, error) {
	return c.n.GetStream(ctx, ns, name)
}

func (c localClient) ListStreams(ctx context.Context, ns string) ([]meta.Stream, error) {
	return c.n.ListStreams(ctx, ns)
}

func (c localClient) CommitWal(ctx context.Context, cw meta.CommitWal) (meta.CommitResult, error) {
	return c.n.CommitWal(ctx, cw)
}

func (c localClient) Lookup(ctx context.Context, id uint64, p int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error) {
	return c.n.Lookup(ctx, id, p, from, max)
}

func (c localClient) Watch(ctx context.Context, from uint64, fn func(meta.Event) error) error {
	return c.n.Watch(ctx, from, fn)
}

func (c localClient) Close() error { return nil }

func (c localClient) AcquireLease(ctx context.Context, id uint64, p int32, kind, holder string, ttl time.Duration) (meta.Lease, error) {
	return c.n.AcquireLease(ctx, id, p, kind, holder, ttl)
}

func (c localClient) ReleaseLease(ctx context.Context, l meta.Lease) error {
	return c.n.ReleaseLease(ctx, l)
}

func (c localClient) SwapIndex(ctx context.Context, s meta.IndexSwap) error {
	return c.n.SwapIndex(ctx, s)
}

func (c localClient) TrimPartition(ctx context.Context, id uint64, p int32, logStart int64) (meta.PartitionState, error) {
	return c.n.TrimPartition(ctx, id, p, logStart)
}

func (c localClient) ListRetired(ctx context.Context, after string, limit int) ([]meta.RetiredObject, error) {
	return c.n.ListRetired(ctx, after, limit)
}

func (c localClient) ForgetRetired(ctx context.Context, keys []string) error {
	return c.n.ForgetRetired(ctx, keys)
}

func (c localClient) Referenced(ctx context.Context, keys []string) ([]bool, error) {
	return c.n.Referenced(ctx, keys)
}
