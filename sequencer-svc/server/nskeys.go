package server

import (
	"context"

	"google.golang.org/grpc"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Namespace keys (meta/nskey.go): the Node's methods, the NamespaceKeys gRPC service, and
// localClient's methods. Forwarding reaches the leader's NamespaceKeys service over the
// peer connection (ccFn).

func (n *Node) proposeNamespaceKey(ctx context.Context, cmd *metapb.Command) (meta.NamespaceKey, error) {
	res, err := n.propose(ctx, cmd)
	if err != nil {
		return meta.NamespaceKey{}, err
	}
	return res.NamespaceKey, res.Err
}

// AttachNamespaceKey proposes attaching a KMS key to a namespace.
func (n *Node) AttachNamespaceKey(ctx context.Context, ns, keyARN string) (meta.NamespaceKey, error) {
	if err := meta.CheckKeyARN(keyARN); err != nil {
		return meta.NamespaceKey{}, err
	}
	return n.proposeNamespaceKey(ctx, fsm.AttachNamespaceKey(ns, keyARN))
}

// RotateNamespaceKey proposes a namespace key's next generation.
func (n *Node) RotateNamespaceKey(ctx context.Context, ns, keyARN string) (meta.NamespaceKey, error) {
	if keyARN != "" {
		if err := meta.CheckKeyARN(keyARN); err != nil {
			return meta.NamespaceKey{}, err
		}
	}
	return n.proposeNamespaceKey(ctx, fsm.RotateNamespaceKey(ns, keyARN))
}

// ShredNamespaceKey proposes recording a namespace key's shredding.
func (n *Node) ShredNamespaceKey(ctx context.Context, ns string) (meta.NamespaceKey, error) {
	return n.proposeNamespaceKey(ctx, fsm.ShredNamespaceKey(ns))
}

// AckNamespaceShred proposes recording a log node's confirmation of a shred.
func (n *Node) AckNamespaceShred(ctx context.Context, ns, node string) (meta.NamespaceKey, error) {
	return n.proposeNamespaceKey(ctx, fsm.AckNamespaceShred(ns, node))
}

// ListNamespaceKeys reads every namespace key from this node's state machine.
func (n *Node) ListNamespaceKeys(ctx context.Context) ([]meta.NamespaceKey, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	return n.fsm.ListNamespaceKeys()
}

// nsKeysService serves loam.meta.v1.NamespaceKeys.
type nsKeysService struct {
	metapb.UnimplementedNamespaceKeysServer
	n *Node
}

// registerNamespaceKeys serves loam.meta.v1.NamespaceKeys of n on s.
func registerNamespaceKeys(s *grpc.Server, n *Node) {
	metapb.RegisterNamespaceKeysServer(s, &nsKeysService{n: n})
}

func nkCall[Req, Resp any](m func(metapb.NamespaceKeysClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) ccFn[Req, Resp] {
	return func(cc grpc.ClientConnInterface, ctx context.Context, r Req) (Resp, error) {
		return m(metapb.NewNamespaceKeysClient(cc), ctx, r)
	}
}

var (
	remoteNSKeyAttach = nkCall(metapb.NamespaceKeysClient.AttachNamespaceKey)
	remoteNSKeyRotate = nkCall(metapb.NamespaceKeysClient.RotateNamespaceKey)
	remoteNSKeyShred  = nkCall(metapb.NamespaceKeysClient.ShredNamespaceKey)
	remoteNSKeyAck    = nkCall(metapb.NamespaceKeysClient.AckNamespaceShred)
	remoteNSKeyList   = nkCall(metapb.NamespaceKeysClient.ListNamespaceKeys)
)

func (s *nsKeysService) AttachNamespaceKey(ctx context.Context, r *metapb.AttachNamespaceKeyRequest) (*metapb.AttachNamespaceKeyResponse, error) {
	resp, err := routeWriteCC(viaRPC(ctx), s.n, r, s.attach, remoteNSKeyAttach)
	return resp, metagrpc.Status(err)
}

func (s *nsKeysService) attach(ctx context.Context, r *metapb.AttachNamespaceKeyRequest) (*metapb.AttachNamespaceKeyResponse, error) {
	k, err := s.n.AttachNamespaceKey(ctx, r.GetNamespace(), r.GetKeyArn())
	if err != nil {
		return nil, err
	}
	return &metapb.AttachNamespaceKeyResponse{Key: metapb.FromNamespaceKey(k)}, nil
}

func (s *nsKeysService) RotateNamespaceKey(ctx context.Context, r *metapb.RotateNamespaceKeyRequest) (*metapb.RotateNamespaceKeyResponse, error) {
	resp, err := routeWriteCC(viaRPC(ctx), s.n, r, s.rotate, remoteNSKeyRotate)
	return resp, metagrpc.Status(err)
}

func (s *nsKeysService) rotate(ctx context.Context, r *metapb.RotateNamespaceKeyRequest) (*metapb.RotateNamespaceKeyResponse, error) {
	k, err := s.n.RotateNamespaceKey(ctx, r.GetNamespace(), r.GetKeyArn())
	if err != nil {
		return nil, err
	}
	return &metapb.RotateNamespaceKeyResponse{Key: metapb.FromNamespaceKey(k)}, nil
}

func (s *nsKeysService) ShredNamespaceKey(ctx context.Context, r *metapb.ShredNamespaceKeyRequest) (*metapb.ShredNamespaceKeyResponse, error) {
	resp, err := routeWriteCC(viaRPC(ctx), s.n, r, s.shred, remoteNSKeyShred)
	return resp, metagrpc.Status(err)
}

func (s *nsKeysService) shred(ctx context.Context, r *metapb.ShredNamespaceKeyRequest) (*metapb.ShredNamespaceKeyResponse, error) {
	k, err := s.n.ShredNamespaceKey(ctx, r.GetNamespace())
	if err != nil {
		return nil, err
	}
	return &metapb.ShredNamespaceKeyResponse{Key: metapb.FromNamespaceKey(k)}, nil
}

func (s *nsKeysService) AckNamespaceShred(ctx context.Context, r *metapb.AckNamespaceShredRequest) (*metapb.AckNamespaceShredResponse, error) {
	resp, err := routeWriteCC(viaRPC(ctx), s.n, r, s.ack, remoteNSKeyAck)
	return resp, metagrpc.Status(err)
}

func (s *nsKeysService) ack(ctx context.Context, r *metapb.AckNamespaceShredRequest) (*metapb.AckNamespaceShredResponse, error) {
	k, err := s.n.AckNamespaceShred(ctx, r.GetNamespace(), r.GetNode())
	if err != nil {
		return nil, err
	}
	return &metapb.AckNamespaceShredResponse{Key: metapb.FromNamespaceKey(k)}, nil
}

func (s *nsKeysService) ListNamespaceKeys(ctx context.Context, r *metapb.ListNamespaceKeysRequest) (*metapb.ListNamespaceKeysResponse, error) {
	resp, err := routeReadCC(viaRPC(ctx), s.n, r, s.list, remoteNSKeyList)
	return resp, metagrpc.Status(err)
}

func (s *nsKeysService) list(ctx context.Context, _ *metapb.ListNamespaceKeysRequest) (*metapb.ListNamespaceKeysResponse, error) {
	ks, err := s.n.ListNamespaceKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := &metapb.ListNamespaceKeysResponse{Keys: make([]*metapb.NamespaceKey, len(ks))}
	for i, k := range ks {
		out.Keys[i] = metapb.FromNamespaceKey(k)
	}
	return out, nil
}

func (c localClient) nsKeys() *nsKeysService { return &nsKeysService{n: c.n} }

// nsKeyWrite runs a namespace key write on this node when it leads, else on the leader.
func nsKeyWrite[Req any, Resp interface{ GetKey() *metapb.NamespaceKey }](ctx context.Context, c localClient, direct1 func() (meta.NamespaceKey, error),
	req Req, local func(context.Context, Req) (Resp, error), remote ccFn[Req, Resp]) (meta.NamespaceKey, error) {
	if c.n.IsLeader() {
		if k, err := direct1(); direct(err) {
			return k, err
		}
	}
	r, err := routeWriteCC(ctx, c.n, req, local, remote)
	if err != nil {
		return meta.NamespaceKey{}, err
	}
	return metapb.ToNamespaceKey(r.GetKey()), nil
}

func (c localClient) AttachNamespaceKey(ctx context.Context, ns, keyARN string) (meta.NamespaceKey, error) {
	return nsKeyWrite(ctx, c, func() (meta.NamespaceKey, error) { return c.n.AttachNamespaceKey(ctx, ns, keyARN) },
		&metapb.AttachNamespaceKeyRequest{Namespace: ns, KeyArn: keyARN}, c.nsKeys().attach, remoteNSKeyAttach)
}

func (c localClient) RotateNamespaceKey(ctx context.Context, ns, keyARN string) (meta.NamespaceKey, error) {
	return nsKeyWrite(ctx, c, func() (meta.NamespaceKey, error) { return c.n.RotateNamespaceKey(ctx, ns, keyARN) },
		&metapb.RotateNamespaceKeyRequest{Namespace: ns, KeyArn: keyARN}, c.nsKeys().rotate, remoteNSKeyRotate)
}

func (c localClient) ShredNamespaceKey(ctx context.Context, ns string) (meta.NamespaceKey, error) {
	return nsKeyWrite(ctx, c, func() (meta.NamespaceKey, error) { return c.n.ShredNamespaceKey(ctx, ns) },
		&metapb.ShredNamespaceKeyRequest{Namespace: ns}, c.nsKeys().shred, remoteNSKeyShred)
}

func (c localClient) AckNamespaceShred(ctx context.Context, ns, node string) (meta.NamespaceKey, error) {
	return nsKeyWrite(ctx, c, func() (meta.NamespaceKey, error) { return c.n.AckNamespaceShred(ctx, ns, node) },
		&metapb.AckNamespaceShredRequest{Namespace: ns, Node: node}, c.nsKeys().ack, remoteNSKeyAck)
}

func (c localClient) ListNamespaceKeys(ctx context.Context) ([]meta.NamespaceKey, error) {
	if c.n.leaderReady() {
		return c.n.ListNamespaceKeys(ctx)
	}
	r, err := routeReadCC(ctx, c.n, &metapb.ListNamespaceKeysRequest{}, c.nsKeys().list, remoteNSKeyList)
	if err != nil {
		return nil, err
	}
	out := make([]meta.NamespaceKey, len(r.GetKeys()))
	for i, k := range r.GetKeys() {
		out[i] = metapb.ToNamespaceKey(k)
	}
	return out, nil
}
