package segfmt

import (
	"context"
	"fmt"
)

// RangeReader reads byte ranges of stored objects; objstore.Bucket satisfies it. GetRange
// returns n bytes of key from off, or the bytes to the end when n < 0.
type RangeReader interface {
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
}

// SuffixRead is how many bytes ReadInfo reads from the end of an object first. An index
// of up to about 7,000 batches fits in it (a 64 MiB segment of 10 KiB batches); a larger
// one costs a second read.
const SuffixRead = 256 << 10

// ReadInfo reads and validates the trailer and index of the segment at key, whose size is
// size bytes, with one suffix range read (two when the index exceeds SuffixRead). The
// header comes from the index's copy of it; batches are not read (CheckBatches validates
// them once read).
func ReadInfo(ctx context.Context, r RangeReader, key string, size int64) (*Info, error) {
	info, err := readInfo(ctx, r, key, size)
	if err != nil {
		return nil, fmt.Errorf("segfmt: read info %s: %w", key, err)
	}
	return info, nil
}

func readInfo(ctx context.Context, r RangeReader, key string, size int64) (*Info, error) {
	if size < HeaderSize+minIndexLen+TrailerSize+minDataLen {
		return nil, bad(ErrTruncated, "object size %d is below the smallest segment's", size)
	}
	start := max(0, size-SuffixRead)
	tail, err := r.GetRange(ctx, key, start, size-start)
	if err != nil {
		return nil, err
	}
	if int64(len(tail)) != size-start {
		return nil, bad(ErrTruncated, "read of [%d, %d) returned %d bytes", start, size, len(tail))
	}
	trl := tail[len(tail)-TrailerSize:]
	t, err := decodeTrailer(trl, size)
	if err != nil {
		return nil, err
	}
	var index []byte
	if t.indexOff >= start {
		index = tail[t.indexOff-start : t.indexOff-start+t.indexLen]
	} else {
		index, err = r.GetRange(ctx, key, t.indexOff, t.indexLen)
		if err != nil {
			return nil, err
		}
		if int64(len(index)) != t.indexLen {
			return nil, bad(ErrTruncated, "read of index [%d, +%d) returned %d bytes", t.indexOff, t.indexLen, len(index))
		}
	}
	return decodeIndex(index, trl, t)
}

// ReadInfoAt is ReadInfo for a reader that knows where the data region ends rather than
// the object's size: the offset-index entry of a segment covers exactly its data region,
// so indexOffset is the entry's Offset+Length. It reads from there to the end of the
// object, which is exactly the index and trailer, in one range read.
func ReadInfoAt(ctx context.Context, r RangeReader, key string, indexOffset int64) (*Info, error) {
	info, err := readInfoAt(ctx, r, key, indexOffset)
	if err != nil {
		return nil, fmt.Errorf("segfmt: read info %s at %d: %w", key, indexOffset, err)
	}
	return info, nil
}

func readInfoAt(ctx context.Context, r RangeReader, key string, indexOffset int64) (*Info, error) {
	if indexOffset < HeaderSize+minDataLen {
		return nil, fmt.Errorf("index offset %d is before the end of the smallest data region: %w", indexOffset, ErrInvalid)
	}
	tail, err := r.GetRange(ctx, key, indexOffset, -1)
	if err != nil {
		return nil, err
	}
	if len(tail) < minIndexLen+TrailerSize {
		return nil, bad(ErrTruncated, "read from %d returned %d bytes, less than the smallest index and trailer", indexOffset, len(tail))
	}
	size := indexOffset + int64(len(tail))
	trl := tail[len(tail)-TrailerSize:]
	t, err := decodeTrailer(trl, size)
	if err != nil {
		return nil, err
	}
	if t.indexOff != indexOffset {
		return nil, bad(ErrCorrupt, "the trailer puts the index at offset %d, not %d", t.indexOff, indexOffset)
	}
	return decodeIndex(tail[:t.indexLen], trl, t)
}

// ReadBatches serves a fetch from the kafka segment at key described by info (an arrow
// segment fails with ErrInvalid): it range-reads,
// in one request, the batch holding offset (or the first batch after it) and the batches
// that follow while their total stays within maxBytes, always at least one batch (as
// Kafka does, so that a batch larger than maxBytes cannot stall a consumer), checks them
// with CheckBatches and returns their bytes, ready to serve. It returns nil and no error
// when no batch of the segment holds or follows offset.
func ReadBatches(ctx context.Context, r RangeReader, key string, info *Info, offset, maxBytes int64) ([]byte, error) {
	if info.Arrow != nil {
		return nil, fmt.Errorf("segfmt: read batches %s: an arrow segment holds column chunks, not Kafka batches: %w", key, ErrInvalid)
	}
	from, _ := info.Find(offset)
	if from == len(info.Batches) {
		return nil, nil
	}
	to := from + 1
	for total := int64(info.Batches[from].Length); to < len(info.Batches); to++ {
		total += int64(info.Batches[to].Length)
		if total > maxBytes {
			break
		}
	}
	off, n := info.Span(from, to)
	b, err := r.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, fmt.Errorf("segfmt: read batches %s [%d, +%d): %w", key, off, n, err)
	}
	if err := info.CheckBatches(from, to, b); err != nil {
		return nil, fmt.Errorf("segfmt: read batches %s: %w", key, err)
	}
	return b, nil
}
