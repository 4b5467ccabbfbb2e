package server

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// NewLocalClient returns a meta.Client that calls node in-process (loam dev runs the
// sequencer and a log node in one process). It answers what the gRPC service of the same
// node would: on the leader it calls the node directly; on a follower it routes like the
// service (forward.go): writes are forwarded to the leader, reads wait until this node has
// caught up or are forwarded. Close does not close the node.
func NewLocalClient(node *Node) meta.Client { return localClient{node, &service{n: node}} }

type localClient struct {
	n *Node
	s *service
}

// direct reports whether err, from a direct call on the node, is final: anything but a
// NotLeader (nothing was applied; the call is then routed).
func direct(err error) bool { return !errors.Is(err, meta.ErrNotLeader) }

func (c localClient) CreateNamespace(ctx context.Context, name string) error {
	if c.n.IsLeader() {
		if err := c.n.CreateNamespace(ctx, name); direct(err) {
			return err
		}
	}
	_, err := routeWrite(ctx, c.n, &metapb.CreateNamespaceRequest{Name: name}, c.s.createNamespace, metapb.SequencerClient.CreateNamespace)
	return err
}

func (c localClient) ListNamespaces(ctx context.Context) ([]string, error) {
	if c.n.leaderReady() {
		return c.n.ListNamespaces(ctx)
	}
	r, err := routeRead(ctx, c.n, &metapb.ListNamespacesRequest{}, c.s.listNamespaces, metapb.SequencerClient.ListNamespaces)
	return r.GetNames(), err
}

func (c localClient) CreateStream(ctx context.Context, cfg meta.StreamConfig) (meta.Stream, error) {
	if c.n.IsLeader() {
		if st, err := c.n.CreateStream(ctx, cfg); direct(err) {
			return st, err
		}
	}
	r, err := routeWrite(ctx, c.n, &metapb.CreateStreamRequest{Config: metapb.FromStreamConfig(cfg)}, c.s.createStream, metapb.SequencerClient.CreateStream)
	if err != nil {
		return meta.Stream{}, err
	}
	return metapb.ToStream(r.GetStream()), nil
}

func (c localClient) UpdateStream(ctx context.Context, ns, name string, p meta.StreamPatch) (meta.Stream, error) {
	if c.n.IsLeader() {
		if st, err := c.n.UpdateStream(ctx, ns, name, p); direct(err) {
			return st, err
		}
	}
	r, err := routeWrite(ctx, c.n, &metapb.UpdateStreamRequest{Namespace: ns, Name: name, Patch: metapb.FromStreamPatch(p)},
		c.s.updateStream, metapb.SequencerClient.UpdateStream)
	if err != nil {
		return meta.Stream{}, err
	}
	return metapb.ToStream(r.GetStream()), nil
}

func (c localClient) DeleteStream(ctx context.Context, ns, name string) error {
	if c.n.IsLeader() {
		if err := c.n.DeleteStream(ctx, ns, name); direct(err) {
			return err
		}
	}
	_, err := routeWrite(ctx, c.n, &metapb.DeleteStreamRequest{Namespace: ns, Name: name}, c.s.deleteStream, metapb.SequencerClient.DeleteStream)
	return err
}

func (c localClient) GetStream(ctx context.Context, ns, name string) (meta.Stream, []meta.PartitionState, error) {
	if c.n.leaderReady() {
		return c.n.GetStream(ctx, ns, name)
	}
	r, err := routeRead(ctx, c.n, &metapb.GetStreamRequest{Namespace: ns, Name: name}, c.s.getStream, metapb.SequencerClient.GetStream)
	if err != nil {
		return meta.Stream{}, nil, err
	}
	parts := make([]meta.PartitionState, len(r.GetPartitions()))
	for i, p := range r.GetPartitions() {
		parts[i] = metapb.ToPartitionState(p)
	}
	return metapb.ToStream(r.GetStream()), parts, nil
}

func (c localClient) ListStreams(ctx context.Context, ns string) ([]meta.Stream, error) {
	if c.n.leaderReady() {
		return c.n.ListStreams(ctx, ns)
	}
	r, err := routeRead(ctx, c.n, &metapb.ListStreamsRequest{Namespace: ns}, c.s.listStreams, metapb.SequencerClient.ListStreams)
	if err != nil {
		return nil, err
	}
	var out []meta.Stream
	for _, st := range r.GetStreams() {
		out = append(out, metapb.ToStream(st))
	}
	return out, nil
}

func (c localClient) CommitWal(ctx context.Context, cw meta.CommitWal) (meta.CommitResult, error) {
	if c.n.IsLeader() {
		if res, err := c.n.CommitWal(ctx, cw); direct(err) {
			return res, err
		}
	}
	r, err := routeWrite(ctx, c.n, metapb.FromCommitWal(cw), c.s.commitWal, metapb.SequencerClient.CommitWal)
	if err != nil {
		return meta.CommitResult{}, err
	}
	return metapb.ToCommitResult(r), nil
}

func (c localClient) Lookup(ctx context.Context, id uint64, p int32, from int64, maxEntries int) ([]meta.IndexEntry, meta.PartitionState, error) {
	if c.n.leaderReady() {
		return c.n.Lookup(ctx, id, p, from, maxEntries)
	}
	m := int32(min(max(0, maxEntries), math.MaxInt32))
	r, err := routeRead(ctx, c.n, &metapb.LookupRequest{StreamId: id, Partition: p, From: from, Max: m}, c.s.lookup, metapb.SequencerClient.Lookup)
	if err != nil {
		return nil, meta.PartitionState{}, err
	}
	return metapb.ToIndexEntries(r.GetEntries()), metapb.ToPartitionState(r.GetState()), nil
}

// Watch streams this node's applied events (as the service does: no routing, and a watch
// from now first catches up with the leader).
func (c localClient) Watch(ctx context.Context, from uint64, fn func(meta.Event) error) error {
	if from == 0 {
		c.n.catchUp(ctx)
	}
	return c.n.Watch(ctx, from, fn)
}

func (c localClient) Close() error { return nil }

func (c localClient) AcquireLease(ctx context.Context, id uint64, p int32, kind, holder string, ttl time.Duration) (meta.Lease, error) {
	if c.n.IsLeader() {
		if l, err := c.n.AcquireLease(ctx, id, p, kind, holder, ttl); direct(err) {
			return l, err
		}
	}
	r, err := routeWrite(ctx, c.n, &metapb.AcquireLeaseRequest{StreamId: id, Partition: p, Kind: kind, Holder: holder, TtlMs: ttl.Milliseconds()},
		c.s.acquireLease, metapb.SequencerClient.AcquireLease)
	if err != nil {
		return meta.Lease{}, err
	}
	return metapb.ToLease(r.GetLease()), nil
}

func (c localClient) ReleaseLease(ctx context.Context, l meta.Lease) error {
	if c.n.IsLeader() {
		if err := c.n.ReleaseLease(ctx, l); direct(err) {
			return err
		}
	}
	_, err := routeWrite(ctx, c.n, &metapb.ReleaseLeaseRequest{Lease: metapb.FromLease(l)}, c.s.releaseLease, metapb.SequencerClient.ReleaseLease)
	return err
}

func (c localClient) SwapIndex(ctx context.Context, s meta.IndexSwap) error {
	if c.n.IsLeader() {
		if err := c.n.SwapIndex(ctx, s); direct(err) {
			return err
		}
	}
	_, err := routeWrite(ctx, c.n, &metapb.SwapIndexRequest{Lease: metapb.FromLease(s.Lease), Old: metapb.FromIndexEntries(s.Old),
		New: metapb.FromIndexEntries(s.New), StampMs: s.StampMs}, c.s.swapIndex, metapb.SequencerClient.SwapIndex)
	return err
}

func (c localClient) TrimPartition(ctx context.Context, id uint64, p int32, logStart int64) (meta.PartitionState, error) {
	if c.n.IsLeader() {
		if st, err := c.n.TrimPartition(ctx, id, p, logStart); direct(err) {
			return st, err
		}
	}
	r, err := routeWrite(ctx, c.n, &metapb.TrimPartitionRequest{StreamId: id, Partition: p, LogStart: logStart},
		c.s.trimPartition, metapb.SequencerClient.TrimPartition)
	if err != nil {
		return meta.PartitionState{}, err
	}
	return metapb.ToPartitionState(r.GetState()), nil
}

func (c localClient) ListRetired(ctx context.Context, after string, limit int) ([]meta.RetiredObject, error) {
	if c.n.leaderReady() {
		return c.n.ListRetired(ctx, after, limit)
	}
	l := int32(min(max(limit, 0), math.MaxInt32))
	r, err := routeRead(ctx, c.n, &metapb.ListRetiredRequest{After: after, Limit: l}, c.s.listRetired, metapb.SequencerClient.ListRetired)
	if err != nil {
		return nil, err
	}
	return metapb.ToRetired(r.GetObjects()), nil
}

func (c localClient) ForgetRetired(ctx context.Context, keys []string) error {
	if c.n.IsLeader() {
		if err := c.n.ForgetRetired(ctx, keys); direct(err) {
			return err
		}
	}
	_, err := routeWrite(ctx, c.n, &metapb.ForgetRetiredRequest{Keys: keys}, c.s.forgetRetired, metapb.SequencerClient.ForgetRetired)
	return err
}

func (c localClient) Referenced(ctx context.Context, keys []string) ([]bool, error) {
	if c.n.leaderReady() {
		return c.n.Referenced(ctx, keys)
	}
	r, err := routeRead(ctx, c.n, &metapb.ReferencedRequest{Keys: keys}, c.s.referenced, metapb.SequencerClient.Referenced)
	if err != nil {
		return nil, err
	}
	return r.GetReferenced(), nil
}
