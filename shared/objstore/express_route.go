package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ExpressPrefix is where the express class keeps its WAL objects: wal/express/<node>/<ulid>.wal,
// on the express bucket (three zonal buckets) instead of the cluster's bucket.
const ExpressPrefix = "wal/express/"

// Routed is one Bucket over the cluster's bucket and the express class's bucket: keys under
// ExpressPrefix go to Express, every other key to Base. Everything that reads or deletes WAL
// objects by key (the node's read path, the segmenter, gc) takes a Routed bucket and so
// serves both classes without knowing where either lives.
//
// List of a prefix that covers ExpressPrefix (e.g. "wal/" or "") merges the two listings in
// key order; it holds the express listing in memory, as Express.List holds each zone's: the
// express objects not yet deleted, at most one per busy node per 5 ms flush for the express
// age plus GC's express grace (about 12,000 per node with its 1-minute default, some 1.2 MB). Base keys
// under ExpressPrefix, if any, are not listed. Close closes both.
type Routed struct {
	Base    Bucket
	Express Bucket
}

// NewRouted returns the Bucket that sends express WAL keys to express and the rest to base.
func NewRouted(base, express Bucket) (*Routed, error) {
	if base == nil || express == nil {
		return nil, errors.New("objstore: routed: needs a base bucket and an express bucket")
	}
	return &Routed{Base: base, Express: express}, nil
}

// IsExpressKey reports whether key lives on the express bucket.
func IsExpressKey(key string) bool { return strings.HasPrefix(key, ExpressPrefix) }

func (r *Routed) pick(key string) Bucket {
	if IsExpressKey(key) {
		return r.Express
	}
	return r.Base
}

func (r *Routed) Put(ctx context.Context, key string, body []byte, opts ...PutOption) error {
	return r.pick(key).Put(ctx, key, body, opts...)
}

func (r *Routed) Get(ctx context.Context, key string) ([]byte, error) {
	return r.pick(key).Get(ctx, key)
}

func (r *Routed) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return r.pick(key).GetRange(ctx, key, off, n)
}

func (r *Routed) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	return r.pick(key).Stat(ctx, key)
}

func (r *Routed) Delete(ctx context.Context, key string) error {
	return r.pick(key).Delete(ctx, key)
}

// List lists prefix on the bucket that holds it, or on both, merged, when it covers both.
func (r *Routed) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	switch {
	case IsExpressKey(prefix):
		return r.Express.List(ctx, prefix, fn)
	case !strings.HasPrefix(ExpressPrefix, prefix):
		return r.Base.List(ctx, prefix, fn)
	}
	var exp []ObjectInfo
	if err := r.Express.List(ctx, ExpressPrefix, func(o ObjectInfo) error {
		exp = append(exp, o)
		return nil
	}); err != nil {
		return fmt.Errorf("objstore: list %q (express bucket): %w", prefix, err)
	}
	err := r.Base.List(ctx, prefix, func(o ObjectInfo) error {
		if IsExpressKey(o.Key) {
			return nil // the express bucket's listing is authoritative there
		}
		for len(exp) > 0 && exp[0].Key < o.Key {
			if err := fn(exp[0]); err != nil {
				return err
			}
			exp = exp[1:]
		}
		return fn(o)
	})
	if err != nil {
		return err
	}
	for _, o := range exp {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Close closes both buckets.
func (r *Routed) Close() error {
	return errors.Join(r.Base.Close(), r.Express.Close())
}
