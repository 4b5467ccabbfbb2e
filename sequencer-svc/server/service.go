package server

import (
	"context"
	"strconv"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// service is the loam.meta.v1.Sequencer gRPC service over a Node. Every call is routed
// (forward.go): writes, AddVoter, RemoveServer and ReadIndex run on the leader (a follower
// forwards the request unchanged and relays the answer); reads run on this voter once it
// has caught up, else on the leader; Watch and Members are answered by this voter. Each
// exported handler routes; its lower-case twin runs the call on this node. Every error
// leaves through metagrpc.Status, so metagrpc clients see the meta sentinels again.
type service struct {
	metapb.UnimplementedSequencerServer
	n *Node
}

func write[Req, Resp any](ctx context.Context, n *Node, req Req, local func(context.Context, Req) (Resp, error), remote rpcFn[Req, Resp]) (Resp, error) {
	resp, err := routeWrite(viaRPC(ctx), n, req, local, remote)
	return resp, metagrpc.Status(err)
}

func read[Req, Resp any](ctx context.Context, n *Node, req Req, local func(context.Context, Req) (Resp, error), remote rpcFn[Req, Resp]) (Resp, error) {
	resp, err := routeRead(viaRPC(ctx), n, req, local, remote)
	return resp, metagrpc.Status(err)
}

func (s *service) CreateNamespace(ctx context.Context, r *metapb.CreateNamespaceRequest) (*metapb.CreateNamespaceResponse, error) {
	return write(ctx, s.n, r, s.createNamespace, metapb.SequencerClient.CreateNamespace)
}

func (s *service) createNamespace(ctx context.Context, r *metapb.CreateNamespaceRequest) (*metapb.CreateNamespaceResponse, error) {
	if err := s.n.CreateNamespace(ctx, r.GetName()); err != nil {
		return nil, err
	}
	return &metapb.CreateNamespaceResponse{}, nil
}

func (s *service) ListNamespaces(ctx context.Context, r *metapb.ListNamespacesRequest) (*metapb.ListNamespacesResponse, error) {
	return read(ctx, s.n, r, s.listNamespaces, metapb.SequencerClient.ListNamespaces)
}

func (s *service) listNamespaces(ctx context.Context, _ *metapb.ListNamespacesRequest) (*metapb.ListNamespacesResponse, error) {
	names, err := s.n.ListNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	return &metapb.ListNamespacesResponse{Names: names}, nil
}

func (s *service) CreateStream(ctx context.Context, r *metapb.CreateStreamRequest) (*metapb.CreateStreamResponse, error) {
	return write(ctx, s.n, r, s.createStream, metapb.SequencerClient.CreateStream)
}

func (s *service) createStream(ctx context.Context, r *metapb.CreateStreamRequest) (*metapb.CreateStreamResponse, error) {
	st, err := s.n.CreateStream(ctx, metapb.ToStreamConfig(r.GetConfig()))
	if err != nil {
		return nil, err
	}
	return &metapb.CreateStreamResponse{Stream: metapb.FromStream(st)}, nil
}

func (s *service) UpdateStream(ctx context.Context, r *metapb.UpdateStreamRequest) (*metapb.UpdateStreamResponse, error) {
	return write(ctx, s.n, r, s.updateStream, metapb.SequencerClient.UpdateStream)
}

func (s *service) updateStream(ctx context.Context, r *metapb.UpdateStreamRequest) (*metapb.UpdateStreamResponse, error) {
	st, err := s.n.UpdateStream(ctx, r.GetNamespace(), r.GetName(), metapb.ToStreamPatch(r.GetPatch()))
	if err != nil {
		return nil, err
	}
	return &metapb.UpdateStreamResponse{Stream: metapb.FromStream(st)}, nil
}

func (s *service) DeleteStream(ctx context.Context, r *metapb.DeleteStreamRequest) (*metapb.DeleteStreamResponse, error) {
	return write(ctx, s.n, r, s.deleteStream, metapb.SequencerClient.DeleteStream)
}

func (s *service) deleteStream(ctx context.Context, r *metapb.DeleteStreamRequest) (*metapb.DeleteStreamResponse, error) {
	if err := s.n.DeleteStream(ctx, r.GetNamespace(), r.GetName()); err != nil {
		return nil, err
	}
	return &metapb.DeleteStreamResponse{}, nil
}

func (s *service) GetStream(ctx context.Context, r *metapb.GetStreamRequest) (*metapb.GetStreamResponse, error) {
	return read(ctx, s.n, r, s.getStream, metapb.SequencerClient.GetStream)
}

func (s *service) getStream(ctx context.Context, r *metapb.GetStreamRequest) (*metapb.GetStreamResponse, error) {
	st, parts, err := s.n.GetStream(ctx, r.GetNamespace(), r.GetName())
	if err != nil {
		return nil, err
	}
	out := &metapb.GetStreamResponse{Stream: metapb.FromStream(st), Partitions: make([]*metapb.PartitionState, len(parts))}
	for i, p := range parts {
		out.Partitions[i] = metapb.FromPartitionState(p)
	}
	return out, nil
}

func (s *service) ListStreams(ctx context.Context, r *metapb.ListStreamsRequest) (*metapb.ListStreamsResponse, error) {
	return read(ctx, s.n, r, s.listStreams, metapb.SequencerClient.ListStreams)
}

func (s *service) listStreams(ctx context.Context, r *metapb.ListStreamsRequest) (*metapb.ListStreamsResponse, error) {
	streams, err := s.n.ListStreams(ctx, r.GetNamespace())
	if err != nil {
		return nil, err
	}
	out := &metapb.ListStreamsResponse{Streams: make([]*metapb.Stream, len(streams))}
	for i, st := range streams {
		out.Streams[i] = metapb.FromStream(st)
	}
	return out, nil
}

func (s *service) CommitWal(ctx context.Context, r *metapb.CommitWalRequest) (*metapb.CommitWalResponse, error) {
	return write(ctx, s.n, r, s.commitWal, metapb.SequencerClient.CommitWal)
}

func (s *service) commitWal(ctx context.Context, r *metapb.CommitWalRequest) (*metapb.CommitWalResponse, error) {
	res, err := s.n.CommitWal(ctx, metapb.ToCommitWal(r))
	if err != nil {
		return nil, err
	}
	return metapb.FromCommitResult(res), nil
}

func (s *service) Lookup(ctx context.Context, r *metapb.LookupRequest) (*metapb.LookupResponse, error) {
	return read(ctx, s.n, r, s.lookup, metapb.SequencerClient.Lookup)
}

func (s *service) lookup(ctx context.Context, r *metapb.LookupRequest) (*metapb.LookupResponse, error) {
	es, st, err := s.n.Lookup(ctx, r.GetStreamId(), r.GetPartition(), r.GetFrom(), int(r.GetMax()))
	if err != nil {
		return nil, err
	}
	return &metapb.LookupResponse{Entries: metapb.FromIndexEntries(es), State: metapb.FromPartitionState(st)}, nil
}

// Watch streams this voter's applied events (no routing: a follower's events arrive as it
// applies them). A watch from now (from_index 0) first lets this voter catch up with the
// leader (catchUp), so it starts after every write acknowledged before it.
func (s *service) Watch(r *metapb.WatchRequest, stream grpc.ServerStreamingServer[metapb.Event]) error {
	ctx := stream.Context()
	if r.GetFromIndex() == 0 {
		s.n.catchUp(ctx)
	}
	err := s.n.watch(ctx, r.GetFromIndex(), func(start uint64) error {
		return stream.SendHeader(metadata.Pairs(metagrpc.AppliedIndexHeader, strconv.FormatUint(start, 10)))
	}, func(ev meta.Event) error {
		return stream.Send(metapb.FromEvent(ev))
	})
	if ctx.Err() != nil {
		return nil // the client went away
	}
	return metagrpc.Status(err)
}

func (s *service) AcquireLease(ctx context.Context, r *metapb.AcquireLeaseRequest) (*metapb.AcquireLeaseResponse, error) {
	return write(ctx, s.n, r, s.acquireLease, metapb.SequencerClient.AcquireLease)
}

func (s *service) acquireLease(ctx context.Context, r *metapb.AcquireLeaseRequest) (*metapb.AcquireLeaseResponse, error) {
	l, err := s.n.AcquireLease(ctx, r.GetStreamId(), r.GetPartition(), r.GetKind(), r.GetHolder(), time.Duration(r.GetTtlMs())*time.Millisecond)
	if err != nil {
		return nil, err
	}
	return &metapb.AcquireLeaseResponse{Lease: metapb.FromLease(l)}, nil
}

func (s *service) ReleaseLease(ctx context.Context, r *metapb.ReleaseLeaseRequest) (*metapb.ReleaseLeaseResponse, error) {
	return write(ctx, s.n, r, s.releaseLease, metapb.SequencerClient.ReleaseLease)
}

func (s *service) releaseLease(ctx context.Context, r *metapb.ReleaseLeaseRequest) (*metapb.ReleaseLeaseResponse, error) {
	if err := s.n.ReleaseLease(ctx, metapb.ToLease(r.GetLease())); err != nil {
		return nil, err
	}
	return &metapb.ReleaseLeaseResponse{}, nil
}

func (s *service) SwapIndex(ctx context.Context, r *metapb.SwapIndexRequest) (*metapb.SwapIndexResponse, error) {
	return write(ctx, s.n, r, s.swapIndex, metapb.SequencerClient.SwapIndex)
}

func (s *service) swapIndex(ctx context.Context, r *metapb.SwapIndexRequest) (*metapb.SwapIndexResponse, error) {
	err := s.n.SwapIndex(ctx, meta.IndexSwap{Lease: metapb.ToLease(r.GetLease()), Old: metapb.ToIndexEntries(r.GetOld()),
		New: metapb.ToIndexEntries(r.GetNew()), StampMs: r.GetStampMs()})
	if err != nil {
		return nil, err
	}
	return &metapb.SwapIndexResponse{}, nil
}

func (s *service) TrimPartition(ctx context.Context, r *metapb.TrimPartitionRequest) (*metapb.TrimPartitionResponse, error) {
	return write(ctx, s.n, r, s.trimPartition, metapb.SequencerClient.TrimPartition)
}

func (s *service) trimPartition(ctx context.Context, r *metapb.TrimPartitionRequest) (*metapb.TrimPartitionResponse, error) {
	st, err := s.n.TrimPartition(ctx, r.GetStreamId(), r.GetPartition(), r.GetLogStart())
	if err != nil {
		return nil, err
	}
	return &metapb.TrimPartitionResponse{State: metapb.FromPartitionState(st)}, nil
}

func (s *service) ListRetired(ctx context.Context, r *metapb.ListRetiredRequest) (*metapb.ListRetiredResponse, error) {
	return read(ctx, s.n, r, s.listRetired, metapb.SequencerClient.ListRetired)
}

func (s *service) listRetired(ctx context.Context, r *metapb.ListRetiredRequest) (*metapb.ListRetiredResponse, error) {
	objs, err := s.n.ListRetired(ctx, r.GetAfter(), int(r.GetLimit()))
	if err != nil {
		return nil, err
	}
	return &metapb.ListRetiredResponse{Objects: metapb.FromRetired(objs)}, nil
}

func (s *service) ForgetRetired(ctx context.Context, r *metapb.ForgetRetiredRequest) (*metapb.ForgetRetiredResponse, error) {
	return write(ctx, s.n, r, s.forgetRetired, metapb.SequencerClient.ForgetRetired)
}

func (s *service) forgetRetired(ctx context.Context, r *metapb.ForgetRetiredRequest) (*metapb.ForgetRetiredResponse, error) {
	if err := s.n.ForgetRetired(ctx, r.GetKeys()); err != nil {
		return nil, err
	}
	return &metapb.ForgetRetiredResponse{}, nil
}

func (s *service) Referenced(ctx context.Context, r *metapb.ReferencedRequest) (*metapb.ReferencedResponse, error) {
	return read(ctx, s.n, r, s.referenced, metapb.SequencerClient.Referenced)
}

func (s *service) referenced(ctx context.Context, r *metapb.ReferencedRequest) (*metapb.ReferencedResponse, error) {
	refs, err := s.n.Referenced(ctx, r.GetKeys())
	if err != nil {
		return nil, err
	}
	return &metapb.ReferencedResponse{Referenced: refs}, nil
}

func (s *service) AddVoter(ctx context.Context, r *metapb.AddVoterRequest) (*metapb.AddVoterResponse, error) {
	return write(ctx, s.n, r, s.addVoter, metapb.SequencerClient.AddVoter)
}

func (s *service) addVoter(ctx context.Context, r *metapb.AddVoterRequest) (*metapb.AddVoterResponse, error) {
	if err := s.n.AddVoter(ctx, r.GetId(), r.GetRaftAddr(), r.GetNonvoter()); err != nil {
		return nil, err
	}
	return &metapb.AddVoterResponse{}, nil
}

func (s *service) RemoveServer(ctx context.Context, r *metapb.RemoveServerRequest) (*metapb.RemoveServerResponse, error) {
	return write(ctx, s.n, r, s.removeServer, metapb.SequencerClient.RemoveServer)
}

func (s *service) removeServer(ctx context.Context, r *metapb.RemoveServerRequest) (*metapb.RemoveServerResponse, error) {
	if err := s.n.RemoveServer(ctx, r.GetId()); err != nil {
		return nil, err
	}
	return &metapb.RemoveServerResponse{}, nil
}

// Members answers from this voter's configuration (no routing).
func (s *service) Members(ctx context.Context, _ *metapb.MembersRequest) (*metapb.MembersResponse, error) {
	ms, err := s.n.Members(ctx)
	if err != nil {
		return nil, metagrpc.Status(err)
	}
	out := &metapb.MembersResponse{AppliedIndex: s.n.AppliedIndex()}
	for _, m := range ms {
		out.Members = append(out.Members, &metapb.Member{Id: m.ID, RaftAddr: m.RaftAddr, RpcAddr: m.RPCAddr, Voter: m.Voter, Leader: m.Leader})
	}
	return out, nil
}

func (s *service) ReadIndex(ctx context.Context, r *metapb.ReadIndexRequest) (*metapb.ReadIndexResponse, error) {
	return write(ctx, s.n, r, s.n.localReadIndex, metapb.SequencerClient.ReadIndex)
}
