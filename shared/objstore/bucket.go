package objstore

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors every implementation returns (wrapped with the operation and key).
var (
	ErrNotFound           = errors.New("objstore: object not found")
	ErrPreconditionFailed = errors.New("objstore: precondition failed")
	ErrInvalidRange       = errors.New("objstore: invalid range")
	ErrInvalidKey         = errors.New("objstore: invalid key")
)

// Bucket is a flat byte store, read-after-write consistent.
//
// Keys are non-empty UTF-8 strings of '/'-separated parts without empty, "." or ".."
// parts. Put replaces an object atomically: a reader sees the old or the new body, never
// a part. Put with IfAbsent fails with ErrPreconditionFailed when the key exists
// (S3 If-None-Match: *); of many concurrent IfAbsent Puts of one key exactly one wins.
// GetRange returns n bytes from off; n < 0 reads to the end; a range past the end is cut
// at the end, and off beyond the size fails with ErrInvalidRange (so does off < 0; off ==
// size, and n == 0 with off <= size, read nothing and succeed). Get, GetRange and Stat of
// a missing key fail with ErrNotFound. List returns the objects under prefix in
// lexicographic (byte) key order; an error from fn stops it and is returned as is. Delete
// of a missing key succeeds. Invalid keys fail with ErrInvalidKey. Put does not keep body
// once it has returned, so the caller may reuse it.
type Bucket interface {
	Put(ctx context.Context, key string, body []byte, opts ...PutOption) error
	Get(ctx context.Context, key string) ([]byte, error)
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	Delete(ctx context.Context, key string) error
	Close() error
}

// ObjectInfo describes one object.
type ObjectInfo struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// PutOption adjusts one Put.
type PutOption func(*PutOptions)

// PutOptions are the options a Put was given; implementations read them with ApplyPut.
type PutOptions struct {
	IfAbsent bool
	// SSEKMSKeyID: server-side encryption with this KMS key (SSEKMS, sse.go).
	SSEKMSKeyID string
}

// IfAbsent makes Put fail with ErrPreconditionFailed when the key exists.
func IfAbsent() PutOption { return func(o *PutOptions) { o.IfAbsent = true } }

// ApplyPut folds opts into PutOptions.
func ApplyPut(opts []PutOption) PutOptions {
	var o PutOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}
