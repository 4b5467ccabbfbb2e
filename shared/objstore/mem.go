package objstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Mem is an in-memory Bucket, safe for concurrent use. It copies bodies on Put and Get, so
// callers may reuse their buffers. It is a product, not a test double: unit tests of other
// packages and the latency benchmarks run on it.
type Mem struct {
	mu      sync.RWMutex
	objects map[string]memObject
	now     func() time.Time
}

type memObject struct {
	body    []byte
	modTime time.Time
}

var _ Bucket = (*Mem)(nil)

// NewMem returns an empty in-memory bucket.
func NewMem() *Mem {
	return &Mem{objects: make(map[string]memObject), now: time.Now}
}

// Put stores a copy of body under key.
func (m *Mem) Put(ctx context.Context, key string, body []byte, opts ...PutOption) error {
	if err := checkKey("put", key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	o := ApplyPut(opts)
	obj := memObject{body: slices.Clone(body), modTime: m.now()}
	if obj.body == nil {
		obj.body = []byte{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; ok && o.IfAbsent {
		return fmt.Errorf("objstore: put %s: %w", key, ErrPreconditionFailed)
	}
	m.objects[key] = obj
	return nil
}

// Get returns a copy of the body stored under key.
func (m *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	return m.read(ctx, "get", key, 0, -1)
}

// GetRange returns a copy of n bytes from off of the body under key (see Bucket).
func (m *Mem) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return m.read(ctx, "get range", key, off, n)
}

func (m *Mem) read(ctx context.Context, op, key string, off, n int64) ([]byte, error) {
	obj, err := m.lookup(ctx, op, key)
	if err != nil {
		return nil, err
	}
	lo, hi, err := rangeBounds(key, int64(len(obj.body)), off, n)
	if err != nil {
		return nil, err
	}
	return slices.Clone(obj.body[lo:hi:hi]), nil
}

// Stat describes the object under key.
func (m *Mem) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	obj, err := m.lookup(ctx, "stat", key)
	if err != nil {
		return ObjectInfo{}, err
	}
	return ObjectInfo{Key: key, Size: int64(len(obj.body)), LastModified: obj.modTime}, nil
}

func (m *Mem) lookup(ctx context.Context, op, key string) (memObject, error) {
	if err := checkKey(op, key); err != nil {
		return memObject{}, err
	}
	if err := ctx.Err(); err != nil {
		return memObject{}, fmt.Errorf("objstore: %s %s: %w", op, key, err)
	}
	m.mu.RLock()
	obj, ok := m.objects[key]
	m.mu.RUnlock()
	if !ok {
		return memObject{}, fmt.Errorf("objstore: %s %s: %w", op, key, ErrNotFound)
	}
	return obj, nil
}

// List calls fn for each object under prefix in key order. It works on a snapshot taken
// when it starts, so fn may call the bucket. An error from fn stops the listing and is
// returned as is.
func (m *Mem) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: list %s: %w", prefix, err)
	}
	m.mu.RLock()
	infos := make([]ObjectInfo, 0, 16)
	for k, obj := range m.objects {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, ObjectInfo{Key: k, Size: int64(len(obj.body)), LastModified: obj.modTime})
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(infos, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	for _, info := range infos {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("objstore: list %s: %w", prefix, err)
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the object under key; a missing key is not an error.
func (m *Mem) Delete(ctx context.Context, key string) error {
	if err := checkKey("delete", key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	m.mu.Lock()
	delete(m.objects, key)
	m.mu.Unlock()
	return nil
}

// Close does nothing; a Mem bucket stays usable.
func (m *Mem) Close() error { return nil }
