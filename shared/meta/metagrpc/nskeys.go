package metagrpc

import (
	"context"

	"google.golang.org/grpc"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Namespace keys over loam.meta.v1.NamespaceKeys. Attach, shred and the shred
// confirmation are idempotent (a repeat answers the record), so they are repeated like
// reads; a rotation is not repeated once sent (a repeat would start two generations).

func (c *client) AttachNamespaceKey(ctx context.Context, ns, keyARN string) (meta.NamespaceKey, error) {
	var out meta.NamespaceKey
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewNamespaceKeysClient(cc).AttachNamespaceKey(ctx, &metapb.AttachNamespaceKeyRequest{Namespace: ns, KeyArn: keyARN})
		out = metapb.ToNamespaceKey(r.GetKey())
		return err
	})
	return out, err
}

func (c *client) RotateNamespaceKey(ctx context.Context, ns, keyARN string) (meta.NamespaceKey, error) {
	var out meta.NamespaceKey
	err := c.doCC(ctx, write, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewNamespaceKeysClient(cc).RotateNamespaceKey(ctx, &metapb.RotateNamespaceKeyRequest{Namespace: ns, KeyArn: keyARN})
		out = metapb.ToNamespaceKey(r.GetKey())
		return err
	})
	return out, err
}

func (c *client) ShredNamespaceKey(ctx context.Context, ns string) (meta.NamespaceKey, error) {
	var out meta.NamespaceKey
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewNamespaceKeysClient(cc).ShredNamespaceKey(ctx, &metapb.ShredNamespaceKeyRequest{Namespace: ns})
		out = metapb.ToNamespaceKey(r.GetKey())
		return err
	})
	return out, err
}

func (c *client) AckNamespaceShred(ctx context.Context, ns, node string) (meta.NamespaceKey, error) {
	var out meta.NamespaceKey
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewNamespaceKeysClient(cc).AckNamespaceShred(ctx, &metapb.AckNamespaceShredRequest{Namespace: ns, Node: node})
		out = metapb.ToNamespaceKey(r.GetKey())
		return err
	})
	return out, err
}

func (c *client) ListNamespaceKeys(ctx context.Context) ([]meta.NamespaceKey, error) {
	var out []meta.NamespaceKey
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewNamespaceKeysClient(cc).ListNamespaceKeys(ctx, &metapb.ListNamespaceKeysRequest{})
		out = out[:0]
		for _, k := range r.GetKeys() {
			out = append(out, metapb.ToNamespaceKey(k))
		}
		return err
	})
	return out, err
}
