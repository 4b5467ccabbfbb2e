package metagrpc

import (
	"context"

	"google.golang.org/grpc"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Ingest quotas over loam.meta.v1.Quotas. SetQuota is idempotent (it stores a value), so
// it is repeated like a read; AcquireIngest is not repeated once sent (a repeat would take
// the bytes twice), GetQuota is a read.

func (c *client) SetQuota(ctx context.Context, q meta.Quota) (meta.Quota, error) {
	var out meta.Quota
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewQuotasClient(cc).SetQuota(ctx, &metapb.SetQuotaRequest{Quota: metapb.FromQuota(q)})
		out = metapb.ToQuota(r.GetQuota())
		return err
	})
	return out, err
}

func (c *client) GetQuota(ctx context.Context, ns string) (meta.Quota, error) {
	var out meta.Quota
	err := c.doCC(ctx, read, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewQuotasClient(cc).GetQuota(ctx, &metapb.GetQuotaRequest{Namespace: ns})
		out = metapb.ToQuota(r.GetQuota())
		return err
	})
	return out, err
}

func (c *client) AcquireIngest(ctx context.Context, ns, node string, bytes int64) (meta.IngestGrant, error) {
	var out meta.IngestGrant
	err := c.doCC(ctx, write, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := metapb.NewQuotasClient(cc).AcquireIngest(ctx, &metapb.AcquireIngestRequest{Namespace: ns, Node: node, Bytes: bytes})
		out = metapb.ToIngestGrant(r)
		return err
	})
	return out, err
}
