package metafake

import (
	"context"
	"fmt"
	"slices"

	"github.com/loamhq/loam/shared/meta"
)

// Namespace keys, in memory, with the sequencer's rules (sequencer-svc/fsm/nskeys.go). The
// fake has no namespace list, so every valid name is taken to exist.

func (f *Meta) nsKeyLocked(ns, what string) (meta.NamespaceKey, error) {
	k, ok := f.nsKeys[ns]
	if !ok {
		return meta.NamespaceKey{}, fmt.Errorf("%w: %s the key of namespace %s: the namespace has no key", meta.ErrInvalidArgument, what, ns)
	}
	return k, nil
}

func (f *Meta) nowMs() int64 { return f.Now().UnixMilli() }

// AttachNamespaceKey gives ns the KMS key keyARN.
func (f *Meta) AttachNamespaceKey(ctx context.Context, ns, keyARN string) (meta.NamespaceKey, error) {
	if err := meta.CheckKeyARN(keyARN); err != nil {
		return meta.NamespaceKey{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nsKeys == nil {
		f.nsKeys = map[string]meta.NamespaceKey{}
	}
	if k, ok := f.nsKeys[ns]; ok {
		switch {
		case k.Shredded():
			return meta.NamespaceKey{}, fmt.Errorf("%w: namespace %s: its key was shredded; create a new namespace", meta.ErrInvalidArgument, ns)
		case k.KeyARN != keyARN:
			return meta.NamespaceKey{}, fmt.Errorf("%w: namespace %s already has a key (%s); rotate it to move to another", meta.ErrInvalidArgument, ns, k.KeyARN)
		}
		return k, nil
	}
	var id uint64
	for _, k := range f.nsKeys {
		id = max(id, k.ID)
	}
	k := meta.NamespaceKey{Namespace: ns, ID: id + 1, KeyARN: keyARN, Generation: 1, State: meta.NamespaceKeyActive, UpdatedMs: f.nowMs()}
	f.nsKeys[ns] = k
	return k, nil
}

// RotateNamespaceKey starts ns's next key generation.
func (f *Meta) RotateNamespaceKey(ctx context.Context, ns, keyARN string) (meta.NamespaceKey, error) {
	if keyARN != "" {
		if err := meta.CheckKeyARN(keyARN); err != nil {
			return meta.NamespaceKey{}, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k, err := f.nsKeyLocked(ns, "rotate")
	if err != nil {
		return k, err
	}
	if k.Shredded() {
		return meta.NamespaceKey{}, fmt.Errorf("%w: rotate the key of namespace %s: it was shredded", meta.ErrInvalidArgument, ns)
	}
	if keyARN != "" {
		k.KeyARN = keyARN
	}
	k.Generation++
	k.UpdatedMs = f.nowMs()
	f.nsKeys[ns] = k
	return k, nil
}

// ShredNamespaceKey records that ns's key was shredded.
func (f *Meta) ShredNamespaceKey(ctx context.Context, ns string) (meta.NamespaceKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, err := f.nsKeyLocked(ns, "shred")
	if err != nil || k.Shredded() {
		return k, err
	}
	k.State, k.ShreddedMs, k.UpdatedMs = meta.NamespaceKeyShredded, f.nowMs(), f.nowMs()
	f.nsKeys[ns] = k
	return k, nil
}

// AckNamespaceShred records node's confirmation of ns's shred.
func (f *Meta) AckNamespaceShred(ctx context.Context, ns, node string) (meta.NamespaceKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, err := f.nsKeyLocked(ns, "confirm the shred")
	switch {
	case err != nil:
		return k, err
	case !k.Shredded():
		return meta.NamespaceKey{}, fmt.Errorf("%w: confirm the shred of namespace %s: its key is not shredded", meta.ErrInvalidArgument, ns)
	case node == "":
		return meta.NamespaceKey{}, fmt.Errorf("%w: confirm the shred of namespace %s: empty node id", meta.ErrInvalidArgument, ns)
	}
	i, found := slices.BinarySearch(k.Dropped, node)
	if !found {
		k.Dropped = slices.Insert(slices.Clone(k.Dropped), i, node)
		k.UpdatedMs = f.nowMs()
		f.nsKeys[ns] = k
	}
	return k, nil
}

// ListNamespaceKeys lists every namespace key by namespace name.
func (f *Meta) ListNamespaceKeys(ctx context.Context) ([]meta.NamespaceKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]meta.NamespaceKey, 0, len(f.nsKeys))
	for _, k := range f.nsKeys {
		k.Dropped = slices.Clone(k.Dropped)
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b meta.NamespaceKey) int {
		switch {
		case a.Namespace < b.Namespace:
			return -1
		case a.Namespace > b.Namespace:
			return 1
		}
		return 0
	})
	return out, nil
}
