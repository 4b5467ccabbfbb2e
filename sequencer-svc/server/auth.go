package server

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
)

// Namespaces and API keys: the Node's methods, the Auth gRPC service and the local
// client's methods.

// DeleteNamespace deletes an empty namespace and revokes its keys.
func (n *Node) DeleteNamespace(ctx context.Context, name string) error {
	res, err := n.propose(ctx, fsm.DeleteNamespace(name))
	if err != nil {
		return err
	}
	return res.Err
}

// CreateKey stores an API key (meta.Client.CreateKey).
func (n *Node) CreateKey(ctx context.Context, k meta.APIKey) (meta.APIKey, error) {
	if err := meta.CheckKey(k); err != nil {
		return meta.APIKey{}, fmt.Errorf("create key: %w", err)
	}
	res, err := n.propose(ctx, fsm.CreateKey(k))
	if err != nil {
		return meta.APIKey{}, err
	}
	return res.Key, res.Err
}

// RevokeKey revokes an API key.
func (n *Node) RevokeKey(ctx context.Context, id string) error {
	res, err := n.propose(ctx, fsm.RevokeKey(id))
	if err != nil {
		return err
	}
	return res.Err
}

// ListKeys lists the API keys, hashes left out.
func (n *Node) ListKeys(ctx context.Context) ([]meta.APIKey, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	return n.fsm.ListKeys()
}

// LookupKey finds an API key by its hash.
func (n *Node) LookupKey(ctx context.Context, hash []byte) (meta.APIKey, error) {
	if err := ctxErr(ctx); err != nil {
		return meta.APIKey{}, err
	}
	return n.fsm.LookupKey(hash)
}

// authService is the Auth gRPC service of a node.
type authService struct {
	metapb.UnimplementedAuthServer
	n *Node
}

func authWrite[Req, Resp any](ctx context.Context, n *Node, req Req, local func(context.Context, Req) (Resp, error), remote ccFn[Req, Resp]) (Resp, error) {
	resp, err := routeWriteCC(viaRPC(ctx), n, req, local, remote)
	return resp, metagrpc.Status(err)
}

func authRead[Req, Resp any](ctx context.Context, n *Node, req Req, local func(context.Context, Req) (Resp, error), remote ccFn[Req, Resp]) (Resp, error) {
	resp, err := routeReadCC(viaRPC(ctx), n, req, local, remote)
	return resp, metagrpc.Status(err)
}

func (s *authService) DeleteNamespace(ctx context.Context, r *metapb.DeleteNamespaceRequest) (*metapb.DeleteNamespaceResponse, error) {
	return authWrite(ctx, s.n, r, s.deleteNamespace, remoteDeleteNamespace)
}

func (s *authService) deleteNamespace(ctx context.Context, r *metapb.DeleteNamespaceRequest) (*metapb.DeleteNamespaceResponse, error) {
	return &metapb.DeleteNamespaceResponse{}, s.n.DeleteNamespace(ctx, r.GetName())
}

func remoteDeleteNamespace(cc grpc.ClientConnInterface, ctx context.Context, r *metapb.DeleteNamespaceRequest) (*metapb.DeleteNamespaceResponse, error) {
	return metapb.NewAuthClient(cc).DeleteNamespace(ctx, r)
}

func (s *authService) CreateKey(ctx context.Context, r *metapb.CreateKeyRequest) (*metapb.CreateKeyResponse, error) {
	return authWrite(ctx, s.n, r, s.createKey, remoteCreateKey)
}

func (s *authService) createKey(ctx context.Context, r *metapb.CreateKeyRequest) (*metapb.CreateKeyResponse, error) {
	k, err := s.n.CreateKey(ctx, metapb.ToAPIKey(r.GetKey()))
	if err != nil {
		return nil, err
	}
	return &metapb.CreateKeyResponse{Key: metapb.FromAPIKey(k)}, nil
}

func remoteCreateKey(cc grpc.ClientConnInterface, ctx context.Context, r *metapb.CreateKeyRequest) (*metapb.CreateKeyResponse, error) {
	return metapb.NewAuthClient(cc).CreateKey(ctx, r)
}

func (s *authService) RevokeKey(ctx context.Context, r *metapb.RevokeKeyRequest) (*metapb.RevokeKeyResponse, error) {
	return authWrite(ctx, s.n, r, s.revokeKey, remoteRevokeKey)
}

func (s *authService) revokeKey(ctx context.Context, r *metapb.RevokeKeyRequest) (*metapb.RevokeKeyResponse, error) {
	return &metapb.RevokeKeyResponse{}, s.n.RevokeKey(ctx, r.GetId())
}

func remoteRevokeKey(cc grpc.ClientConnInterface, ctx context.Context, r *metapb.RevokeKeyRequest) (*metapb.RevokeKeyResponse, error) {
	return metapb.NewAuthClient(cc).RevokeKey(ctx, r)
}

func (s *authService) ListKeys(ctx context.Context, r *metapb.ListKeysRequest) (*metapb.ListKeysResponse, error) {
	return authRead(ctx, s.n, r, s.listKeys, remoteListKeys)
}

func (s *authService) listKeys(ctx context.Context, _ *metapb.ListKeysRequest) (*metapb.ListKeysResponse, error) {
	ks, err := s.n.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := &metapb.ListKeysResponse{Keys: make([]*metapb.ApiKey, len(ks))}
	for i, k := range ks {
		out.Keys[i] = metapb.FromAPIKey(k)
	}
	return out, nil
}

func remoteListKeys(cc grpc.ClientConnInterface, ctx context.Context, r *metapb.ListKeysRequest) (*metapb.ListKeysResponse, error) {
	return metapb.NewAuthClient(cc).ListKeys(ctx, r)
}

func (s *authService) LookupKey(ctx context.Context, r *metapb.LookupKeyRequest) (*metapb.LookupKeyResponse, error) {
	return authRead(ctx, s.n, r, s.lookupKey, remoteLookupKey)
}

func (s *authService) lookupKey(ctx context.Context, r *metapb.LookupKeyRequest) (*metapb.LookupKeyResponse, error) {
	var k meta.APIKey
	var err error
	if len(r.GetHash()) == 0 && r.GetId() != "" {
		k, err = s.n.LookupKeyByID(ctx, r.GetId())
	} else {
		k, err = s.n.LookupKey(ctx, r.GetHash())
	}
	if err != nil {
		return nil, err
	}
	return &metapb.LookupKeyResponse{Key: metapb.FromAPIKey(k)}, nil
}

func remoteLookupKey(cc grpc.ClientConnInterface, ctx context.Context, r *metapb.LookupKeyRequest) (*metapb.LookupKeyResponse, error) {
	return metapb.NewAuthClient(cc).LookupKey(ctx, r)
}

// ---- the local client ----

func (c localClient) auth() *authService { return &authService{n: c.n} }

func (c localClient) DeleteNamespace(ctx context.Context, name string) error {
	if c.n.IsLeader() {
		if err := c.n.DeleteNamespace(ctx, name); direct(err) {
			return err
		}
	}
	_, err := routeWriteCC(ctx, c.n, &metapb.DeleteNamespaceRequest{Name: name}, c.auth().deleteNamespace, remoteDeleteNamespace)
	return err
}

func (c localClient) CreateKey(ctx context.Context, k meta.APIKey) (meta.APIKey, error) {
	if c.n.IsLeader() {
		if out, err := c.n.CreateKey(ctx, k); direct(err) {
			return out, err
		}
	}
	r, err := routeWriteCC(ctx, c.n, &metapb.CreateKeyRequest{Key: metapb.FromAPIKey(k)}, c.auth().createKey, remoteCreateKey)
	if err != nil {
		return meta.APIKey{}, err
	}
	return metapb.ToAPIKey(r.GetKey()), nil
}

func (c localClient) RevokeKey(ctx context.Context, id string) error {
	if c.n.IsLeader() {
		if err := c.n.RevokeKey(ctx, id); direct(err) {
			return err
		}
	}
	_, err := routeWriteCC(ctx, c.n, &metapb.RevokeKeyRequest{Id: id}, c.auth().revokeKey, remoteRevokeKey)
	return err
}

func (c localClient) ListKeys(ctx context.Context) ([]meta.APIKey, error) {
	if c.n.leaderReady() {
		return c.n.ListKeys(ctx)
	}
	r, err := routeReadCC(ctx, c.n, &metapb.ListKeysRequest{}, c.auth().listKeys, remoteListKeys)
	if err != nil {
		return nil, err
	}
	out := make([]meta.APIKey, len(r.GetKeys()))
	for i, k := range r.GetKeys() {
		out[i] = metapb.ToAPIKey(k)
	}
	return out, nil
}

func (c localClient) LookupKey(ctx context.Context, hash []byte) (meta.APIKey, error) {
	if c.n.leaderReady() {
		return c.n.LookupKey(ctx, hash)
	}
	r, err := routeReadCC(ctx, c.n, &metapb.LookupKeyRequest{Hash: hash}, c.auth().lookupKey, remoteLookupKey)
	if err != nil {
		return meta.APIKey{}, err
	}
	return metapb.ToAPIKey(r.GetKey()), nil
}
