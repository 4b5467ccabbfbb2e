package envelope

import (
	"log/slog"

	"github.com/loamhq/loam/shared/objstore"
)

// FunctionKeys is the namespace key catalog of a function that rewrites data (the
// segmenter, compaction): it opens keyed namespaces' sealed chunks and segments and seals
// their segments with keys from k, wrapped copies stored in bucket. It confirms no shreds
// (a function caches no plaintext beyond one invocation); a shred only makes it forget the
// namespace's keys at its next refresh. k nil (no KMS configured): keyed namespaces are
// left as they are, never written in clear (ErrKeyUnavailable).
func FunctionKeys(m CatalogMeta, bucket objstore.Bucket, k KMS, logger *slog.Logger) (*Catalog, error) {
	var ring *Keyring
	if k != nil {
		var err error
		if ring, err = NewKeyring(KeyConfig{KMS: k, Bucket: bucket}); err != nil {
			return nil, err
		}
	}
	return NewCatalog(CatalogConfig{Meta: m, Keyring: ring, Logger: logger})
}
