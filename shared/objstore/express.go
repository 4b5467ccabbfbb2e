package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"sort"
	"sync"
	"time"
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Zone is one zonal bucket of an Express bucket: an S3 Express One Zone directory bucket in
// one availability zone, or any Bucket standing for one.
type Zone struct {
	Name   string // the availability zone, e.g. eu-west-1a
	Bucket Bucket
}

// ExpressConfig configures an Express bucket.
type ExpressConfig struct {
	Zones []Zone // exactly three
	// Local is the caller's zone: reads try its bucket first. Empty: the first zone.
	Local string
	// StragglerTimeout bounds the PUT to the third zone after two acknowledged it (it runs
	// in the background, never delaying the answer); default 30 s.
	StragglerTimeout time.Duration
	Logger           *slog.Logger
}

// Express is one Bucket over three zonal buckets, durable once two of them hold an object:
//
//   - Put writes to all three in parallel and succeeds as soon as two succeed; the third
//     finishes (or is abandoned after StragglerTimeout) in the background. With IfAbsent, a
//     zone answering that the key exists counts as a success when the object there is this
//     very body (same size and CRC32C: a retry of our own PUT), and as a conflict otherwise;
//     the Put fails with ErrPreconditionFailed when two zones hold another object. When two
//     zones fail, the Put fails (retriable, unless it was a conflict): an acknowledged object
//     is always in at least two zones.
//   - Get, GetRange and Stat try the local zone, then the others (a zone whose read failed
//     in the last ZoneRetryAfter goes last). NotFound from one zone is
//     not authoritative (its copy may still be on the way): the answer is ErrNotFound only
//     when two zones say so.
//   - Delete deletes from all three and succeeds when two did: a copy left in a zone that
//     was down shows in later listings (List merges the zones) and GC's orphan sweep deletes
//     it then. List merges the three listings and tolerates one zone failing, since every
//     acknowledged object is in two; it holds each zone's listing of prefix in memory.
//   - Concurrent IfAbsent Puts of one key with different bodies can split the zones so that
//     none holds two: all of them fail. WAL and segment keys are unique per writer, so only
//     retries of one writer's own body meet, and those succeed.
//
// Close waits for background PUTs and closes the three buckets.
type Express struct {
	zones    [3]Zone
	order    [3]int // read order: local zone first
	straggle time.Duration
	log      *slog.Logger
	bg       sync.WaitGroup

	mu       sync.Mutex
	inflight map[string]*putting // keys whose PUTs have not all finished

	health zoneHealth // express_health.go
}

// putting is a Put whose three PUTs have not all finished: reads of its key go only to the
// zones that hold this body already, and a Delete waits for done.
type putting struct {
	done  chan struct{}
	holds [3]bool // guarded by Express.mu
}

// NewExpress checks cfg and returns the bucket.
func NewExpress(cfg ExpressConfig) (*Express, error) {
	if len(cfg.Zones) != 3 {
		return nil, fmt.Errorf("objstore: express: %d zones, want 3", len(cfg.Zones))
	}
	e := &Express{straggle: cfg.StragglerTimeout, log: cfg.Logger, inflight: map[string]*putting{}}
	if e.straggle <= 0 {
		e.straggle = 30 * time.Second
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	seen := map[string]bool{}
	local := 0
	for i, z := range cfg.Zones {
		if z.Name == "" || z.Bucket == nil {
			return nil, fmt.Errorf("objstore: express: zone %d needs a name and a bucket", i)
		}
		if seen[z.Name] {
			return nil, fmt.Errorf("objstore: express: zone %s named twice", z.Name)
		}
		seen[z.Name] = true
		e.zones[i] = z
		if z.Name == cfg.Local {
			local = i
		}
	}
	if cfg.Local != "" && !seen[cfg.Local] {
		return nil, fmt.Errorf("objstore: express: local zone %q is none of the three", cfg.Local)
	}
	e.order = [3]int{local, (local + 1) % 3, (local + 2) % 3}
	return e, nil
}

// Zones answers the three zonal buckets (GC deletes from each; tests kill one).
func (e *Express) Zones() [3]Zone { return e.zones }

type putResult struct {
	zone int
	err  error // nil: the zone holds this body
}

// Put writes body to the three zones and answers once two hold it.
func (e *Express) Put(ctx context.Context, key string, body []byte, opts ...PutOption) error {
	if err := checkKey("put", key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	o := ApplyPut(opts)
	body = bytes.Clone(body) // the stragglers outlive the caller's buffer
	sum := crc32.Checksum(body, crc32c)
	results := make(chan putResult, 3)
	// The PUTs run on their own context so the third is not cut off when the caller
	// returns; the caller's cancellation only ends the wait.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.straggle)
	// A Delete of key waits for these PUTs, so a straggler cannot bring back an object that
	// was deleted after the Put answered.
	cur := &putting{done: make(chan struct{})}
	e.mu.Lock()
	prev := e.inflight[key]
	e.mu.Unlock()
	if prev != nil {
		<-prev.done // an earlier Put of the key still has a straggler: it lands first
	}
	e.mu.Lock()
	e.inflight[key] = cur
	e.mu.Unlock()
	var wg sync.WaitGroup
	for i := range e.zones {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.zones[i].Bucket.Put(bctx, key, body, opts...)
			if o.IfAbsent && errors.Is(err, ErrPreconditionFailed) && e.ours(bctx, i, key, len(body), sum) {
				err = nil // our own earlier PUT of this body
			}
			if err == nil {
				e.mu.Lock()
				cur.holds[i] = true
				e.mu.Unlock()
			}
			results <- putResult{i, err}
		}()
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		wg.Wait()
		cancel()
		e.mu.Lock()
		if e.inflight[key] == cur {
			delete(e.inflight, key)
		}
		e.mu.Unlock()
		close(cur.done)
	}()
	var ok, conflicts int
	var errs []error
	for range 3 {
		select {
		case r := <-results:
			switch {
			case r.err == nil:
				ok++
			case errors.Is(r.err, ErrPreconditionFailed):
				conflicts++
				errs = append(errs, fmt.Errorf("zone %s: %w", e.zones[r.zone].Name, r.err))
			default:
				errs = append(errs, fmt.Errorf("zone %s: %w", e.zones[r.zone].Name, r.err))
			}
		case <-ctx.Done():
			return fmt.Errorf("objstore: put %s: %w (%d of 3 zones hold it so far)", key, ctx.Err(), ok)
		}
		if ok == 2 {
			return nil
		}
		if len(errs) >= 2 {
			err := errors.Join(errs...)
			if conflicts >= 2 {
				return fmt.Errorf("objstore: put %s: %w: %v", key, ErrPreconditionFailed, err)
			}
			return fmt.Errorf("objstore: put %s: %d of 3 zones failed: %w", key, len(errs), err)
		}
	}
	return fmt.Errorf("objstore: put %s: no quorum", key) // unreachable: 3 results decide
}

// ours reports whether zone i holds exactly a body of this size and checksum under key.
func (e *Express) ours(ctx context.Context, i int, key string, size int, sum uint32) bool {
	got, err := e.zones[i].Bucket.Get(ctx, key)
	return err == nil && len(got) == size && crc32.Checksum(got, crc32c) == sum
}

// read tries fn on the zones in read order; NotFound is the answer only when two zones
// answer it.
func read[T any](e *Express, ctx context.Context, op, key string, fn func(Bucket) (T, error)) (T, error) {
	var zero T
	if err := checkKey(op, key); err != nil {
		return zero, err
	}
	var errs []error
	notFound := 0
	// Once this process's Put of key has been acknowledged (two zones hold its body) but its
	// third PUT is still running, only the zones holding the body answer for it: the third
	// may still hold an older one. Before that, the key reads as it did before the Put.
	e.mu.Lock()
	var holds [3]bool
	only := false
	if p := e.inflight[key]; p != nil {
		holds = p.holds
		only = btoi(holds[0])+btoi(holds[1])+btoi(holds[2]) >= 2
	}
	e.mu.Unlock()
	for _, i := range e.readOrder() {
		if only && !holds[i] {
			continue
		}
		v, err := fn(e.zones[i].Bucket)
		switch {
		case err == nil:
			e.readOK(i)
			return v, nil
		case errors.Is(err, ErrNotFound):
			e.readOK(i)
			notFound++
			if notFound == 2 {
				return zero, fmt.Errorf("objstore: %s %s: %w", op, key, ErrNotFound)
			}
		case errors.Is(err, ErrInvalidRange), ctx.Err() != nil:
			return zero, err // the same in every zone, or the caller gave up
		default:
			e.readFailed(i)
			errs = append(errs, fmt.Errorf("zone %s: %w", e.zones[i].Name, err))
		}
	}
	return zero, fmt.Errorf("objstore: %s %s: no zone answered: %w", op, key, errors.Join(errs...))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (e *Express) Get(ctx context.Context, key string) ([]byte, error) {
	return read(e, ctx, "get", key, func(b Bucket) ([]byte, error) { return b.Get(ctx, key) })
}

func (e *Express) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return read(e, ctx, "get range", key, func(b Bucket) ([]byte, error) { return b.GetRange(ctx, key, off, n) })
}

func (e *Express) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	return read(e, ctx, "stat", key, func(b Bucket) (ObjectInfo, error) { return b.Stat(ctx, key) })
}

// Delete deletes key from every zone.
func (e *Express) Delete(ctx context.Context, key string) error {
	if err := checkKey("delete", key); err != nil {
		return err
	}
	e.mu.Lock()
	pending := e.inflight[key]
	e.mu.Unlock()
	if pending != nil {
		select {
		case <-pending.done:
		case <-ctx.Done():
			return fmt.Errorf("objstore: delete %s: waiting for its PUTs in flight: %w", key, ctx.Err())
		}
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range e.zones {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.zones[i].Bucket.Delete(ctx, key); err != nil {
				errs[i] = fmt.Errorf("zone %s: %w", e.zones[i].Name, err)
			}
		}()
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed >= 2 {
		return fmt.Errorf("objstore: delete %s: %w", key, errors.Join(errs...))
	}
	if failed == 1 {
		e.log.Warn("express delete: one zone failed; the orphan sweep deletes its copy later", "key", key, "err", errors.Join(errs...))
	}
	return nil
}

// List merges the zones' listings in key order, each key once.
func (e *Express) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	lists := make([][]ObjectInfo, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range e.zones {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.zones[i].Bucket.List(ctx, prefix, func(o ObjectInfo) error {
				lists[i] = append(lists[i], o)
				return nil
			})
		}()
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			errs[i] = fmt.Errorf("zone %s: %w", e.zones[i].Name, err)
			lists[i] = nil
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: list %s: %w", prefix, err)
	}
	if failed >= 2 {
		return fmt.Errorf("objstore: list %s: %w", prefix, errors.Join(errs...))
	}
	if failed == 1 {
		e.log.Warn("express list: one zone failed; listing the other two", "prefix", prefix, "err", errors.Join(errs...))
	}
	var all []ObjectInfo
	for _, l := range lists {
		all = append(all, l...)
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].Key < all[b].Key })
	for i, o := range all {
		if i > 0 && all[i-1].Key == o.Key {
			continue
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Close waits for background PUTs (at most StragglerTimeout) and closes the zones.
func (e *Express) Close() error {
	e.bg.Wait()
	var errs []error
	for _, z := range e.zones {
		if err := z.Bucket.Close(); err != nil {
			errs = append(errs, fmt.Errorf("zone %s: %w", z.Name, err))
		}
	}
	return errors.Join(errs...)
}
