package walfmt

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/loamhq/loam/shared/crc32c"
)

// AppendObject appends an encoded object to dst and returns the extended buffer and the
// chunks' refs in object order. Offsets in the refs count from the object's first byte
// (len(dst) on entry), not from the start of dst.
//
// chunks is sorted in place by (stream id, partition); two chunks of one (stream,
// partition), an empty chunk list, an invalid header or chunk fail with ErrInvalid and
// leave dst unchanged. Payloads are copied verbatim, once: a chunk given in parts is
// written from its parts.
func AppendObject(dst []byte, h Header, chunks []Chunk) ([]byte, []ChunkRef, error) {
	if err := checkHeader(h); err != nil {
		return dst, nil, fmt.Errorf("walfmt: append object: %w", err)
	}
	if len(chunks) == 0 {
		return dst, nil, fmt.Errorf("walfmt: append object: no chunks: %w", ErrInvalid)
	}
	size := headerSize(h.NodeID) + indexSize(h.NodeID, len(chunks)) + FooterSize
	version := Version1
	for i := range chunks {
		if err := checkChunk(&chunks[i]); err != nil {
			return dst, nil, fmt.Errorf("walfmt: append object: chunk of stream %d partition %d: %w",
				chunks[i].StreamID, chunks[i].Partition, err)
		}
		size += chunkHeaderSize(&chunks[i]) + chunks[i].payloadLen()
		if chunks[i].Encrypted {
			version = Version2
		}
	}
	if int64(len(chunks)) > math.MaxUint32 || indexSize(h.NodeID, len(chunks)) > math.MaxUint32 {
		return dst, nil, fmt.Errorf("walfmt: append object: %d chunks: %w", len(chunks), ErrInvalid)
	}
	slices.SortFunc(chunks, func(a, b Chunk) int {
		return compareKey(key{a.StreamID, a.Partition}, key{b.StreamID, b.Partition})
	})
	for i := 1; i < len(chunks); i++ {
		if chunks[i].StreamID == chunks[i-1].StreamID && chunks[i].Partition == chunks[i-1].Partition {
			return dst, nil, fmt.Errorf("walfmt: append object: two chunks of stream %d partition %d: %w",
				chunks[i].StreamID, chunks[i].Partition, ErrInvalid)
		}
	}

	base := len(dst)
	dst = slices.Grow(dst, size)
	dst = appendHeader(dst, h, version)
	refs := make([]ChunkRef, len(chunks))
	for i := range chunks {
		c := &chunks[i]
		off := len(dst) - base
		dst = appendChunk(dst, c)
		refs[i] = ChunkRef{
			StreamID: c.StreamID, Partition: c.Partition, Encoding: c.Encoding,
			Records: c.Records, MaxTimestamp: c.MaxTimestamp,
			Offset: int64(off), Length: int64(len(dst) - base - off), Encrypted: c.Encrypted,
		}
	}
	indexOff := len(dst) - base
	dst = appendIndex(dst, h, refs)
	indexLen := len(dst) - base - indexOff
	dst = appendFooter(dst, uint64(indexOff), uint32(indexLen), dst[base+indexOff:], version)
	return dst, refs, nil
}

func checkHeader(h Header) error {
	if !h.Class.Valid() {
		return fmt.Errorf("header %v: %w", h.Class, ErrInvalid)
	}
	if h.ULID.IsZero() {
		return fmt.Errorf("header ulid is zero: %w", ErrInvalid)
	}
	return ValidateNodeID(h.NodeID)
}

func checkChunk(c *Chunk) error {
	n := c.payloadLen()
	switch {
	case c.Payload != nil && c.Parts != nil:
		return fmt.Errorf("payload given both whole and in %d parts: %w", len(c.Parts), ErrInvalid)
	case c.PartCRCs != nil && len(c.PartCRCs) != len(c.Parts):
		return fmt.Errorf("%d part checksums for %d parts: %w", len(c.PartCRCs), len(c.Parts), ErrInvalid)
	case !c.Encoding.Valid():
		return fmt.Errorf("%v: %w", c.Encoding, ErrInvalid)
	case c.Partition < 0:
		return fmt.Errorf("negative partition: %w", ErrInvalid)
	case c.Records < 1:
		return fmt.Errorf("%d records, want >= 1: %w", c.Records, ErrInvalid)
	case n == 0:
		return fmt.Errorf("empty payload: %w", ErrInvalid)
	case n > MaxPayload || n < 0: // n < 0: the parts' lengths overflowed
		return fmt.Errorf("payload of %d bytes exceeds %d: %w", n, MaxPayload, ErrInvalid)
	case c.Encrypted && (c.EnvelopeLen < 1 || c.EnvelopeLen > MaxEnvelope || c.EnvelopeLen >= n):
		return fmt.Errorf("envelope of %d bytes in a %d-byte sealed payload (want 1..%d, and ciphertext after it): %w",
			c.EnvelopeLen, n, MaxEnvelope, ErrInvalid)
	case !c.Encrypted && c.EnvelopeLen != 0:
		return fmt.Errorf("envelope length %d on a plaintext chunk: %w", c.EnvelopeLen, ErrInvalid)
	}
	return nil
}

func chunkHeaderSize(c *Chunk) int {
	if c.Encrypted {
		return ChunkHeaderSizeV2
	}
	return ChunkHeaderSize
}

func headerSize(nodeID string) int { return headerFixed + len(nodeID) }

func indexSize(nodeID string, chunks int) int {
	return indexFixed + len(nodeID) + chunks*IndexEntrySize
}

func appendHeader(dst []byte, h Header, version uint16) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.BigEndian.AppendUint16(dst, version)
	dst = binary.BigEndian.AppendUint16(dst, uint16(headerSize(h.NodeID)))
	dst = append(dst, byte(h.Class))
	dst = append(dst, h.ULID[:]...)
	dst = append(dst, byte(len(h.NodeID)))
	dst = append(dst, h.NodeID...)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// appendChunk appends a v1 chunk, or a v2 chunk for an encrypted one; c must have passed
// checkChunk.
func appendChunk(dst []byte, c *Chunk) []byte {
	start := len(dst)
	dst = append(dst, chunkMagic...)
	if c.Encrypted {
		dst = append(dst, chunkVersionV2, flagEncrypted)
		dst = binary.BigEndian.AppendUint16(dst, ChunkHeaderSizeV2)
	} else {
		dst = append(dst, chunkVersion, 0) // version, flags
		dst = binary.BigEndian.AppendUint16(dst, ChunkHeaderSize)
	}
	dst = append(dst, byte(c.Encoding), 0) // encoding, reserved
	dst = binary.BigEndian.AppendUint64(dst, c.StreamID)
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Partition))
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.Records))
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.MaxTimestamp))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.payloadLen()))
	crcAt := len(dst)
	dst = append(dst, 0, 0, 0, 0) // payload crc, set below
	if c.Encrypted {
		dst = binary.BigEndian.AppendUint16(dst, uint16(c.EnvelopeLen))
		dst = append(dst, 0, 0) // reserved
	}
	hdrEnd := len(dst)
	dst = append(dst, 0, 0, 0, 0) // header crc, set below
	// A payload in parts is checksummed and copied part after part: never joined first.
	var crc uint32
	if c.Payload != nil {
		crc = crc32.Checksum(c.Payload, castagnoli)
		dst = append(dst, c.Payload...)
	} else if c.PartCRCs != nil {
		for i, p := range c.Parts {
			crc = crc32c.Combine(crc, c.PartCRCs[i], len(p))
			dst = append(dst, p...)
		}
	} else {
		for _, p := range c.Parts {
			crc = crc32.Update(crc, castagnoli, p)
			dst = append(dst, p...)
		}
	}
	binary.BigEndian.PutUint32(dst[crcAt:], crc)
	binary.BigEndian.PutUint32(dst[hdrEnd:], crc32.Checksum(dst[start:hdrEnd], castagnoli))
	return dst
}

func appendIndex(dst []byte, h Header, refs []ChunkRef) []byte {
	dst = append(dst, byte(h.Class))
	dst = append(dst, h.ULID[:]...)
	dst = append(dst, byte(len(h.NodeID)))
	dst = append(dst, h.NodeID...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(refs)))
	for _, r := range refs {
		dst = binary.BigEndian.AppendUint64(dst, r.StreamID)
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Partition))
		flags := byte(0)
		if r.Encrypted {
			flags = flagEncrypted
		}
		dst = append(dst, byte(r.Encoding), flags)
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Offset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Length))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Records))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.MaxTimestamp))
	}
	return dst
}

// appendFooter appends the footer; index is the encoded index.
func appendFooter(dst []byte, indexOff uint64, indexLen uint32, index []byte, version uint16) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, indexOff)
	dst = binary.BigEndian.AppendUint32(dst, indexLen)
	crc := crc32.Update(crc32.Checksum(index, castagnoli), castagnoli, dst[start:])
	dst = binary.BigEndian.AppendUint32(dst, crc)
	dst = binary.BigEndian.AppendUint16(dst, version)
	return append(dst, magic...)
}
