package writer

import (
	"context"
	"fmt"
	"slices"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/walfmt"
)

// Sealer seals the chunks of streams whose namespace has a customer-managed key
// (envelope.Catalog): Keyed says whether a stream's chunks are sealed, and SealChunk seals
// one (the sealed bytes and their envelope's length, or ok false for a chunk to write as it
// is).
type Sealer interface {
	Keyed(ctx context.Context, stream uint64) (bool, error)
	SealChunk(ctx context.Context, id envelope.ChunkID, plaintext []byte) (sealed []byte, envLen int, ok bool, err error)
}

// seal seals, in place, the chunks of keyed namespaces of the object key about to be
// encoded; chunks must be in object order (stream, partition), since a chunk's position is
// part of its identity. It answers, per chunk left, the plaintext of a sealed chunk (for
// the tail cache; nil for a chunk written as it is, whose parts the tail cache keeps) and
// the chunks left: a chunk whose key cannot be had (envelope.ErrKeyUnavailable) is dropped
// from the object and its requests answered with the error; the other namespaces' chunks
// are written. A sealed chunk's parts are joined first (sealing takes one plaintext); the
// chunks of namespaces without a key are not touched. nil Sealer: nothing changes.
func (b *Buffered) seal(buf *buffer, key string, chunks []walfmt.Chunk) (kept []walfmt.Chunk, plain [][]byte) {
	if b.cfg.Sealer == nil {
		return chunks, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Budget)
	defer cancel()
	kept = chunks[:0]
	plain = make([][]byte, 0, len(chunks))
	for _, c := range chunks {
		refuse := func(err error) {
			err = fmt.Errorf("%w: seal the chunk of stream %d partition %d: %w", ErrCommitFailed, c.StreamID, c.Partition, err)
			for _, s := range buf.chunks[chunkKey{c.StreamID, c.Partition}].slots {
				s.w.results[s.i] = Result{BaseOffset: -1, Err: err}
				s.w.refused++
			}
			b.cfg.Logger.Warn("wal chunk not sealed, its requests refused", "object", key, "stream", c.StreamID, "partition", c.Partition, "err", err)
		}
		keyed, err := b.cfg.Sealer.Keyed(ctx, c.StreamID)
		if err != nil {
			refuse(err)
			continue
		}
		if !keyed {
			plain = append(plain, nil)
			kept = append(kept, c)
			continue
		}
		pt := c.Payload
		if c.Parts != nil {
			pt = slices.Concat(c.Parts...)
		}
		id := envelope.ChunkID{Object: key, Index: uint32(len(kept)), StreamID: c.StreamID, Partition: c.Partition}
		sealed, envLen, ok, err := b.cfg.Sealer.SealChunk(ctx, id, pt)
		if err != nil {
			refuse(err)
			continue
		}
		plain = append(plain, pt)
		if ok {
			c.Payload, c.Parts, c.PartCRCs, c.Encrypted, c.EnvelopeLen = sealed, nil, nil, true, envLen
		}
		kept = append(kept, c)
	}
	return kept, plain
}

// committedBatches is what the tail cache gets of committed chunk i: the plaintext of a
// sealed chunk, or the requests' own bytes, their offsets patched.
func committedBatches(c *chunkBuf, plain [][]byte, i int, base int64) [][]byte {
	if plain != nil && plain[i] != nil {
		if c.encoding == 0 || c.encoding == walfmt.EncodingKafka { // an arrow chunk holds no offsets
			_ = recordbatch.SetBaseOffsets(plain[i], base) // validated at produce: cannot fail
		}
		return [][]byte{plain[i]}
	}
	return patchOffsets(c, base)
}
