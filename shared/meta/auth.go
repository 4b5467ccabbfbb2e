package meta

import (
	"crypto/sha256"
	"errors"
	"fmt"
)

// Errors of namespaces and API keys.
var (
	ErrNamespaceNotEmpty = errors.New("meta: namespace not empty")
	ErrKeyNotFound       = errors.New("meta: API key not found")
	ErrKeyExists         = errors.New("meta: API key already exists")
)

// Key limits.
const (
	MaxKeyIDLength          = 64
	MaxKeyDescriptionLength = 256
	// MaxKeys bounds the keys the metastore holds, revoked ones included.
	MaxKeys = 100000
)

// APIKey is a stored API key. The key itself is never stored: Hash is the SHA-256 of the
// whole key string (KeyHash). A key is scoped to one Namespace, or Admin (Namespace empty).
type APIKey struct {
	ID          string `json:"id"`
	Namespace   string `json:"namespace,omitempty"`
	Admin       bool   `json:"admin,omitempty"`
	Hash        []byte `json:"-"`
	Description string `json:"description,omitempty"`
	CreatedMs   int64  `json:"created_ms"`
	RevokedMs   int64  `json:"revoked_ms,omitempty"` // 0: live
	// SCRAM holds the key's SCRAM verifiers (one per mechanism), made when it was created;
	// none for a key created before they were.
	SCRAM []SCRAMVerifier `json:"-"`
}

// SCRAMVerifier is what a SCRAM server (RFC 5802) keeps of a password, here the key string:
// not the key, from which it cannot be recovered.
type SCRAMVerifier struct {
	Mechanism  string // SCRAM-SHA-256 or SCRAM-SHA-512
	Salt       []byte
	Iterations int32
	StoredKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
}

// Revoked reports whether the key was revoked.
func (k APIKey) Revoked() bool { return k.RevokedMs != 0 }

// KeyHash is the stored hash of key string key.
func KeyHash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// CheckKey validates a key to create: a printable id of 1..MaxKeyIDLength characters, a
// SHA-256 hash, exactly one of Admin and Namespace, a description of at most
// MaxKeyDescriptionLength bytes.
func CheckKey(k APIKey) error {
	if k.ID == "" || len(k.ID) > MaxKeyIDLength {
		return fmt.Errorf("%w: key id must be 1 to %d characters", ErrInvalidArgument, MaxKeyIDLength)
	}
	for _, c := range k.ID {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w: key id %q: only letters, digits, '-' and '_'", ErrInvalidArgument, k.ID)
		}
	}
	if len(k.Hash) != sha256.Size {
		return fmt.Errorf("%w: key %s: hash of %d bytes, want %d (SHA-256)", ErrInvalidArgument, k.ID, len(k.Hash), sha256.Size)
	}
	if k.Admin == (k.Namespace != "") {
		return fmt.Errorf("%w: key %s: exactly one of admin and a namespace", ErrInvalidArgument, k.ID)
	}
	if len(k.Description) > MaxKeyDescriptionLength {
		return fmt.Errorf("%w: key %s: description longer than %d bytes", ErrInvalidArgument, k.ID, MaxKeyDescriptionLength)
	}
	return checkSCRAM(k)
}

// checkSCRAM checks a key's SCRAM verifiers: SCRAM-SHA-256 or SCRAM-SHA-512, at most one
// each, a salt, 4096..2^20 iterations, digests of the mechanism's size.
func checkSCRAM(k APIKey) error {
	seen := map[string]bool{}
	for _, v := range k.SCRAM {
		size := map[string]int{"SCRAM-SHA-256": 32, "SCRAM-SHA-512": 64}[v.Mechanism]
		switch {
		case size == 0 || seen[v.Mechanism]:
			return fmt.Errorf("%w: key %s: SCRAM verifier of mechanism %q (want one each of SCRAM-SHA-256, SCRAM-SHA-512)", ErrInvalidArgument, k.ID, v.Mechanism)
		case len(v.Salt) == 0 || len(v.Salt) > 64 || v.Iterations < 4096 || v.Iterations > 1<<20:
			return fmt.Errorf("%w: key %s: %s verifier with a salt of %d bytes and %d iterations (want 1..64 bytes, 4096..%d iterations)", ErrInvalidArgument, k.ID, v.Mechanism, len(v.Salt), v.Iterations, 1<<20)
		case len(v.StoredKey) != size || len(v.ServerKey) != size:
			return fmt.Errorf("%w: key %s: %s verifier keys of %d and %d bytes, want %d", ErrInvalidArgument, k.ID, v.Mechanism, len(v.StoredKey), len(v.ServerKey), size)
		}
		seen[v.Mechanism] = true
	}
	return nil
}
