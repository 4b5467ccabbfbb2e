package metafake

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
)

// SetQuota refuses: the fake implements no ingest quotas (the sequencer does; test them
// against sequencer-svc/server).
func (f *Meta) SetQuota(ctx context.Context, q meta.Quota) (meta.Quota, error) {
	return meta.Quota{}, fmt.Errorf("%w: set quota: metafake implements no ingest quotas", meta.ErrInvalidArgument)
}

// GetQuota answers no quota for every namespace.
func (f *Meta) GetQuota(ctx context.Context, ns string) (meta.Quota, error) {
	return meta.Quota{Namespace: ns}, nil
}

// AcquireIngest admits everything: no namespace of the fake has a quota.
func (f *Meta) AcquireIngest(ctx context.Context, ns, node string, bytes int64) (meta.IngestGrant, error) {
	return meta.IngestGrant{Granted: bytes, Unlimited: true, Lease: meta.IngestLease}, nil
}
