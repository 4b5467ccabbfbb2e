package writer

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/walfmt"
)

// Sealer seals the chunks of streams whose namespace has a customer-managed key
// (envelope.Catalog): the sealed bytes and their envelope's length, or ok false for a
// chunk to write as it is.
type Sealer interface {
	SealChunk(ctx context.Context, id envelope.ChunkID, plaintext []byte) (sealed []byte, envLen int, ok bool, err error)
}

// seal seals, in place, the chunks of keyed namespaces of the object key about to be
// encoded; chunks must be in object order (stream, partition), since a chunk's position is
// part of its identity. It answers each chunk's plaintext (for the tail cache) and the
// chunks left: a chunk whose key cannot be had (envelope.ErrKeyUnavailable) is dropped
// from the object and its requests answered with the error; the other namespaces' chunks
// are written. nil Sealer: nothing changes.
func (b *Buffered) seal(buf *buffer, key string, chunks []walfmt.Chunk) (kept []walfmt.Chunk, plain [][]byte) {
	if b.cfg.Sealer == nil {
		return chunks, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Budget)
	defer cancel()
	kept = chunks[:0]
	plain = make([][]byte, 0, len(chunks))
	for _, c := range chunks {
		id := envelope.ChunkID{Object: key, Index: uint32(len(kept)), StreamID: c.StreamID, Partition: c.Partition}
		sealed, envLen, ok, err := b.cfg.Sealer.SealChunk(ctx, id, c.Payload)
		if err != nil {
			err = fmt.Errorf("%w: seal the chunk of stream %d partition %d: %w", ErrCommitFailed, c.StreamID, c.Partition, err)
			for _, s := range buf.chunks[chunkKey{c.StreamID, c.Partition}].slots {
				s.w.results[s.i] = Result{BaseOffset: -1, Err: err}
				s.w.refused++
			}
			b.cfg.Logger.Warn("wal chunk not sealed, its requests refused", "object", key, "stream", c.StreamID, "partition", c.Partition, "err", err)
			continue
		}
		plain = append(plain, c.Payload)
		if ok {
			c.Payload, c.Encrypted, c.EnvelopeLen = sealed, true, envLen
		}
		kept = append(kept, c)
	}
	return kept, plain
}

// plaintext is chunk i's plaintext payload: plain[i] when the chunks were sealed.
func plaintext(chunks []walfmt.Chunk, plain [][]byte, i int) []byte {
	if plain != nil {
		return plain[i]
	}
	return chunks[i].Payload
}
