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
	return nil
}
