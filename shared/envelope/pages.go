package envelope

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
)

// Sealed pages: a segment of a namespace with a key is stored sealed in fixed-size pages,
// so a range read fetches and opens only the pages that cover it. Each object has its own
// random data key, wrapped by the namespace's key-encryption key. Layout (version 1), all
// integers big-endian:
//
//	4   magic "LSP1"
//	u8  version (1)
//	u8  key id length K (1-64)
//	64  the key-encryption key's id: K bytes, then zeros
//	u32 page size P: plaintext bytes per page (4 KiB - 16 MiB)
//	u64 plaintext length L
//	12  nonce of the wrapped data key
//	48  the object's data key sealed by the key-encryption key (32 bytes + 16-byte tag)
//	    then ceil(L/P) pages: page i is plaintext [i·P, min((i+1)·P, L)) sealed by the
//	    data key (+ a 16-byte tag), its nonce 4 zero bytes and i as a u64
//
// The header's first 82 bytes and the object key are the wrapped data key's additional
// data; the object key, the page index and L are each page's. So a header or page changed,
// a page moved to another position or object, or an object truncated or renamed, does not
// open. Page i is stored at PagesHeaderLen + i·(P+16).
const (
	pagesMagic   = "LSP1"
	pagesVersion = 1
	// PagesHeaderLen is the size of a sealed-pages header.
	PagesHeaderLen = 4 + 1 + 1 + maxPageKeyID + 4 + 8 + nonceLen + keySize + tagLen
	maxPageKeyID   = 64
	// DefaultPageSize is the plaintext bytes per page unless configured.
	DefaultPageSize = 64 << 10
	MinPageSize     = 4 << 10
	MaxPageSize     = 16 << 20
	pagesFixed      = 4 + 1 + 1 + maxPageKeyID + 4 + 8 // what the wrapped key's AAD covers
)

// PagesHeader is the decoded header of a sealed-pages object.
type PagesHeader struct {
	KeyID    string
	PageSize int64
	Length   int64 // plaintext bytes
	raw      [PagesHeaderLen]byte
}

// Pages is how many pages the object holds.
func (h *PagesHeader) Pages() int64 { return (h.Length + h.PageSize - 1) / h.PageSize }

// StoredSize is the size of the whole sealed object.
func (h *PagesHeader) StoredSize() int64 { return PagesHeaderLen + h.Length + h.Pages()*tagLen }

// pageAt is where page i is stored and how many bytes it has there.
func (h *PagesHeader) pageAt(i int64) (off, n int64) {
	plain := min(h.PageSize, h.Length-i*h.PageSize)
	return PagesHeaderLen + i*(h.PageSize+tagLen), plain + tagLen
}

// ParsePagesHeader decodes a sealed-pages header (the first PagesHeaderLen bytes of b).
func ParsePagesHeader(b []byte) (PagesHeader, error) {
	var h PagesHeader
	if len(b) < PagesHeaderLen {
		return h, fmt.Errorf("%w: sealed pages: header of %d bytes, want %d", ErrSealed, len(b), PagesHeaderLen)
	}
	if string(b[:4]) != pagesMagic {
		return h, fmt.Errorf("%w: sealed pages: magic %q, want %q", ErrSealed, b[:4], pagesMagic)
	}
	if b[4] != pagesVersion {
		return h, fmt.Errorf("%w: sealed pages: version %d, want %d", ErrSealed, b[4], pagesVersion)
	}
	k := int(b[5])
	if k == 0 || k > maxPageKeyID {
		return h, fmt.Errorf("%w: sealed pages: key id length %d, want 1-%d", ErrSealed, k, maxPageKeyID)
	}
	for _, c := range b[6+k : 6+maxPageKeyID] {
		if c != 0 {
			return h, fmt.Errorf("%w: sealed pages: key id padding is not zero", ErrSealed)
		}
	}
	h.KeyID = string(b[6 : 6+k])
	h.PageSize = int64(binary.BigEndian.Uint32(b[6+maxPageKeyID:]))
	if h.PageSize < MinPageSize || h.PageSize > MaxPageSize {
		return h, fmt.Errorf("%w: sealed pages: page size %d, want %d-%d", ErrSealed, h.PageSize, MinPageSize, MaxPageSize)
	}
	l := binary.BigEndian.Uint64(b[10+maxPageKeyID:])
	if l > 1<<50 {
		return h, fmt.Errorf("%w: sealed pages: plaintext length %d is beyond any segment", ErrSealed, l)
	}
	h.Length = int64(l)
	copy(h.raw[:], b[:PagesHeaderLen])
	return h, nil
}

func pagesKeyAAD(object string, fixed []byte) []byte {
	b := make([]byte, 0, 16+len(object)+len(fixed))
	b = append(b, "loam-pages"...)
	b = append(b, 'k')
	b = binary.BigEndian.AppendUint16(b, uint16(len(object)))
	b = append(b, object...)
	return append(b, fixed...)
}

func pageAAD(dst []byte, object string, i, length int64) []byte {
	dst = append(dst[:0], "loam-pages"...)
	dst = append(dst, 'p')
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(object)))
	dst = append(dst, object...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(i))
	return binary.BigEndian.AppendUint64(dst, uint64(length))
}

func pageNonce(i int64) []byte {
	var n [nonceLen]byte
	binary.BigEndian.PutUint64(n[4:], uint64(i))
	return n[:]
}

// SealPages seals plaintext as the object at key object, in pages of pageSize bytes,
// under a fresh data key wrapped by kek (32 bytes) whose id is keyID.
func SealPages(kek []byte, keyID, object string, pageSize int, plaintext []byte) ([]byte, error) {
	return sealPages(rand.Reader, kek, keyID, object, pageSize, plaintext)
}

func sealPages(rnd io.Reader, kek []byte, keyID, object string, pageSize int, plaintext []byte) ([]byte, error) {
	switch {
	case len(kek) != keySize:
		return nil, fmt.Errorf("envelope: key-encryption key of %d bytes, want %d", len(kek), keySize)
	case keyID == "" || len(keyID) > maxPageKeyID:
		return nil, fmt.Errorf("envelope: sealed pages: key id of %d bytes, want 1-%d", len(keyID), maxPageKeyID)
	case pageSize < MinPageSize || pageSize > MaxPageSize:
		return nil, fmt.Errorf("envelope: sealed pages: page size %d, want %d-%d", pageSize, MinPageSize, MaxPageSize)
	}
	dek := make([]byte, keySize+nonceLen)
	defer clear(dek)
	if _, err := io.ReadFull(rnd, dek); err != nil {
		return nil, err
	}
	wrap, err := gcm(kek)
	if err != nil {
		return nil, err
	}
	seal, err := gcm(dek[:keySize])
	if err != nil {
		return nil, err
	}
	h := PagesHeader{PageSize: int64(pageSize), Length: int64(len(plaintext))}
	out := make([]byte, 0, h.StoredSize())
	out = append(out, pagesMagic...)
	out = append(out, pagesVersion, byte(len(keyID)))
	out = append(out, keyID...)
	out = append(out, make([]byte, maxPageKeyID-len(keyID))...)
	out = binary.BigEndian.AppendUint32(out, uint32(pageSize))
	out = binary.BigEndian.AppendUint64(out, uint64(len(plaintext)))
	fixed := out[:pagesFixed]
	nonce := dek[keySize:]
	out = append(out, nonce...)
	out = wrap.Seal(out, nonce, dek[:keySize], pagesKeyAAD(object, fixed))
	var aad []byte
	for i := int64(0); i < h.Pages(); i++ {
		p := plaintext[i*h.PageSize : min((i+1)*h.PageSize, h.Length)]
		aad = pageAAD(aad, object, i, h.Length)
		out = seal.Seal(out, pageNonce(i), p, aad)
	}
	return out, nil
}

// dataKey unwraps the object's data key with kek: an AEAD for its pages.
func (h *PagesHeader) dataKey(kek []byte, object string) (cipher.AEAD, error) {
	if len(kek) != keySize {
		return nil, fmt.Errorf("envelope: key-encryption key of %d bytes, want %d", len(kek), keySize)
	}
	wrap, err := gcm(kek)
	if err != nil {
		return nil, err
	}
	nonce := h.raw[pagesFixed : pagesFixed+nonceLen]
	dek, err := wrap.Open(nil, nonce, h.raw[pagesFixed+nonceLen:], pagesKeyAAD(object, h.raw[:pagesFixed]))
	if err != nil {
		return nil, fmt.Errorf("%w: sealed pages of %s: the data key does not unwrap (wrong key, object or header tampered)", ErrSealed, object)
	}
	defer clear(dek)
	return gcm(dek)
}

// pageSpan is the stored byte range holding the pages that cover plaintext [off, off+n),
// and the first of them. n > 0, off+n <= Length.
func (h *PagesHeader) pageSpan(off, n int64) (from, to int64, soff, sn int64) {
	from, to = off/h.PageSize, (off+n-1)/h.PageSize+1
	soff, _ = h.pageAt(from)
	lastOff, lastN := h.pageAt(to - 1)
	return from, to, soff, lastOff + lastN - soff
}

// openPages opens pages [from, to) stored contiguously in b and appends their plaintext.
func (h *PagesHeader) openPages(dst []byte, aead cipher.AEAD, object string, from, to int64, b []byte) ([]byte, error) {
	var aad []byte
	for i := from; i < to; i++ {
		_, n := h.pageAt(i)
		if int64(len(b)) < n {
			return nil, fmt.Errorf("%w: sealed pages of %s: page %d is cut short (%d of %d bytes)", ErrSealed, object, i, len(b), n)
		}
		aad = pageAAD(aad, object, i, h.Length)
		var err error
		if dst, err = aead.Open(dst, pageNonce(i), b[:n], aad); err != nil {
			return nil, fmt.Errorf("%w: sealed pages of %s: page %d does not open (tampered or moved)", ErrSealed, object, i)
		}
		b = b[n:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: sealed pages of %s: %d bytes after page %d", ErrSealed, object, len(b), to-1)
	}
	return dst, nil
}

// OpenPages opens a whole sealed-pages object stored at key object with kek.
func OpenPages(kek []byte, object string, sealed []byte) ([]byte, error) {
	h, err := ParsePagesHeader(sealed)
	if err != nil {
		return nil, err
	}
	if int64(len(sealed)) != h.StoredSize() {
		return nil, fmt.Errorf("%w: sealed pages of %s: %d bytes, the header says %d", ErrSealed, object, len(sealed), h.StoredSize())
	}
	aead, err := h.dataKey(kek, object)
	if err != nil {
		return nil, err
	}
	return h.openPages(make([]byte, 0, h.Length), aead, object, 0, h.Pages(), sealed[PagesHeaderLen:])
}
