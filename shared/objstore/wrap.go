package objstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// WithLatency wraps b so that every write (Put, Delete) first waits putDelay and every
// read (Get, GetRange, Stat, List) first waits getDelay, or until ctx ends. Benchmarks use
// it on a Mem bucket to model S3 latency without an fsync-bound disk.
func WithLatency(b Bucket, putDelay, getDelay time.Duration) Bucket {
	return &latencyBucket{b: b, put: putDelay, get: getDelay}
}

type latencyBucket struct {
	b        Bucket
	put, get time.Duration
}

func wait(ctx context.Context, d time.Duration, op, key string) error {
	if d <= 0 {
		return nil
	}
	if err := sleepCtx(ctx, d); err != nil {
		return fmt.Errorf("objstore: %s %s: %w", op, key, err)
	}
	return nil
}

func (l *latencyBucket) Put(ctx context.Context, key string, body []byte, opts ...PutOption) error {
	if err := wait(ctx, l.put, "put", key); err != nil {
		return err
	}
	return l.b.Put(ctx, key, body, opts...)
}

func (l *latencyBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := wait(ctx, l.get, "get", key); err != nil {
		return nil, err
	}
	return l.b.Get(ctx, key)
}

func (l *latencyBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := wait(ctx, l.get, "get range", key); err != nil {
		return nil, err
	}
	return l.b.GetRange(ctx, key, off, n)
}

func (l *latencyBucket) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := wait(ctx, l.get, "stat", key); err != nil {
		return ObjectInfo{}, err
	}
	return l.b.Stat(ctx, key)
}

func (l *latencyBucket) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := wait(ctx, l.get, "list", prefix); err != nil {
		return err
	}
	return l.b.List(ctx, prefix, fn)
}

func (l *latencyBucket) Delete(ctx context.Context, key string) error {
	if err := wait(ctx, l.put, "delete", key); err != nil {
		return err
	}
	return l.b.Delete(ctx, key)
}

func (l *latencyBucket) Close() error { return l.b.Close() }

// Stats counts the calls a CountingBucket has seen, failed ones included. Bytes count
// bodies: PutBytes those given to Put, GetBytes those returned by Get and GetRange.
type Stats struct {
	Puts, Gets, GetRanges, Stats, Lists, Deletes int64
	Listed                                       int64 // objects passed to List callbacks
	PutBytes, GetBytes                           int64
}

// Sub returns s - o, the calls made between two snapshots.
func (s Stats) Sub(o Stats) Stats {
	return Stats{
		Puts: s.Puts - o.Puts, Gets: s.Gets - o.Gets, GetRanges: s.GetRanges - o.GetRanges,
		Stats: s.Stats - o.Stats, Lists: s.Lists - o.Lists, Deletes: s.Deletes - o.Deletes,
		Listed: s.Listed - o.Listed, PutBytes: s.PutBytes - o.PutBytes, GetBytes: s.GetBytes - o.GetBytes,
	}
}

// CountingBucket is a Bucket that counts the calls made through it; safe for concurrent
// use.
type CountingBucket struct {
	b                                            Bucket
	puts, gets, getRanges, stats, lists, deletes atomic.Int64
	listed, putBytes, getBytes                   atomic.Int64
}

var _ Bucket = (*CountingBucket)(nil)

// Counting wraps b in a CountingBucket.
func Counting(b Bucket) *CountingBucket { return &CountingBucket{b: b} }

// Stats returns the counts so far.
func (c *CountingBucket) Stats() Stats {
	return Stats{
		Puts: c.puts.Load(), Gets: c.gets.Load(), GetRanges: c.getRanges.Load(),
		Stats: c.stats.Load(), Lists: c.lists.Load(), Deletes: c.deletes.Load(),
		Listed: c.listed.Load(), PutBytes: c.putBytes.Load(), GetBytes: c.getBytes.Load(),
	}
}

func (c *CountingBucket) Put(ctx context.Context, key string, body []byte, opts ...PutOption) error {
	c.puts.Add(1)
	c.putBytes.Add(int64(len(body)))
	return c.b.Put(ctx, key, body, opts...)
}

func (c *CountingBucket) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets.Add(1)
	body, err := c.b.Get(ctx, key)
	c.getBytes.Add(int64(len(body)))
	return body, err
}

func (c *CountingBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.getRanges.Add(1)
	body, err := c.b.GetRange(ctx, key, off, n)
	c.getBytes.Add(int64(len(body)))
	return body, err
}

func (c *CountingBucket) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	c.stats.Add(1)
	return c.b.Stat(ctx, key)
}

func (c *CountingBucket) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	c.lists.Add(1)
	return c.b.List(ctx, prefix, func(info ObjectInfo) error {
		c.listed.Add(1)
		return fn(info)
	})
}

func (c *CountingBucket) Delete(ctx context.Context, key string) error {
	c.deletes.Add(1)
	return c.b.Delete(ctx, key)
}

func (c *CountingBucket) Close() error { return c.b.Close() }
