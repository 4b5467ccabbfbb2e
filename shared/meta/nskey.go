package meta

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Namespace key states.
const (
	// NamespaceKeyActive: the namespace's chunks are sealed under its KMS key.
	NamespaceKeyActive = "active"
	// NamespaceKeyShredded: the key was disabled and scheduled for deletion (an erasure
	// request); log nodes drop its key material and cached plaintext and confirm it
	// (NamespaceKey.Dropped).
	NamespaceKeyShredded = "shredded"
)

// Namespace key limits.
const (
	MaxKeyARNLength = 2048 // KMS's own limit on a key id, ARN or alias
	// MaxShredAcks bounds NamespaceKey.Dropped: the log nodes one shred records.
	MaxShredAcks = 1024
)

// NamespaceKey is a namespace's customer-managed key as the metastore records it: the KMS
// key's name and the state of its use, never key material. Its chunks are sealed with
// data keys wrapped by a key-encryption key that KMS generates under KeyARN (package
// shared/envelope).
type NamespaceKey struct {
	Namespace string `json:"namespace"`
	// ID names the namespace's objects: ns/<ID>/keys/ (wrapped key-encryption keys) and
	// ns/<ID>/ segments. Cluster-unique, never reused.
	ID     uint64 `json:"id"`
	KeyARN string `json:"key_arn"`
	// Generation is 1 when attached and grows by one per rotation: a log node that sees
	// it grow seals new chunks under a new key-encryption key.
	Generation uint64 `json:"generation"`
	State      string `json:"state"`
	UpdatedMs  int64  `json:"updated_ms"`
	ShreddedMs int64  `json:"shredded_ms,omitempty"`
	// Dropped lists the log nodes that confirmed, after the shred, that they hold none of
	// the namespace's key material or cached plaintext (sorted).
	Dropped []string `json:"dropped,omitempty"`
}

// Shredded reports whether the key was shredded.
func (k NamespaceKey) Shredded() bool { return k.State == NamespaceKeyShredded }

// CheckKeyARN reports a KMS key name that cannot be one: empty, too long, not UTF-8 or
// holding whitespace or control characters.
func CheckKeyARN(arn string) error {
	switch {
	case arn == "":
		return fmt.Errorf("%w: kms key: empty (want an ARN, key id or alias/NAME)", ErrInvalidArgument)
	case len(arn) > MaxKeyARNLength:
		return fmt.Errorf("%w: kms key: %d bytes, at most %d", ErrInvalidArgument, len(arn), MaxKeyARNLength)
	case !utf8.ValidString(arn) || strings.IndexFunc(arn, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return fmt.Errorf("%w: kms key %q: whitespace or control characters", ErrInvalidArgument, arn)
	}
	return nil
}
