package metafake

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/loamhq/loam/shared/meta"
)

// keys holds the API keys of a Meta (its one namespace, and admin keys), by id.
type keys struct {
	mu   sync.Mutex
	byID map[string]meta.APIKey
}

func (f *Meta) keys() *keys {
	f.apiKeys.mu.Lock()
	if f.apiKeys.byID == nil {
		f.apiKeys.byID = map[string]meta.APIKey{}
	}
	f.apiKeys.mu.Unlock()
	return &f.apiKeys
}

// DeleteNamespace refuses: the fake has only the default namespace, which cannot be deleted.
func (f *Meta) DeleteNamespace(ctx context.Context, name string) error {
	if name == meta.DefaultNS {
		return fmt.Errorf("metafake: delete namespace %s: %w: the default namespace cannot be deleted", name, meta.ErrInvalidArgument)
	}
	return fmt.Errorf("metafake: namespace %q: %w", name, meta.ErrNamespaceNotFound)
}

// CreateKey stores a key of the default namespace or an admin key, with the sequencer's rules.
func (f *Meta) CreateKey(ctx context.Context, k meta.APIKey) (meta.APIKey, error) {
	if err := meta.CheckKey(k); err != nil {
		return meta.APIKey{}, err
	}
	if !k.Admin && k.Namespace != meta.DefaultNS {
		return meta.APIKey{}, fmt.Errorf("metafake: namespace %q: %w", k.Namespace, meta.ErrNamespaceNotFound)
	}
	ks := f.keys()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if old, ok := ks.byID[k.ID]; ok {
		if bytes.Equal(old.Hash, k.Hash) && old.Admin == k.Admin && old.Namespace == k.Namespace && !old.Revoked() {
			return old, nil
		}
		return meta.APIKey{}, fmt.Errorf("metafake: key %s: %w", k.ID, meta.ErrKeyExists)
	}
	for _, o := range ks.byID {
		if bytes.Equal(o.Hash, k.Hash) {
			return meta.APIKey{}, fmt.Errorf("metafake: key %s: %w", k.ID, meta.ErrKeyExists)
		}
	}
	k.CreatedMs, k.RevokedMs = f.Now().UnixMilli(), 0
	ks.byID[k.ID] = k
	return k, nil
}

// ListKeys lists the keys by id, hashes left out.
func (f *Meta) ListKeys(ctx context.Context) ([]meta.APIKey, error) {
	ks := f.keys()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	out := make([]meta.APIKey, 0, len(ks.byID))
	for _, k := range ks.byID {
		k.Hash = nil
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// RevokeKey revokes a key.
func (f *Meta) RevokeKey(ctx context.Context, id string) error {
	ks := f.keys()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	k, ok := ks.byID[id]
	if !ok {
		return fmt.Errorf("metafake: key %q: %w", id, meta.ErrKeyNotFound)
	}
	if !k.Revoked() {
		k.RevokedMs = f.Now().UnixMilli()
		ks.byID[id] = k
	}
	return nil
}

// LookupKey finds a key by hash.
func (f *Meta) LookupKey(ctx context.Context, hash []byte) (meta.APIKey, error) {
	ks := f.keys()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for _, k := range ks.byID {
		if bytes.Equal(k.Hash, hash) {
			return k, nil
		}
	}
	return meta.APIKey{}, fmt.Errorf("metafake: %w", meta.ErrKeyNotFound)
}
