package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Scratch buffers for records sections being compressed or validated.
const maxPooledBuf = 4 << 20 // larger buffers are left to the GC

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func getBuf() *[]byte  { return bufPool.Get().(*[]byte) }
func putBuf(b *[]byte) { bufPool.Put(b) }

// appendWriter is an io.Writer appending to a slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

var (
	gzipWriters = sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
		return w
	}}
	lz4Writers = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// 64 KiB blocks, as Java's producer writes; independent blocks and a
		// content checksum are the library's defaults and Java reads both.
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb))
		return w
	}}
	gzipReaders = sync.Pool{New: func() any { return new(gzip.Reader) }}
	lz4Readers  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
	zstdEncErr  error

	zstdDecMu sync.Mutex
	zstdDecs  = map[int]*zstd.Decoder{} // by size limit
)

// zstdEncoder is shared: EncodeAll is safe for concurrent use.
func zstdEncoder() (*zstd.Encoder, error) {
	zstdEncOnce.Do(func() {
		zstdEnc, zstdEncErr = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderConcurrency(2),
			zstd.WithWindowSize(1<<20))
	})
	return zstdEnc, zstdEncErr
}

// zstdDecoder returns a decoder whose DecodeAll refuses output over limit bytes (summed
// over all frames) before allocating it, and a func to call when done with it. Decoders
// are shared per limit (DecodeAll is safe for concurrent use); callers use a handful of
// limits, and past eight the decoder is made for the call and closed after it.
func zstdDecoder(limit int) (*zstd.Decoder, func(), error) {
	zstdDecMu.Lock()
	defer zstdDecMu.Unlock()
	if d, ok := zstdDecs[limit]; ok {
		return d, func() {}, nil
	}
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(2),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(uint64(limit)),
		zstd.WithDecoderMaxWindow(max(uint64(limit), zstd.MinWindowSize)))
	if err != nil {
		return nil, nil, err
	}
	if len(zstdDecs) >= 8 {
		return d, d.Close, nil
	}
	zstdDecs[limit] = d
	return d, func() {}, nil
}

// compress appends src compressed with c to dst.
func compress(dst, src []byte, c Compression) ([]byte, error) {
	switch c {
	case Gzip:
		aw := appendWriter{b: dst}
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		w.Reset(&aw)
		if _, err := w.Write(src); err != nil {
			return dst, err
		}
		if err := w.Close(); err != nil {
			return dst, err
		}
		return aw.b, nil
	case LZ4:
		aw := appendWriter{b: dst}
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		w.Reset(&aw)
		if _, err := w.Write(src); err != nil {
			return dst, err
		}
		if err := w.Close(); err != nil {
			return dst, err
		}
		return aw.b, nil
	case Snappy:
		return appendXerial(dst, src), nil
	case Zstd:
		enc, err := zstdEncoder()
		if err != nil {
			return dst, err
		}
		return enc.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("codec %d: %w", int8(c), ErrUnsupportedCompression)
}

// xerial framing, as written by the Java client's snappy-java SnappyOutputStream: an
// 8-byte magic, two big-endian int32 versions (1, 1), then blocks of a big-endian int32
// length and a raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	xerialBlock      = 32 << 10 // uncompressed bytes per block, as snappy-java
)

func appendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, 1)
	dst = binary.BigEndian.AppendUint32(dst, 1)
	for len(src) > 0 {
		n := min(len(src), xerialBlock)
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		need := s2.MaxEncodedLen(n)
		dst = slices.Grow(dst, need)
		block := s2.EncodeSnappy(dst[len(dst):len(dst)+need], src[:n])
		binary.BigEndian.PutUint32(dst[at:], uint32(len(block)))
		dst = dst[:len(dst)+len(block)]
		src = src[n:]
	}
	return dst
}

var errXerial = errors.New("malformed xerial snappy framing")

// decompress appends src decompressed with c to dst, refusing with ErrTooLarge output
// over limit bytes. None returns src itself.
func decompress(dst, src []byte, c Compression, limit int) ([]byte, error) {
	switch c {
	case None:
		return src, nil
	case Gzip:
		r := gzipReaders.Get().(*gzip.Reader)
		defer gzipReaders.Put(r)
		if err := r.Reset(bytes.NewReader(src)); err != nil {
			return dst, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return readLimited(dst, r, limit)
	case LZ4:
		r := lz4Readers.Get().(*lz4.Reader)
		defer lz4Readers.Put(r)
		r.Reset(bytes.NewReader(src))
		return readLimited(dst, r, limit)
	case Snappy:
		if len(src) >= xerialHeaderSize && bytes.HasPrefix(src, xerialMagic) {
			return decodeXerial(dst, src[xerialHeaderSize:], limit)
		}
		return decodeSnappyBlock(dst, src, limit)
	case Zstd:
		d, done, err := zstdDecoder(limit)
		if err != nil {
			return dst, err
		}
		defer done()
		start := len(dst)
		out, err := d.DecodeAll(src, dst)
		if err != nil {
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
				return dst, fmt.Errorf("over %d bytes: %w: %v", limit, ErrTooLarge, err)
			}
			return dst, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if len(out)-start > limit {
			return dst, fmt.Errorf("%d bytes, over %d: %w", len(out)-start, limit, ErrTooLarge)
		}
		return out, nil
	}
	return dst, fmt.Errorf("codec %d: %w", int8(c), ErrUnsupportedCompression)
}

// readLimited appends everything r yields to dst, failing once it passes limit bytes.
func readLimited(dst []byte, r io.Reader, limit int) ([]byte, error) {
	start := len(dst)
	for {
		got := len(dst) - start
		if got > limit {
			return dst[:start], fmt.Errorf("over %d bytes: %w", limit, ErrTooLarge)
		}
		if len(dst) == cap(dst) {
			// Double what was read so far, but never plan past limit+1 bytes.
			dst = slices.Grow(dst, min(max(got, 32<<10), limit+1-got))
		}
		room := min(cap(dst)-len(dst), limit+1-got)
		n, err := r.Read(dst[len(dst) : len(dst)+room])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			if len(dst)-start > limit {
				return dst[:start], fmt.Errorf("over %d bytes: %w", limit, ErrTooLarge)
			}
			return dst, nil
		}
		if err != nil {
			return dst[:start], fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
}

func decodeSnappyBlock(dst, src []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, fmt.Errorf("snappy block: %w: %v", ErrCorrupt, err)
	}
	if n > limit {
		return dst, fmt.Errorf("snappy block of %d bytes, over %d: %w", n, limit, ErrTooLarge)
	}
	start := len(dst)
	if cap(dst)-start < n {
		dst = slices.Grow(dst, n)
	}
	out, err := s2.Decode(dst[start:start+n], src)
	if err != nil {
		return dst[:start], fmt.Errorf("snappy block: %w: %v", ErrCorrupt, err)
	}
	return dst[:start+len(out)], nil
}

func decodeXerial(dst, src []byte, limit int) ([]byte, error) {
	// First pass: check the framing and bound the total before allocating.
	total := 0
	for rem, at := src, xerialHeaderSize; len(rem) > 0; {
		if len(rem) < 4 {
			return dst, fmt.Errorf("xerial block length at byte %d: %w: %w", at, ErrCorrupt, errXerial)
		}
		size := binary.BigEndian.Uint32(rem)
		rem = rem[4:]
		if uint64(size) > uint64(len(rem)) {
			return dst, fmt.Errorf("xerial block of %d bytes at byte %d, %d left: %w: %w", size, at, len(rem), ErrCorrupt, errXerial)
		}
		n, err := s2.DecodedLen(rem[:size])
		if err != nil {
			return dst, fmt.Errorf("xerial block at byte %d: %w: %v", at, ErrCorrupt, err)
		}
		total += n
		if total > limit {
			return dst, fmt.Errorf("xerial snappy over %d bytes: %w", limit, ErrTooLarge)
		}
		rem = rem[size:]
		at += 4 + int(size)
	}
	start := len(dst)
	if cap(dst)-start < total {
		dst = slices.Grow(dst, total)
	}
	for at := xerialHeaderSize; len(src) > 0; {
		size := int(binary.BigEndian.Uint32(src))
		block := src[4 : 4+size]
		n, _ := s2.DecodedLen(block)
		out, err := s2.Decode(dst[len(dst):len(dst)+n], block)
		if err != nil {
			return dst[:start], fmt.Errorf("xerial block at byte %d: %w: %v", at, ErrCorrupt, err)
		}
		dst = dst[:len(dst)+len(out)]
		src = src[4+size:]
		at += 4 + size
	}
	return dst, nil
}
