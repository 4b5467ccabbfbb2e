package walfmt

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/oklog/ulid/v2"
)

// reader reads big-endian fields from b with a sticky error: after the first short read
// every later read returns zero values and err keeps the first failure.
type reader struct {
	b    []byte
	off  int
	base int64 // offset of b in its object, for messages
	err  error
}

func (r *reader) take(n int, field string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.off < n {
		r.err = bad(ErrTruncated, "%s at offset %d: need %d bytes, have %d",
			field, r.base+int64(r.off), n, len(r.b)-r.off)
		return nil
	}
	p := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return p
}

func (r *reader) u8(field string) uint8 {
	if p := r.take(1, field); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16(field string) uint16 {
	if p := r.take(2, field); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (r *reader) u32(field string) uint32 {
	if p := r.take(4, field); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64(field string) uint64 {
	if p := r.take(8, field); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// pos is the object offset of the next byte.
func (r *reader) pos() int64 { return r.base + int64(r.off) }

// Decode validates a whole object, including every chunk's CRCs, and returns its header
// and chunk index. Payloads are not copied; read them with DecodeChunk on obj[Offset:
// Offset+Length].
func Decode(obj []byte) (*Object, error) {
	o, err := decode(obj)
	if err != nil {
		return nil, fmt.Errorf("walfmt: decode object: %w", err)
	}
	return o, nil
}

func decode(obj []byte) (*Object, error) {
	h, hlen, err := decodeHeader(obj)
	if err != nil {
		return nil, err
	}
	if len(obj) < hlen+FooterSize {
		return nil, bad(ErrTruncated, "object of %d bytes has no room for a footer after the %d-byte header", len(obj), hlen)
	}
	size := int64(len(obj))
	footer := obj[len(obj)-FooterSize:]
	indexOff, indexLen, err := decodeFooter(footer, size)
	if err != nil {
		return nil, err
	}
	o, err := decodeIndex(obj[indexOff:indexOff+indexLen], footer, indexOff)
	if err != nil {
		return nil, err
	}
	if v := binary.BigEndian.Uint16(obj[8:10]); v != o.Version {
		return nil, bad(ErrCorrupt, "header version %d differs from footer version %d", v, o.Version)
	}
	if o.Header != h {
		return nil, bad(ErrCorrupt, "index identity (%s %s %q) differs from header (%s %s %q)",
			o.Header.Class, o.Header.ULID, o.Header.NodeID, h.Class, h.ULID, h.NodeID)
	}
	for i, ref := range o.Chunks {
		got, _, err := decodeChunk(obj[ref.Offset:ref.Offset+ref.Length], ref.Offset)
		if err != nil {
			return nil, fmt.Errorf("chunk %d: %w", i, err)
		}
		if err := sameChunk(got, ref); err != nil {
			return nil, fmt.Errorf("chunk %d at offset %d: %w", i, ref.Offset, err)
		}
	}
	return o, nil
}

// decodeHeader decodes the header at the start of obj and returns it and its length.
func decodeHeader(obj []byte) (Header, int, error) {
	r := reader{b: obj}
	if m := r.take(len(magic), "header magic"); r.err == nil && string(m) != magic {
		return Header{}, 0, bad(ErrBadMagic, "header magic %q at offset 0, want %q", m, magic)
	}
	if v := r.u16("header version"); r.err == nil && v != Version1 && v != Version2 {
		return Header{}, 0, fmt.Errorf("header at offset 8: version %d, this reader supports 1 and 2: %w", v, ErrUnsupportedVersion)
	}
	hlen := int(r.u16("header length"))
	if r.err == nil && hlen < headerFixed+1 {
		return Header{}, 0, bad(ErrCorrupt, "header length %d at offset 10 is below the minimum %d", hlen, headerFixed+1)
	}
	body := r.take(hlen-r.off, "header")
	if r.err != nil {
		return Header{}, 0, r.err
	}
	sum := crc32.Checksum(obj[:hlen-4], castagnoli)
	if want := binary.BigEndian.Uint32(obj[hlen-4:]); sum != want {
		return Header{}, 0, bad(ErrBadCRC, "header crc32c at offset %d is %#08x, computed %#08x", hlen-4, want, sum)
	}
	br := reader{b: body, base: int64(r.off - len(body))}
	h, err := decodeIdentity(&br, "header")
	if err != nil {
		return Header{}, 0, err
	}
	if br.pos() != int64(hlen-4) {
		return Header{}, 0, bad(ErrCorrupt, "header length %d at offset 10 disagrees with node id length %d", hlen, len(h.NodeID))
	}
	return h, hlen, nil
}

// decodeIdentity reads class, ULID, node id length and node id, as the header and the
// index lay them out.
func decodeIdentity(r *reader, section string) (Header, error) {
	at := r.pos()
	class := Class(r.u8(section + " class"))
	id := r.take(16, section+" ulid")
	n := int(r.u8(section + " node id length"))
	node := r.take(n, section+" node id")
	if r.err != nil {
		return Header{}, r.err
	}
	h := Header{Class: class, NodeID: string(node), ULID: ulid.ULID(id)}
	if !h.Class.Valid() {
		return Header{}, bad(ErrCorrupt, "%s %v at offset %d", section, class, at)
	}
	if h.ULID.IsZero() {
		return Header{}, bad(ErrCorrupt, "%s ulid at offset %d is zero", section, at+1)
	}
	if msg := nodeIDProblem(h.NodeID); msg != "" {
		return Header{}, bad(ErrCorrupt, "%s node id %q at offset %d: %s", section, h.NodeID, at+18, msg)
	}
	return h, nil
}

// decodeFooter checks a footer (the last FooterSize bytes of an object of size bytes) and
// returns the index range. The index CRC is checked by decodeIndex.
func decodeFooter(f []byte, size int64) (off, n int64, err error) {
	at := size - FooterSize
	if got := string(f[18:26]); got != magic {
		return 0, 0, bad(ErrBadMagic, "footer magic %q at offset %d, want %q (truncated object?)", got, at+18, magic)
	}
	if v := binary.BigEndian.Uint16(f[16:18]); v != Version1 && v != Version2 {
		return 0, 0, fmt.Errorf("footer at offset %d: version %d, this reader supports 1 and 2: %w", at+16, v, ErrUnsupportedVersion)
	}
	off = int64(binary.BigEndian.Uint64(f[0:8]))
	n = int64(binary.BigEndian.Uint32(f[8:12]))
	// The index ends where the footer starts; off is checked as unsigned so a huge value
	// cannot wrap around.
	if binary.BigEndian.Uint64(f[0:8]) > uint64(at) || off+n != at {
		return 0, 0, bad(ErrCorrupt, "footer at offset %d: index range [%d, +%d) does not end at the footer",
			at, binary.BigEndian.Uint64(f[0:8]), n)
	}
	if n < indexFixed+1+IndexEntrySize {
		return 0, 0, bad(ErrCorrupt, "footer at offset %d: index length %d below the minimum %d", at, n, indexFixed+1+IndexEntrySize)
	}
	return off, n, nil
}

// decodeIndex checks the index CRC (over index and footer[0:12]) and decodes it. index
// starts at object offset indexOff. It checks that chunks are sorted, unique and laid out
// back to back from the end of the header to the index.
func decodeIndex(index, footer []byte, indexOff int64) (*Object, error) {
	sum := crc32.Update(crc32.Checksum(index, castagnoli), castagnoli, footer[:12])
	if want := binary.BigEndian.Uint32(footer[12:16]); sum != want {
		return nil, bad(ErrBadCRC, "index crc32c in footer at offset %d is %#08x, computed %#08x",
			indexOff+int64(len(index))+12, want, sum)
	}
	r := reader{b: index, base: indexOff}
	h, err := decodeIdentity(&r, "index")
	if err != nil {
		return nil, err
	}
	countAt := r.pos()
	count := int64(r.u32("index chunk count"))
	if r.err != nil {
		return nil, r.err
	}
	if count < 1 || int64(len(index)-r.off) != count*IndexEntrySize {
		return nil, bad(ErrCorrupt, "index chunk count %d at offset %d does not match the %d entry bytes",
			count, countAt, len(index)-r.off)
	}
	version := binary.BigEndian.Uint16(footer[16:18])
	o := &Object{Header: h, Version: version, Chunks: make([]ChunkRef, count)}
	next := int64(headerSize(h.NodeID)) // where the next chunk must start
	for i := range o.Chunks {
		at := r.pos()
		ref := ChunkRef{StreamID: r.u64("index stream id"), Partition: int32(r.u32("index partition"))}
		ref.Encoding = Encoding(r.u8("index encoding"))
		flags := r.u8("index flags")
		ref.Offset = int64(r.u64("index chunk offset"))
		ref.Length = int64(r.u32("index chunk length"))
		ref.Records = int64(r.u64("index records"))
		ref.MaxTimestamp = int64(r.u64("index max timestamp"))
		if r.err != nil {
			return nil, r.err
		}
		ref.Encrypted = flags == flagEncrypted
		minLen := int64(ChunkHeaderSize)
		if ref.Encrypted {
			minLen = ChunkHeaderSizeV2
		}
		switch {
		case flags != 0 && (version == Version1 || flags != flagEncrypted):
			return nil, bad(ErrCorrupt, "index entry %d at offset %d: flags %#02x in a version %d object", i, at, flags, version)
		case ref.Offset != next:
			return nil, bad(ErrCorrupt, "index entry %d at offset %d: chunk offset %d, want %d", i, at, ref.Offset, next)
		case ref.Length <= minLen || ref.Length > indexOff-next:
			return nil, bad(ErrCorrupt, "index entry %d at offset %d: chunk length %d out of range", i, at, ref.Length)
		case i > 0 && compareKey(key{o.Chunks[i-1].StreamID, o.Chunks[i-1].Partition}, key{ref.StreamID, ref.Partition}) >= 0:
			return nil, bad(ErrCorrupt, "index entry %d at offset %d: stream %d partition %d out of order", i, at, ref.StreamID, ref.Partition)
		}
		if err := checkRefFields(ref); err != nil {
			return nil, bad(ErrCorrupt, "index entry %d at offset %d: %s", i, at, err)
		}
		next += ref.Length
		o.Chunks[i] = ref
	}
	if next != indexOff {
		return nil, bad(ErrCorrupt, "chunks end at offset %d, the index starts at %d", next, indexOff)
	}
	return o, nil
}

// checkRefFields checks the field ranges a chunk header and an index entry share.
func checkRefFields(ref ChunkRef) error {
	switch {
	case !ref.Encoding.Valid():
		return fmt.Errorf("unknown %v", ref.Encoding)
	case ref.Partition < 0:
		return fmt.Errorf("negative partition %d", ref.Partition)
	case ref.Records < 1:
		return fmt.Errorf("%d records, want >= 1", ref.Records)
	}
	return nil
}

// sameChunk reports a difference between a chunk's own header and its index entry.
func sameChunk(got, want ChunkRef) error {
	got.Offset, got.EnvelopeLen = want.Offset, want.EnvelopeLen
	if got != want {
		return bad(ErrCorrupt, "chunk header %+v differs from index entry %+v", got, want)
	}
	return nil
}

// DecodeChunk validates one chunk, exactly as range-read from its object, and returns its
// header fields (Offset 0, Length len(b)) and payload, which aliases b.
func DecodeChunk(b []byte) (ChunkRef, []byte, error) {
	ref, payload, err := decodeChunk(b, 0)
	if err != nil {
		return ChunkRef{}, nil, fmt.Errorf("walfmt: decode chunk: %w", err)
	}
	return ref, payload, nil
}

// decodeChunk decodes the chunk b, which starts at object offset base (for messages).
func decodeChunk(b []byte, base int64) (ChunkRef, []byte, error) {
	r := reader{b: b, base: base}
	if m := r.take(2, "chunk magic"); r.err == nil && string(m) != chunkMagic {
		return ChunkRef{}, nil, bad(ErrBadMagic, "chunk magic %q at offset %d, want %q", m, base, chunkMagic)
	}
	version := r.u8("chunk version")
	flags := r.u8("chunk flags")
	if r.err == nil && version != chunkVersion && version != chunkVersionV2 {
		return ChunkRef{}, nil, fmt.Errorf("chunk at offset %d: version %d (flags %#02x), this reader supports 1 and 2: %w",
			base, version, flags, ErrUnsupportedVersion)
	}
	hlen := r.u16("chunk header length")
	if r.err != nil {
		return ChunkRef{}, nil, r.err
	}
	size := ChunkHeaderSize
	if version == chunkVersionV2 {
		size = ChunkHeaderSizeV2
		if flags != flagEncrypted {
			return ChunkRef{}, nil, bad(ErrCorrupt, "chunk at offset %d: flags %#02x, v2 requires encrypted (0x01)", base, flags)
		}
	} else if flags != 0 {
		return ChunkRef{}, nil, bad(ErrCorrupt, "chunk at offset %d: flags %#02x, v1 allows none", base, flags)
	}
	if int(hlen) != size {
		return ChunkRef{}, nil, bad(ErrCorrupt, "chunk at offset %d: header length %d, v%d has %d", base, hlen, version, size)
	}
	if len(b) < size {
		return ChunkRef{}, nil, bad(ErrTruncated, "chunk at offset %d: %d bytes, the header alone has %d", base, len(b), size)
	}
	sum := crc32.Checksum(b[:size-4], castagnoli)
	if want := binary.BigEndian.Uint32(b[size-4 : size]); sum != want {
		return ChunkRef{}, nil, bad(ErrBadCRC, "chunk header crc32c at offset %d is %#08x, computed %#08x",
			base+int64(size)-4, want, sum)
	}
	ref := ChunkRef{Encoding: Encoding(r.u8("chunk encoding"))}
	reserved := r.u8("chunk reserved")
	ref.StreamID = r.u64("chunk stream id")
	ref.Partition = int32(r.u32("chunk partition"))
	ref.Records = int64(r.u64("chunk records"))
	ref.MaxTimestamp = int64(r.u64("chunk max timestamp"))
	n := int64(r.u32("chunk payload length"))
	payloadCRC := r.u32("chunk payload crc32c")
	var envLen int64
	if version == chunkVersionV2 {
		envLen = int64(r.u16("chunk envelope length"))
		if r.u16("chunk reserved") != 0 && r.err == nil {
			return ChunkRef{}, nil, bad(ErrCorrupt, "chunk at offset %d: reserved bytes 44-48 not zero", base)
		}
		ref.Encrypted, ref.EnvelopeLen = true, int(envLen)
	}
	r.u32("chunk header crc32c")
	if r.err != nil {
		return ChunkRef{}, nil, r.err
	}
	if reserved != 0 {
		return ChunkRef{}, nil, bad(ErrCorrupt, "chunk at offset %d: reserved byte %#02x", base, reserved)
	}
	if ref.Encrypted && (envLen < 1 || envLen > MaxEnvelope || envLen >= n) {
		return ChunkRef{}, nil, bad(ErrCorrupt, "chunk at offset %d: envelope length %d in a %d-byte sealed payload", base, envLen, n)
	}
	if err := checkRefFields(ref); err != nil {
		return ChunkRef{}, nil, bad(ErrCorrupt, "chunk at offset %d: %s", base, err)
	}
	if n < 1 || n > MaxPayload {
		return ChunkRef{}, nil, bad(ErrCorrupt, "chunk at offset %d: payload length %d out of range", base, n)
	}
	if have := int64(len(b) - size); have != n {
		kind := ErrTruncated
		if have > n {
			kind = ErrCorrupt
		}
		return ChunkRef{}, nil, bad(kind, "chunk at offset %d: payload length %d, have %d bytes", base, n, have)
	}
	payload := b[size:]
	if sum := crc32.Checksum(payload, castagnoli); sum != payloadCRC {
		return ChunkRef{}, nil, bad(ErrBadCRC, "chunk payload crc32c at offset %d is %#08x, computed %#08x",
			base+40, payloadCRC, sum)
	}
	ref.Length = int64(len(b))
	return ref, payload, nil
}
