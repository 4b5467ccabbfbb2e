// Package envelope seals WAL chunks of namespaces that have a customer-managed key: each
// chunk with AES-256-GCM under its own random data key, the data key wrapped (AES-256-GCM
// again) by the namespace's current key-encryption key, which a Keyring gets from KMS once
// per namespace and hour and holds only in memory; KMS's wrapped copy of it is stored at
// ns/<namespace id>/keys/<key id>.key. The chunk's identity (its object, position, stream
// and partition) is the additional data of both seals, so a sealed chunk moved to another
// object or position does not open. Destroying the namespace's KMS key makes exactly its
// chunks unreadable (crypto-shredding).
//
// A sealed chunk (version 1), all integers big-endian:
//
//	u8  version (1)
//	u8  key id length K, then K bytes: the key-encryption key's id (a ULID)
//	12  nonce of the wrapped data key
//	48  the data key sealed by the key-encryption key (32 bytes + 16-byte tag)
//	12  nonce of the chunk
//	N   the chunk sealed by the data key (plaintext + 16-byte tag)
package envelope

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrSealed marks a sealed chunk that is malformed, tampered with, or opened with the
// wrong identity or key.
var ErrSealed = errors.New("envelope: sealed chunk does not open")

const (
	version  = 1
	keySize  = 32
	nonceLen = 12
	tagLen   = 16
	// Overhead is the most bytes sealing adds to a chunk beyond its key id.
	Overhead = 2 + nonceLen + keySize + tagLen + nonceLen + tagLen
)

// ChunkID is what a sealed chunk is bound to.
type ChunkID struct {
	Object    string // the WAL object's key
	Index     uint32 // the chunk's position in the object
	StreamID  uint64
	Partition int32
}

// aad is the additional data of both seals: a domain tag, the chunk's identity and the key id.
func (c ChunkID) aad(keyID string, what byte) []byte {
	b := make([]byte, 0, 32+len(c.Object)+len(keyID))
	b = append(b, "loam-chunk"...)
	b = append(b, what)
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.Object)))
	b = append(b, c.Object...)
	b = binary.BigEndian.AppendUint32(b, c.Index)
	b = binary.BigEndian.AppendUint64(b, c.StreamID)
	b = binary.BigEndian.AppendUint32(b, uint32(c.Partition))
	b = append(b, byte(len(keyID)))
	return append(b, keyID...)
}

func gcm(key []byte) (cipher.AEAD, error) {
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(blk)
}

// Seal seals plaintext for chunk id under a fresh data key wrapped by kek (32 bytes) whose
// id is keyID.
func Seal(kek []byte, keyID string, id ChunkID, plaintext []byte) ([]byte, error) {
	if len(kek) != keySize {
		return nil, fmt.Errorf("envelope: key-encryption key of %d bytes, want %d", len(kek), keySize)
	}
	if keyID == "" || len(keyID) > 255 {
		return nil, fmt.Errorf("envelope: key id of %d bytes, want 1-255", len(keyID))
	}
	dek := make([]byte, keySize)
	nonces := make([]byte, 2*nonceLen)
	if _, err := rand.Read(dek); err != nil {
		return nil, err
	}
	if _, err := rand.Read(nonces); err != nil {
		return nil, err
	}
	wrap, err := gcm(kek)
	if err != nil {
		return nil, err
	}
	seal, err := gcm(dek)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, Overhead+len(keyID)+len(plaintext))
	out = append(out, version, byte(len(keyID)))
	out = append(out, keyID...)
	out = append(out, nonces[:nonceLen]...)
	out = wrap.Seal(out, nonces[:nonceLen], dek, id.aad(keyID, 'k'))
	out = append(out, nonces[nonceLen:]...)
	out = seal.Seal(out, nonces[nonceLen:], plaintext, id.aad(keyID, 'c'))
	clear(dek)
	return out, nil
}

// KeyID answers the id of the key-encryption key a sealed chunk needs.
func KeyID(sealed []byte) (string, error) {
	if len(sealed) < 2 || sealed[0] != version {
		return "", fmt.Errorf("%w: not a version %d sealed chunk", ErrSealed, version)
	}
	n := int(sealed[1])
	if n == 0 || len(sealed) < 2+n+Overhead-2 {
		return "", fmt.Errorf("%w: %d bytes is too short", ErrSealed, len(sealed))
	}
	return string(sealed[2 : 2+n]), nil
}

// Open opens a sealed chunk of chunk id with kek.
func Open(kek []byte, id ChunkID, sealed []byte) ([]byte, error) {
	keyID, err := KeyID(sealed)
	if err != nil {
		return nil, err
	}
	if len(kek) != keySize {
		return nil, fmt.Errorf("envelope: key-encryption key of %d bytes, want %d", len(kek), keySize)
	}
	p := sealed[2+len(keyID):]
	wrapNonce, wrapped := p[:nonceLen], p[nonceLen:nonceLen+keySize+tagLen]
	p = p[nonceLen+keySize+tagLen:]
	nonce, ct := p[:nonceLen], p[nonceLen:]
	wrap, err := gcm(kek)
	if err != nil {
		return nil, err
	}
	dek, err := wrap.Open(nil, wrapNonce, wrapped, id.aad(keyID, 'k'))
	if err != nil {
		return nil, fmt.Errorf("%w: the data key does not unwrap (wrong key, chunk identity or tampered)", ErrSealed)
	}
	defer clear(dek)
	seal, err := gcm(dek)
	if err != nil {
		return nil, err
	}
	pt, err := seal.Open(nil, nonce, ct, id.aad(keyID, 'c'))
	if err != nil {
		return nil, fmt.Errorf("%w: the chunk does not open (tampered or moved)", ErrSealed)
	}
	return pt, nil
}

// EnvelopeLen is the length of a sealed chunk's envelope: its version, key id, wrapped
// data key and their nonce (what walfmt's encrypted chunk header counts).
func EnvelopeLen(sealed []byte) (int, error) {
	keyID, err := KeyID(sealed)
	if err != nil {
		return 0, err
	}
	return 2 + len(keyID) + nonceLen + keySize + tagLen, nil
}
