package coord

import (
	"context"
	"sync/atomic"
	"time"
)

// Counting wraps a Store and counts its requests as DynamoDB bills them: every Put, Delete,
// Add and AddAll is one write request, every Get one read request, and a Query one read
// request per item it returns (at least one). `loam cost` and the benchmarks use it.
type Counting struct {
	Store
	writes, reads atomic.Int64
}

// NewCounting counts the requests made to s.
func NewCounting(s Store) *Counting { return &Counting{Store: s} }

// Counts answers the write and read requests made so far.
func (c *Counting) Counts() (writes, reads int64) { return c.writes.Load(), c.reads.Load() }

func (c *Counting) Put(ctx context.Context, item Item, cond Condition) (Item, error) {
	c.writes.Add(1)
	return c.Store.Put(ctx, item, cond)
}

func (c *Counting) Get(ctx context.Context, pk, sk string) (Item, error) {
	c.reads.Add(1)
	return c.Store.Get(ctx, pk, sk)
}

func (c *Counting) Query(ctx context.Context, pk, skPrefix string, fn func(Item) error) error {
	n := int64(0)
	err := c.Store.Query(ctx, pk, skPrefix, func(it Item) error {
		n++
		return fn(it)
	})
	c.reads.Add(max(n, 1))
	return err
}

func (c *Counting) Delete(ctx context.Context, pk, sk string, cond Condition) error {
	c.writes.Add(1)
	return c.Store.Delete(ctx, pk, sk, cond)
}

func (c *Counting) Add(ctx context.Context, pk, sk, name string, delta int64) (int64, error) {
	c.writes.Add(1)
	return c.Store.Add(ctx, pk, sk, name, delta)
}

func (c *Counting) AddAll(ctx context.Context, pk, sk string, deltas map[string]int64) (map[string]int64, error) {
	c.writes.Add(1)
	return c.Store.AddAll(ctx, pk, sk, deltas)
}

// Now is the wrapped store's clock.
func (c *Counting) Now() time.Time { return c.Store.Now() }
