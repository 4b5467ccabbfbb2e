package node

import (
	"log/slog"
	"strconv"

	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// namespaceKeys makes the node's namespace key catalog (docs/encryption.md). A node
// without KMS has one too, without a keyring: it knows which namespaces have a key, and
// refuses their writes and reads (key_unavailable) rather than write them in clear. Its
// Drop drops a shredded namespace's cached plaintext from the reader, which is made after
// the catalog (it opens chunks through it).
func namespaceKeys(cfg *Config, rd **reader.Reader, log *slog.Logger) (*envelope.Catalog, error) {
	var kr *envelope.Keyring
	if cfg.KMS != nil {
		var err error
		if kr, err = envelope.NewKeyring(envelope.KeyConfig{KMS: cfg.KMS, Bucket: cfg.Bucket, Rotate: cfg.KeyRotate, Now: cfg.Now}); err != nil {
			return nil, err
		}
	}
	return envelope.NewCatalog(envelope.CatalogConfig{Meta: cfg.Meta, Keyring: kr, NodeID: cfg.NodeID, Refresh: cfg.KeyRefresh, Logger: log,
		Drop: func(k meta.NamespaceKey, streams []uint64) error {
			return (*rd).DropNamespace(streams, "ns/"+strconv.FormatUint(k.ID, 10)+"/")
		}})
}

// sealedSegments is the reader's bucket: segments of keyed namespaces (ns/<id>/seg/) are
// opened page by page with the namespace's key (key_unavailable when it cannot be had);
// every other key is read as it is.
func sealedSegments(b objstore.Bucket, keys *envelope.Catalog) (objstore.Bucket, error) {
	if keys == nil {
		return b, nil
	}
	return envelope.NewPagesBucket(envelope.PagesConfig{Bucket: b, Keys: keys})
}

// opener is keys as the reader's Opener (a nil interface when there is none).
func opener(keys *envelope.Catalog) reader.Opener {
	if keys == nil {
		return nil
	}
	return keys
}

// sealer is keys as the writer's Sealer (a nil interface when there is none).
func sealer(keys *envelope.Catalog) writer.Sealer {
	if keys == nil {
		return nil
	}
	return keys
}
