package fsm

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
)

// Ingest quotas (meta.Quota). The bucket "quotas" maps a namespace name to its rate in
// bytes per second, 8 bytes big-endian; a namespace without a quota has no key. The bucket
// is created by the first SetQuota, so databases of format v4 without it read as "no
// quotas" and the format is unchanged. Deleting a namespace does not exist yet; when it
// does, it drops the namespace's key. Bound: one key per namespace.
var bQuotas = []byte("quotas")

// SetQuota is the command that stores a namespace's quota (meta.Client.SetQuota).
func SetQuota(q meta.Quota) *metapb.Command {
	return &metapb.Command{Op: &metapb.Command_SetQuota{SetQuota: &metapb.SetQuotaCmd{
		Quota: &metapb.Quota{Namespace: q.Namespace, IngestBytesPerSec: q.IngestBytesPerSec}}}}
}

// setQuota applies a SetQuotaCmd.
func (a *applier) setQuota(c *metapb.SetQuotaCmd) (meta.Quota, error) {
	q := meta.Quota{Namespace: c.GetQuota().GetNamespace(), IngestBytesPerSec: c.GetQuota().GetIngestBytesPerSec()}
	if err := meta.CheckQuota(q); err != nil {
		return meta.Quota{}, err
	}
	if !a.nsExists(q.Namespace) {
		return meta.Quota{}, fmt.Errorf("set quota of %s: %w", q.Namespace, meta.ErrNamespaceNotFound)
	}
	b, err := a.tx.CreateBucketIfNotExists(bQuotas)
	if err != nil {
		a.check(err)
		return meta.Quota{}, err
	}
	if q.IngestBytesPerSec == 0 {
		a.check(b.Delete([]byte(q.Namespace)))
	} else {
		a.check(putU64(b, []byte(q.Namespace), uint64(q.IngestBytesPerSec)))
	}
	return q, nil
}

// GetQuota returns a namespace's quota (IngestBytesPerSec 0: none).
// ErrNamespaceNotFound when the namespace does not exist.
func (f *FSM) GetQuota(ns string) (meta.Quota, error) {
	q := meta.Quota{Namespace: ns}
	err := f.view(func(tx *bolt.Tx) error {
		if !hasKey(tx.Bucket(bNS), []byte(ns)) {
			return fmt.Errorf("get quota of %s: %w", ns, meta.ErrNamespaceNotFound)
		}
		if b := tx.Bucket(bQuotas); b != nil {
			q.IngestBytesPerSec = int64(getU64(b, []byte(ns)))
		}
		return nil
	})
	return q, err
}
