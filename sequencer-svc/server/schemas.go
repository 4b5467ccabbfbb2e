package server

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Arrow streams' schemas (meta.SchemaClient): a Raft command stores them, the leader
// answers reads from its state machine. A follower forwards both to the leader.

// CreateArrowStream creates an arrow stream with schema version 1 in one command.
func (n *Node) CreateArrowStream(ctx context.Context, c meta.StreamConfig, schema []byte) (meta.Stream, meta.StreamSchema, error) {
	res, err := n.propose(ctx, fsm.CreateArrowStream(c, schema))
	if err != nil {
		return meta.Stream{}, meta.StreamSchema{}, err
	}
	return res.Stream, res.Schema, nil
}

// PutSchema stores a stream's next schema version.
func (n *Node) PutSchema(ctx context.Context, p meta.PutSchema) (meta.StreamSchema, error) {
	res, err := n.propose(ctx, fsm.PutSchema(p))
	if err != nil {
		return meta.StreamSchema{}, err
	}
	return res.Schema, nil
}

// GetSchema answers from this node's state (the caller makes sure it may: the leader,
// ready).
func (n *Node) GetSchema(ctx context.Context, streamID uint64, version uint32) (meta.StreamSchema, error) {
	if err := n.waitReady(ctx); err != nil {
		return meta.StreamSchema{}, err
	}
	return n.fsm.GetSchema(streamID, version)
}

// onLeaderConn runs local on the leader, else forwards the call to it (see onLeader).
func onLeaderConn[Resp any](ctx context.Context, n *Node, local func(context.Context) (Resp, error), remote func(context.Context, grpc.ClientConnInterface) (Resp, error)) (Resp, error) {
	var zero Resp
	if forwardedFrom(ctx) != "" || n.raft.State() == raft.Leader {
		resp, err := local(ctx)
		if forwardedFrom(ctx) != "" || !errors.Is(err, meta.ErrNotLeader) {
			return resp, err
		}
	}
	addr, self := n.leaderAddr(ctx, "")
	if self || addr == "" {
		if err := ctxErr(ctx); err != nil {
			return zero, err
		}
		return zero, n.notLeader()
	}
	conn, err := n.rt.peers.conn(addr)
	if err != nil {
		return zero, err
	}
	fctx := metadata.NewOutgoingContext(ctx, metadata.Pairs(metagrpc.ForwardedHeader, n.cfg.ID))
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(fctx, n.cfg.ApplyTimeout+time.Second)
		defer cancel()
	}
	resp, err := remote(fctx, conn)
	if err != nil {
		return zero, metagrpc.FromStatus(err)
	}
	return resp, nil
}

func (c localClient) CreateArrowStream(ctx context.Context, cfg meta.StreamConfig, schema []byte) (meta.Stream, meta.StreamSchema, error) {
	type out struct {
		s  meta.Stream
		sc meta.StreamSchema
	}
	o, err := onLeaderConn(ctx, c.n, func(ctx context.Context) (out, error) {
		s, sc, err := c.n.CreateArrowStream(ctx, cfg, schema)
		return out{s, sc}, err
	}, func(ctx context.Context, cc grpc.ClientConnInterface) (out, error) {
		put := fsm.CreateArrowStream(cfg, schema).GetSchema().GetPut()
		r, err := metapb.NewStreamSchemasClient(cc).PutSchema(ctx, &metapb.PutSchemaRequest{Put: put})
		return out{sc: fsm.ToSchema(r.GetSchema())}, err
	})
	if err != nil {
		return meta.Stream{}, meta.StreamSchema{}, err
	}
	if o.s.ID == 0 { // forwarded: read the stream the leader created
		if o.s, _, err = c.GetStream(ctx, cfg.Namespace, cfg.Name); err != nil {
			return meta.Stream{}, meta.StreamSchema{}, err
		}
	}
	return o.s, o.sc, nil
}

func (c localClient) PutSchema(ctx context.Context, p meta.PutSchema) (meta.StreamSchema, error) {
	return onLeaderConn(ctx, c.n, func(ctx context.Context) (meta.StreamSchema, error) { return c.n.PutSchema(ctx, p) },
		func(ctx context.Context, cc grpc.ClientConnInterface) (meta.StreamSchema, error) {
			r, err := metapb.NewStreamSchemasClient(cc).PutSchema(ctx, &metapb.PutSchemaRequest{Put: fsm.PutSchema(p).GetSchema().GetPut()})
			return fsm.ToSchema(r.GetSchema()), err
		})
}

func (c localClient) GetSchema(ctx context.Context, id uint64, v uint32) (meta.StreamSchema, error) {
	return onLeaderConn(ctx, c.n, func(ctx context.Context) (meta.StreamSchema, error) { return c.n.GetSchema(ctx, id, v) },
		func(ctx context.Context, cc grpc.ClientConnInterface) (meta.StreamSchema, error) {
			r, err := metapb.NewStreamSchemasClient(cc).GetSchema(ctx, &metapb.GetSchemaRequest{StreamId: id, Version: v})
			return fsm.ToSchema(r.GetSchema()), err
		})
}

// schemaService serves loam.meta.v1.StreamSchemas.
type schemaService struct {
	metapb.UnimplementedStreamSchemasServer
	n *Node
}

func (s *schemaService) PutSchema(ctx context.Context, r *metapb.PutSchemaRequest) (*metapb.PutSchemaResponse, error) {
	p := r.GetPut()
	lc := localClient{n: s.n, s: &service{n: s.n}}
	var sc meta.StreamSchema
	var err error
	if p.GetCreate() {
		_, sc, err = lc.CreateArrowStream(viaRPC(ctx), meta.StreamConfig{Namespace: p.GetNamespace(), Name: p.GetStream(),
			Partitions: p.GetPartitions(), Class: p.GetClass(), RetentionMs: p.GetRetentionMs(),
			RetentionBytes: p.GetRetentionBytes(), CleanupPolicy: p.GetCleanupPolicy()}, p.GetSchemaJson())
	} else {
		sc, err = lc.PutSchema(viaRPC(ctx), meta.PutSchema{Namespace: p.GetNamespace(), Stream: p.GetStream(),
			Schema: p.GetSchemaJson(), ExpectVersion: p.GetExpectVersion()})
	}
	if err != nil {
		return nil, metagrpc.Status(err)
	}
	return &metapb.PutSchemaResponse{Schema: &metapb.StreamSchema{StreamId: sc.StreamID, Version: sc.Version, SchemaJson: sc.Schema, CreatedMs: sc.CreatedMs}}, nil
}

func (s *schemaService) GetSchema(ctx context.Context, r *metapb.GetSchemaRequest) (*metapb.GetSchemaResponse, error) {
	sc, err := localClient{n: s.n}.GetSchema(viaRPC(ctx), r.GetStreamId(), r.GetVersion())
	if err != nil {
		return nil, metagrpc.Status(err)
	}
	return &metapb.GetSchemaResponse{Schema: &metapb.StreamSchema{StreamId: sc.StreamID, Version: sc.Version, SchemaJson: sc.Schema, CreatedMs: sc.CreatedMs}}, nil
}
