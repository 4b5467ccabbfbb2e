package metagrpc

import (
	"context"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
)

// Namespaces and API keys: the sequencer's Auth service. Every call but DeleteNamespace is
// resent after meta.ErrUnavailable (a repeated CreateKey of the same key answers the stored
// key, revoking twice changes nothing more); DeleteNamespace is resent only when surely not
// applied, since a repeat of an applied one answers ErrNamespaceNotFound.

func (c *client) auth(ctx context.Context, fn func(context.Context, metapb.AuthClient) error) error {
	return c.authKind(ctx, read, fn)
}

func (c *client) authKind(ctx context.Context, k kind, fn func(context.Context, metapb.AuthClient) error) error {
	return c.doCC(ctx, k, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		return fn(ctx, metapb.NewAuthClient(cc))
	})
}

func (c *client) DeleteNamespace(ctx context.Context, name string) error {
	return c.authKind(ctx, write, func(ctx context.Context, s metapb.AuthClient) error {
		_, err := s.DeleteNamespace(ctx, &metapb.DeleteNamespaceRequest{Name: name})
		return err
	})
}

func (c *client) CreateKey(ctx context.Context, k meta.APIKey) (meta.APIKey, error) {
	var out meta.APIKey
	err := c.auth(ctx, func(ctx context.Context, s metapb.AuthClient) error {
		r, err := s.CreateKey(ctx, &metapb.CreateKeyRequest{Key: metapb.FromAPIKey(k)})
		out = metapb.ToAPIKey(r.GetKey())
		return err
	})
	return out, err
}

func (c *client) ListKeys(ctx context.Context) ([]meta.APIKey, error) {
	var out []meta.APIKey
	err := c.auth(ctx, func(ctx context.Context, s metapb.AuthClient) error {
		r, err := s.ListKeys(ctx, &metapb.ListKeysRequest{})
		out = out[:0]
		for _, k := range r.GetKeys() {
			out = append(out, metapb.ToAPIKey(k))
		}
		return err
	})
	return out, err
}

func (c *client) RevokeKey(ctx context.Context, id string) error {
	return c.auth(ctx, func(ctx context.Context, s metapb.AuthClient) error {
		_, err := s.RevokeKey(ctx, &metapb.RevokeKeyRequest{Id: id})
		return err
	})
}

func (c *client) LookupKey(ctx context.Context, hash []byte) (meta.APIKey, error) {
	var out meta.APIKey
	err := c.auth(ctx, func(ctx context.Context, s metapb.AuthClient) error {
		r, err := s.LookupKey(ctx, &metapb.LookupKeyRequest{Hash: hash})
		out = metapb.ToAPIKey(r.GetKey())
		return err
	})
	return out, err
}
