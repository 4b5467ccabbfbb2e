package walfmt

import (
	"context"
	"fmt"
	"strings"

	"github.com/oklog/ulid/v2"
)

// RangeReader reads byte ranges of stored objects; objstore.Bucket satisfies it. GetRange
// returns n bytes of key from off, or the bytes to the end when n < 0.
type RangeReader interface {
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
}

// SuffixRead is how many bytes ReadIndex reads from the end of an object first. An index
// fits in it up to about 1,500 chunks; a larger index costs one more read.
const SuffixRead = 64 << 10

// ReadIndex reads and validates the footer and chunk index of the object at key, whose
// size is size bytes, with one suffix range read (two when the index exceeds SuffixRead).
// The header comes from the index's copy of it; chunks are not read.
func ReadIndex(ctx context.Context, r RangeReader, key string, size int64) (*Object, error) {
	o, err := readIndex(ctx, r, key, size)
	if err != nil {
		return nil, fmt.Errorf("walfmt: read index %s: %w", key, err)
	}
	return o, nil
}

func readIndex(ctx context.Context, r RangeReader, key string, size int64) (*Object, error) {
	if size < FooterSize {
		return nil, bad(ErrTruncated, "object size %d is below the footer size %d", size, FooterSize)
	}
	start := max(0, size-SuffixRead)
	tail, err := r.GetRange(ctx, key, start, size-start)
	if err != nil {
		return nil, err
	}
	if int64(len(tail)) != size-start {
		return nil, bad(ErrTruncated, "read of [%d, %d) returned %d bytes", start, size, len(tail))
	}
	footer := tail[len(tail)-FooterSize:]
	indexOff, indexLen, err := decodeFooter(footer, size)
	if err != nil {
		return nil, err
	}
	var index []byte
	if indexOff >= start {
		index = tail[indexOff-start : indexOff-start+indexLen]
	} else {
		index, err = r.GetRange(ctx, key, indexOff, indexLen)
		if err != nil {
			return nil, err
		}
		if int64(len(index)) != indexLen {
			return nil, bad(ErrTruncated, "read of index [%d, +%d) returned %d bytes", indexOff, indexLen, len(index))
		}
	}
	return decodeIndex(index, footer, indexOff)
}

// ReadChunk range-reads the chunk ref names from the object at key, validates it and
// returns its payload. The chunk's stream id, partition and length must match ref, and so
// must its encoding and record count where ref sets them (non-zero); MaxTimestamp is not
// compared, so a ref built from an offset-index entry that lacks the encoding still works.
func ReadChunk(ctx context.Context, r RangeReader, key string, ref ChunkRef) ([]byte, error) {
	payload, err := readChunk(ctx, r, key, ref)
	if err != nil {
		return nil, fmt.Errorf("walfmt: read chunk %s [%d, +%d): %w", key, ref.Offset, ref.Length, err)
	}
	return payload, nil
}

func readChunk(ctx context.Context, r RangeReader, key string, ref ChunkRef) ([]byte, error) {
	if ref.Offset < 0 || ref.Length <= ChunkHeaderSize || ref.Length > ChunkHeaderSize+MaxPayload {
		return nil, fmt.Errorf("chunk range out of bounds: %w", ErrInvalid)
	}
	b, err := r.GetRange(ctx, key, ref.Offset, ref.Length)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != ref.Length {
		return nil, bad(ErrTruncated, "range read returned %d bytes", len(b))
	}
	got, payload, err := decodeChunk(b, ref.Offset)
	if err != nil {
		return nil, err
	}
	if got.StreamID != ref.StreamID || got.Partition != ref.Partition ||
		(ref.Encoding != 0 && got.Encoding != ref.Encoding) ||
		(ref.Records != 0 && got.Records != ref.Records) {
		return nil, bad(ErrCorrupt, "chunk holds stream %d partition %d (%v, %d records), want stream %d partition %d (%v, %d records)",
			got.StreamID, got.Partition, got.Encoding, got.Records, ref.StreamID, ref.Partition, ref.Encoding, ref.Records)
	}
	return payload, nil
}

// ObjectKey returns the bucket key of a WAL object: "wal/<class>/<node>/<ulid>.wal".
// nodeID should pass ValidateNodeID; ParseObjectKey rejects keys built from one
// that does not.
func ObjectKey(class Class, nodeID string, id ulid.ULID) string {
	return "wal/" + class.String() + "/" + nodeID + "/" + id.String() + ".wal"
}

// ParseObjectKey parses a key ObjectKey returns. It accepts only the canonical form: a
// known class name, a valid node id and the ULID in upper case.
func ParseObjectKey(key string) (Class, string, ulid.ULID, error) {
	fail := func(msg string) (Class, string, ulid.ULID, error) {
		return 0, "", ulid.ULID{}, fmt.Errorf("walfmt: parse object key %q: %s: %w", key, msg, ErrInvalid)
	}
	rest, ok := strings.CutPrefix(key, "wal/")
	if !ok {
		return fail(`no "wal/" prefix`)
	}
	rest, ok = strings.CutSuffix(rest, ".wal")
	if !ok {
		return fail(`no ".wal" suffix`)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return fail("want wal/<class>/<node>/<ulid>.wal")
	}
	class, err := ParseClass(parts[0])
	if err != nil {
		return fail("unknown class")
	}
	if msg := nodeIDProblem(parts[1]); msg != "" {
		return fail("node id " + msg)
	}
	id, err := ulid.ParseStrict(parts[2])
	if err != nil || id.String() != parts[2] || id.IsZero() {
		return fail("bad ulid")
	}
	return class, parts[1], id, nil
}
