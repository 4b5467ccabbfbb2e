package meta

import (
	"errors"
	"fmt"
	"time"
)

// Ingest quotas per namespace.
//
// A namespace's quota bounds the bytes of produce requests the cluster admits for it per
// second, whatever the number of log nodes. The rate is stored in the metastore (SetQuota,
// a Raft command); the Raft leader keeps one token bucket per namespace with a quota, in
// memory, and leases shares of it to log nodes (AcquireIngest). A log node spends its
// share locally and asks again when it runs out, so the sequencer sees about one call per
// node and namespace every IngestLeaseShare of a second under load, not one per produce.

// Quota is a namespace's ingest quota. IngestBytesPerSec 0 means no quota.
type Quota struct {
	Namespace         string `json:"namespace"`
	IngestBytesPerSec int64  `json:"ingest_bytes_per_sec"`
}

// Quota bounds and the leader's bucket parameters.
const (
	// MaxIngestBytesPerSec bounds a quota (1 TiB/s).
	MaxIngestBytesPerSec = 1 << 40
	// IngestBurst is the bucket's capacity in seconds of the rate: after an idle spell a
	// namespace may send this much at once. Over any window of W seconds the cluster
	// admits at most rate × (W + IngestBurst) bytes, plus one request larger than the
	// bucket (admitted only from a full bucket).
	IngestBurst = 500 * time.Millisecond
	// IngestLeaseShare is what a grant adds to the bytes asked for, in seconds of the rate,
	// so a busy node asks about once per share.
	IngestLeaseShare = 50 * time.Millisecond
	// IngestLease is how long a node may use a grant (and trusts an "unlimited" answer).
	// Bytes granted and not spent within it are dropped, never handed back.
	IngestLease = time.Second
)

// ErrQuotaExceeded is a produce refused because its namespace's ingest quota is spent
// for now; nothing of it was written. Retry after the delay the error carries.
var ErrQuotaExceeded = errors.New("meta: ingest quota exceeded")

// QuotaExceededError carries when the quota will hold the refused bytes.
type QuotaExceededError struct {
	Namespace  string
	Bytes      int64
	RetryAfter time.Duration
	Rate       int64
}

func (e *QuotaExceededError) Error() string {
	return fmt.Sprintf("namespace %q is over its ingest quota of %d bytes/s: %d bytes refused, retry after %v", e.Namespace, e.Rate, e.Bytes, e.RetryAfter)
}

// Unwrap makes errors.Is(err, ErrQuotaExceeded) hold.
func (e *QuotaExceededError) Unwrap() error { return ErrQuotaExceeded }

// IngestGrant answers AcquireIngest.
type IngestGrant struct {
	// Granted bytes (0: refused until RetryAfter). May exceed what was asked: the rest is
	// the node's for later produces, within Lease.
	Granted    int64
	Unlimited  bool // the namespace has no quota: admit everything until Lease passes
	RetryAfter time.Duration
	Lease      time.Duration
	Rate       int64 // the namespace's quota in bytes per second (0: none)
}

// CheckQuota validates a quota: an existing-looking namespace name and a rate in
// [0, MaxIngestBytesPerSec].
func CheckQuota(q Quota) error {
	if q.Namespace == "" {
		return fmt.Errorf("%w: quota: empty namespace", ErrInvalidArgument)
	}
	if q.IngestBytesPerSec < 0 || q.IngestBytesPerSec > MaxIngestBytesPerSec {
		return fmt.Errorf("%w: quota of %s: ingest_bytes_per_sec %d is out of range [0, %d]", ErrInvalidArgument, q.Namespace, q.IngestBytesPerSec, int64(MaxIngestBytesPerSec))
	}
	return nil
}
