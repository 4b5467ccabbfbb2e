package coord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Bolt is a Store in one bbolt file: the embedded mode's coordination store.
//
// Layout: a root bucket "coord.v1" holds one nested bucket per partition key; in it each
// item is a key (the sort key) whose value is the v1 item encoding (boltcodec.go). Every
// write is one bbolt read-write transaction, so writes are serialized and conditions are
// checked and applied atomically. Expired items stay in the file, invisible, until Sweep.
type Bolt struct {
	db     *bolt.DB
	now    func() time.Time
	closed atomic.Bool
}

var _ Store = (*Bolt)(nil)

var rootBucket = []byte("coord.v1")

// boltOpenTimeout bounds the wait for the file lock another process holds (a variable for
// tests).
var boltOpenTimeout = 5 * time.Second

// NewBolt opens (creating if needed) the bbolt file at path.
func NewBolt(path string, opts ...Option) (*Bolt, error) {
	o := applyOptions(opts)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: boltOpenTimeout})
	if err != nil {
		return nil, fmt.Errorf("coord: open bolt %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(rootBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("coord: open bolt %s: %w", path, err)
	}
	return &Bolt{db: db, now: o.now}, nil
}

// Now is the store's clock.
func (b *Bolt) Now() time.Time { return b.now() }

// Close closes the file.
func (b *Bolt) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("coord: close bolt: %w", err)
	}
	return nil
}

// Path is the bbolt file's path.
func (b *Bolt) Path() string { return b.db.Path() }

func (b *Bolt) begin(ctx context.Context) error {
	if b.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// mapErr turns bbolt's closed-database error into ErrClosed.
func mapErr(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) || errors.Is(err, bolterrors.ErrTxClosed) {
		return ErrClosed
	}
	return err
}

func keyErr(op, pk, sk string, err error) error {
	return fmt.Errorf("coord: %s %s/%s: %w", op, clip(pk), clip(sk), err)
}

// load returns the item with key sk in pb: the decoded item, its expiry (epoch seconds) and
// whether it is live at now. A missing item is (nil, 0, false, nil).
func load(pb *bolt.Bucket, pk, sk string, now time.Time) (*Item, int64, bool, error) {
	if pb == nil {
		return nil, 0, false, nil
	}
	v := pb.Get([]byte(sk))
	if v == nil {
		return nil, 0, false, nil
	}
	it, exp, err := decodeItem(v)
	if err != nil {
		return nil, 0, false, err
	}
	it.PK, it.SK = pk, sk
	if exp != 0 {
		it.ExpiresAt = time.Unix(exp, 0)
	}
	return &it, exp, !expiredAt(exp, now), nil
}

// Put writes item when cond holds.
func (b *Bolt) Put(ctx context.Context, item Item, cond Condition) (Item, error) {
	if err := b.begin(ctx); err != nil {
		return Item{}, keyErr("put", item.PK, item.SK, err)
	}
	if err := checkItem(item); err != nil {
		return Item{}, err
	}
	if err := checkCond(cond, false); err != nil {
		return Item{}, err
	}
	out := cloneItem(item)
	out.ExpiresAt = roundExpiry(item.ExpiresAt)
	var exp int64
	if !out.ExpiresAt.IsZero() {
		exp = out.ExpiresAt.Unix()
	}
	now := b.now()
	err := b.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(rootBucket)
		cur, _, live, err := load(root.Bucket([]byte(item.PK)), item.PK, item.SK, now)
		if err != nil {
			return err
		}
		var curLive *Item
		if live {
			curLive = cur
		}
		if !cond.holds(curLive) {
			return fmt.Errorf("%s: %w", cond, ErrConditionFailed)
		}
		out.Version = newVersion()
		for cur != nil && out.Version == cur.Version {
			out.Version = newVersion()
		}
		pb, err := root.CreateBucketIfNotExists([]byte(item.PK))
		if err != nil {
			return err
		}
		return pb.Put([]byte(item.SK), appendItem(nil, out, exp))
	})
	if err != nil {
		return Item{}, keyErr("put", item.PK, item.SK, mapErr(err))
	}
	return cloneItem(out), nil
}

// Get returns the live item with the key.
func (b *Bolt) Get(ctx context.Context, pk, sk string) (Item, error) {
	if err := b.begin(ctx); err != nil {
		return Item{}, keyErr("get", pk, sk, err)
	}
	if err := checkKey(pk, sk); err != nil {
		return Item{}, err
	}
	now := b.now()
	var out Item
	err := b.db.View(func(tx *bolt.Tx) error {
		cur, _, live, err := load(tx.Bucket(rootBucket).Bucket([]byte(pk)), pk, sk, now)
		if err != nil {
			return err
		}
		if !live {
			return ErrNotFound
		}
		out = *cur
		return nil
	})
	if err != nil {
		return Item{}, keyErr("get", pk, sk, mapErr(err))
	}
	return out, nil
}

// Query calls fn with the live items of pk under skPrefix in sort-key order. Items are read
// queryPage at a time in a read transaction, and fn runs after it ends.
func (b *Bolt) Query(ctx context.Context, pk, skPrefix string, fn func(Item) error) error {
	if err := checkPK(pk); err != nil {
		return err
	}
	prefix := []byte(skPrefix)
	var after []byte // last sort key handed out
	for {
		if err := b.begin(ctx); err != nil {
			return keyErr("query", pk, skPrefix+"*", err)
		}
		now := b.now()
		page := make([]Item, 0, queryPage)
		more := false
		err := b.db.View(func(tx *bolt.Tx) error {
			pb := tx.Bucket(rootBucket).Bucket([]byte(pk))
			if pb == nil {
				return nil
			}
			c := pb.Cursor()
			var k, v []byte
			if after == nil {
				k, v = c.Seek(prefix)
			} else {
				k, v = c.Seek(after)
				if bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				if len(page) == queryPage {
					more = true
					break
				}
				after = append(after[:0], k...)
				it, exp, err := decodeItem(v)
				if err != nil {
					return fmt.Errorf("sort key %s: %w", clip(string(k)), err)
				}
				if expiredAt(exp, now) {
					continue
				}
				it.PK, it.SK = pk, string(k)
				if exp != 0 {
					it.ExpiresAt = time.Unix(exp, 0)
				}
				page = append(page, it)
			}
			return nil
		})
		if err != nil {
			return keyErr("query", pk, skPrefix+"*", mapErr(err))
		}
		for _, it := range page {
			if err := fn(it); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
	}
}

// Delete removes the item with the key when cond holds.
func (b *Bolt) Delete(ctx context.Context, pk, sk string, cond Condition) error {
	if err := b.begin(ctx); err != nil {
		return keyErr("delete", pk, sk, err)
	}
	if err := checkKey(pk, sk); err != nil {
		return err
	}
	if err := checkCond(cond, true); err != nil {
		return err
	}
	now := b.now()
	err := b.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(rootBucket)
		pb := root.Bucket([]byte(pk))
		cur, _, live, err := load(pb, pk, sk, now)
		if err != nil && cond.Version != 0 {
			return err // a corrupt item has no version to match; a plain delete removes it
		}
		if !live {
			cur = nil
		}
		if !cond.holds(cur) {
			return fmt.Errorf("%s: %w", cond, ErrConditionFailed)
		}
		if pb == nil {
			return nil
		}
		if err := pb.Delete([]byte(sk)); err != nil {
			return err
		}
		if k, _ := pb.Cursor().First(); k == nil {
			return root.DeleteBucket([]byte(pk))
		}
		return nil
	})
	if err != nil {
		return keyErr("delete", pk, sk, mapErr(err))
	}
	return nil
}

// Add adds delta to counter name of the item with the key.
func (b *Bolt) Add(ctx context.Context, pk, sk, name string, delta int64) (int64, error) {
	if err := b.begin(ctx); err != nil {
		return 0, keyErr("add", pk, sk, err)
	}
	if err := checkKey(pk, sk); err != nil {
		return 0, err
	}
	if err := checkName(name); err != nil {
		return 0, err
	}
	now := b.now()
	var sum int64
	err := b.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(rootBucket)
		cur, exp, live, err := load(root.Bucket([]byte(pk)), pk, sk, now)
		if err != nil {
			return err
		}
		next := Item{Counters: map[string]int64{name: delta}}
		if live {
			s, ok := addInt64(cur.Counters[name], delta)
			if !ok {
				return fmt.Errorf("counter %q %d%+d overflows int64: %w", name, cur.Counters[name], delta, ErrInvalid)
			}
			next = cloneItem(*cur)
			if next.Counters == nil {
				next.Counters = make(map[string]int64, 1)
			}
			next.Counters[name] = s
		} else {
			exp = 0
		}
		sum = next.Counters[name]
		next.Version = newVersion()
		for cur != nil && next.Version == cur.Version {
			next.Version = newVersion()
		}
		pb, err := root.CreateBucketIfNotExists([]byte(pk))
		if err != nil {
			return err
		}
		return pb.Put([]byte(sk), appendItem(nil, next, exp))
	})
	if err != nil {
		return 0, keyErr("add", pk, sk, mapErr(err))
	}
	return sum, nil
}

// Sweep removes every expired item from the file and returns how many it removed. The
// embedded cluster calls it now and then; callers never need it for correctness, since
// expired items are invisible. Items that do not decode are left in place and reported
// with ErrCorrupt after the sweep has committed.
func (b *Bolt) Sweep(ctx context.Context) (int, error) {
	if err := b.begin(ctx); err != nil {
		return 0, fmt.Errorf("coord: sweep: %w", err)
	}
	now := b.now()
	removed, corrupt := 0, 0
	var firstCorrupt error
	err := b.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(rootBucket)
		var emptied [][]byte
		err := root.ForEachBucket(func(pk []byte) error {
			pb := root.Bucket(pk)
			var dead [][]byte
			live := 0
			err := pb.ForEach(func(k, v []byte) error {
				_, exp, err := decodeItem(v)
				switch {
				case err != nil:
					corrupt++
					live++
					if firstCorrupt == nil {
						firstCorrupt = keyErr("sweep", string(pk), string(k), err)
					}
				case expiredAt(exp, now):
					dead = append(dead, bytes.Clone(k))
				default:
					live++
				}
				return ctx.Err()
			})
			if err != nil {
				return err
			}
			for _, k := range dead {
				if err := pb.Delete(k); err != nil {
					return err
				}
			}
			removed += len(dead)
			if live == 0 {
				emptied = append(emptied, bytes.Clone(pk))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, pk := range emptied {
			if err := root.DeleteBucket(pk); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("coord: sweep: %w", mapErr(err))
	}
	if corrupt > 0 {
		return removed, fmt.Errorf("coord: sweep: %d items do not decode, first: %w", corrupt, firstCorrupt)
	}
	return removed, nil
}

// AddAll adds every delta to its counter of the item in one write transaction.
func (b *Bolt) AddAll(ctx context.Context, pk, sk string, deltas map[string]int64) (map[string]int64, error) {
	if err := b.begin(ctx); err != nil {
		return nil, keyErr("add all", pk, sk, err)
	}
	if err := checkAddAll(pk, sk, deltas); err != nil {
		return nil, err
	}
	now := b.now()
	res := make(map[string]int64, len(deltas))
	err := b.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(rootBucket)
		cur, exp, live, err := load(root.Bucket([]byte(pk)), pk, sk, now)
		if err != nil {
			return err
		}
		next := Item{}
		if live {
			next = cloneItem(*cur)
		} else {
			exp = 0
		}
		if next.Counters == nil {
			next.Counters = make(map[string]int64, len(deltas))
		}
		for name, d := range deltas {
			s, ok := addInt64(next.Counters[name], d)
			if !ok {
				return fmt.Errorf("counter %q %d%+d overflows int64: %w", name, next.Counters[name], d, ErrInvalid)
			}
			next.Counters[name] = s
			res[name] = s
		}
		next.Version = newVersion()
		for cur != nil && next.Version == cur.Version {
			next.Version = newVersion()
		}
		pb, err := root.CreateBucketIfNotExists([]byte(pk))
		if err != nil {
			return err
		}
		return pb.Put([]byte(sk), appendItem(nil, next, exp))
	})
	if err != nil {
		return nil, keyErr("add all", pk, sk, mapErr(err))
	}
	return res, nil
}
