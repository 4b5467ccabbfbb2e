package metafake

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/shared/meta"
)

// LookupKeyByID finds a key by id.
func (f *Meta) LookupKeyByID(ctx context.Context, id string) (meta.APIKey, error) {
	ks := f.keys()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if k, ok := ks.byID[id]; ok {
		return k, nil
	}
	return meta.APIKey{}, fmt.Errorf("metafake: %w", meta.ErrKeyNotFound)
}
