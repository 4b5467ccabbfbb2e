package metapb

import (
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// FromQuota converts a meta.Quota.
func FromQuota(q meta.Quota) *Quota {
	return &Quota{Namespace: q.Namespace, IngestBytesPerSec: q.IngestBytesPerSec}
}

// ToQuota converts a Quota (nil: the zero quota).
func ToQuota(q *Quota) meta.Quota {
	return meta.Quota{Namespace: q.GetNamespace(), IngestBytesPerSec: q.GetIngestBytesPerSec()}
}

// FromIngestGrant converts a meta.IngestGrant.
func FromIngestGrant(g meta.IngestGrant) *AcquireIngestResponse {
	return &AcquireIngestResponse{Granted: g.Granted, Unlimited: g.Unlimited, RetryAfterMs: durMs(g.RetryAfter),
		LeaseMs: durMs(g.Lease), IngestBytesPerSec: g.Rate}
}

// ToIngestGrant converts an AcquireIngestResponse (nil: nothing granted).
func ToIngestGrant(r *AcquireIngestResponse) meta.IngestGrant {
	return meta.IngestGrant{Granted: r.GetGranted(), Unlimited: r.GetUnlimited(),
		RetryAfter: time.Duration(r.GetRetryAfterMs()) * time.Millisecond,
		Lease:      time.Duration(r.GetLeaseMs()) * time.Millisecond, Rate: r.GetIngestBytesPerSec()}
}

// durMs rounds d up to whole milliseconds, so a short retry delay is never sent as 0.
func durMs(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }
