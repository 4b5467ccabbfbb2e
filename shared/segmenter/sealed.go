package segmenter

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/walfmt"
)

// Segments of namespaces with a key (docs/encryption.md): with Config.Keys set, the
// segmenter opens the sealed WAL chunks of such a namespace's partitions with the
// namespace's key and writes their segments under ns/<id>/seg/... through an
// envelope.PagesBucket, which seals them in pages with the namespace's key (and asks the
// store for SSE-KMS with it when Config.SSEKMS is set). A partition of a keyed namespace
// is segmented sealed whatever its chunks were (chunks written before the key was attached
// are plaintext in the WAL; their segment is sealed). Without Keys, a run holding a sealed
// chunk is refused (ErrSealedChunk) and stays in the WAL.
//
// A namespace whose key cannot be had (disabled, deleted, shredded) leaves its partitions
// in the WAL: Partition answers Result.KeyUnavailable without an error, so its
// notifications are not redelivered forever; retention still trims the WAL.

// sealedKey answers the namespace key the partition's segments are sealed with: ok false
// when its namespace has none (or no Keys are configured).
func (s *Segmenter) sealedKey(ctx context.Context, p coord.Partition) (meta.NamespaceKey, bool, error) {
	if s.cfg.Keys == nil {
		return meta.NamespaceKey{}, false, nil
	}
	k, keyed, err := s.cfg.Keys.NamespaceOf(ctx, p.StreamID)
	if err != nil {
		return k, false, fmt.Errorf("segmenter: %s: namespace key: %w", p, err)
	}
	if keyed && k.Shredded() {
		return k, false, fmt.Errorf("segmenter: %s: %w: namespace %s: its key was shredded", p, envelope.ErrKeyUnavailable, k.Namespace)
	}
	return k, keyed, nil
}

// chunkOpener opens the sealed chunks of one segment's run. A sealed chunk's identity
// includes its position in its WAL object, which only the object's index holds: it reads
// each object's index once per segment (a Stat and one or two range GETs).
type chunkOpener struct {
	s       *Segmenter
	mu      sync.Mutex
	indexes map[string]*walfmt.Object
}

func (o *chunkOpener) open(ctx context.Context, e meta.IndexEntry, ref walfmt.ChunkRef, sealed []byte) ([]byte, error) {
	if o.s.cfg.Keys == nil {
		return nil, ErrSealedChunk
	}
	idx, err := o.index(ctx, e.Object)
	if err != nil {
		return nil, err
	}
	i := -1
	for j, c := range idx.Chunks {
		if c.Offset == e.Offset && c.Length == e.Length {
			i = j
			break
		}
	}
	if i < 0 || idx.Chunks[i].StreamID != ref.StreamID || idx.Chunks[i].Partition != ref.Partition || !idx.Chunks[i].Encrypted {
		return nil, fmt.Errorf("segmenter: %s [%d+%d]: no sealed chunk of %d/%d there in the object's index: %w", e.Object, e.Offset, e.Length, ref.StreamID, ref.Partition, ErrCorrupt)
	}
	id := envelope.ChunkID{Object: e.Object, Index: uint32(i), StreamID: ref.StreamID, Partition: ref.Partition}
	return o.s.cfg.Keys.OpenChunk(ctx, id, sealed)
}

func (o *chunkOpener) index(ctx context.Context, key string) (*walfmt.Object, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if idx := o.indexes[key]; idx != nil {
		return idx, nil
	}
	st, err := o.s.cfg.Bucket.Stat(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("segmenter: stat %s: %w", key, err)
	}
	idx, err := walfmt.ReadIndex(ctx, o.s.cfg.Bucket, key, st.Size)
	if err != nil {
		return nil, fmt.Errorf("segmenter: index of %s: %w", key, err)
	}
	if o.indexes == nil {
		o.indexes = map[string]*walfmt.Object{}
	}
	o.indexes[key] = idx
	return idx, nil
}

// keyUnavailable reports a partition left in the WAL because its namespace's key cannot
// be had.
func (s *Segmenter) keyUnavailable(p coord.Partition, err error) bool {
	if !errors.Is(err, envelope.ErrKeyUnavailable) {
		return false
	}
	s.cfg.Logger.Warn("partition left in the WAL: its namespace's key is unavailable", "partition", p.String(), "err", err)
	return true
}

// refreshKeys lists the namespace keys once per invocation, so a shred or rotation since
// the last one is seen (a shredded namespace's keys are forgotten). A failure is logged:
// the catalog's lookups list them again as they need.
func (s *Segmenter) refreshKeys(ctx context.Context) {
	if s.cfg.Keys == nil {
		return
	}
	if err := s.cfg.Keys.Refresh(ctx); err != nil {
		s.cfg.Logger.Warn("namespace keys refresh failed", "err", err)
	}
}
