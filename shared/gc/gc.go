// Package gc is the GC function's handler: it deletes bucket objects the
// sequencer retired, once a grace period has passed, and objects nothing ever referenced.
//
// # Basics
//
// The sequencer counts the index entries that point at each object; an object whose count
// drops to zero (its WAL chunks were segmented, its segment trimmed by retention or
// rewritten by compaction, its stream deleted) enters the sequencer's retired set with the
// time it left. Run, the scheduled sweep, then:
//
//  1. Lists the retired set (ListRetired) and schedules each object in the coordination
//     store's GC schedule (coord.GCSchedule) for retirement time + Grace. Scheduling is
//     idempotent: the same object and time is the same schedule item.
//  2. Takes the due schedule items in time order, asks the sequencer once more whether
//     each object is referenced (Referenced), deletes those that are not from the bucket,
//     then tells the sequencer (ForgetRetired) and removes the schedule items. A referenced
//     object is never deleted: its item is dropped.
//  3. At most every OrphanInterval (judged by the sweep clock in the coordination store,
//     coord.Orphans, so a cold start does not sweep again early), lists wal/, seg/ and ns/ for
//     orphans: objects older than OrphanAge that are neither referenced nor retired, the
//     WAL object of a flush whose commit never happened, the segment of a segmenter that
//     died before its swap. OrphanAge (default: the writer budget, 60 s, plus the
//     segmenter's lease TTL) is past any moment at which such an object could still become
//     referenced. An orphan is recorded in the orphan clock with the time it was first
//     found; a later sweep deletes it once it has stayed an orphan for Grace. One found
//     referenced or retired meanwhile is forgotten (a retired object waits out its grace
//     in the schedule, step 1, however old it is).
//
// Grace lets fetches that resolved an entry before the swap or trim finish their range
// GETs. Every step can be interrupted and rerun: deleting twice is harmless and the schedule
// item goes only after its object.
//
// # Caveats
//
//   - The orphan sweep lists the whole of wal/, seg/ and ns/ (one LIST per 1000 objects) once per
//     OrphanInterval (default 1 h), whichever invocation runs it: the interval is kept in
//     the coordination store. The bucket interface has no start-after, so a sweep cannot
//     resume a listing; it is not made incremental.
//   - A sweep is claimed when it starts: one that fails is tried again an OrphanInterval
//     later.
//   - The orphan clock holds at most MaxOrphans new records per sweep, each kept for
//     Grace + 2 x OrphanInterval: at most MaxOrphans x (2 + Grace/OrphanInterval) records
//     (30,000 with the defaults), and a sweep holds them in memory. Orphans past the cap
//     are recorded by a later sweep. A record that expires before its object is deleted
//     (sweeps stopped for longer than its keep) restarts that object's clock.
//   - Clocks: retirement times are on the sequencer's clock, due times are judged by this
//     process's; skew shifts deletion by the skew, which Grace must exceed.
package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/notify"
	"github.com/loamhq/loam/shared/objstore"
)

// Defaults of Config.
const (
	DefaultGrace          = 10 * time.Minute
	DefaultOrphanInterval = time.Hour
	DefaultMaxOrphans     = 10000
	// SegmenterLeaseTTL is the longest a segmenter's object can wait for its swap (the
	// segmenter's default lease TTL); OrphanAge's default adds it to the writer budget.
	SegmenterLeaseTTL = 2 * time.Minute
	listPage          = 1000
	batch             = 100
)

// ErrConfig: the configuration cannot work.
var ErrConfig = errors.New("gc: invalid config")

// Meta is what GC needs from the sequencer (a subset of meta.Client).
type Meta interface {
	ListRetired(ctx context.Context, after string, limit int) ([]meta.RetiredObject, error)
	ForgetRetired(ctx context.Context, keys []string) error
	Referenced(ctx context.Context, keys []string) ([]bool, error)
}

// Config configures a GC.
type Config struct {
	Bucket objstore.Bucket // required
	Meta   Meta            // required
	Coord  coord.Store     // required: the GC schedule
	Grace  time.Duration   // default 10 min
	// ExpressGrace is Grace for express WAL objects (wal/express/, three zonal copies, about
	// 200 per busy node-second): default DefaultExpressGrace, never more than Grace.
	ExpressGrace time.Duration
	// OrphanAge: unreferenced, unretired objects older than this are orphans, deleted once
	// they stayed orphans for Grace. Default meta.WriterBudget + SegmenterLeaseTTL. It must
	// exceed the writers' budget and the segmenters' lease TTL.
	OrphanAge time.Duration
	// OrphanInterval: the orphan sweep runs at most this often (across invocations and
	// processes sharing Coord); negative: never. Default 1 h.
	OrphanInterval time.Duration
	// MaxOrphans bounds the orphans one sweep records in the orphan clock. Default 10000.
	MaxOrphans int
	Prefixes   []string // where orphans are looked for; default wal/, seg/ and ns/ (keyed namespaces' segments)
	Now        func() time.Time
	Logger     *slog.Logger
}

// GC deletes retired and orphaned objects. Safe for concurrent use; runs are serialized.
type GC struct {
	cfg     Config
	sched   coord.GCSchedule
	orphans coord.Orphans
	mu      sync.Mutex
}

// New returns a GC.
func New(cfg Config) (*GC, error) {
	switch {
	case cfg.Bucket == nil || cfg.Meta == nil || cfg.Coord == nil:
		return nil, fmt.Errorf("%w: Bucket, Meta and Coord are required", ErrConfig)
	case cfg.Grace < 0 || cfg.OrphanAge < 0 || cfg.MaxOrphans < 0:
		return nil, fmt.Errorf("%w: negative duration", ErrConfig)
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.OrphanAge == 0 {
		cfg.OrphanAge = meta.WriterBudget + SegmenterLeaseTTL
	}
	if cfg.OrphanAge < meta.WriterBudget {
		return nil, fmt.Errorf("%w: OrphanAge %v below the writer budget %v", ErrConfig, cfg.OrphanAge, meta.WriterBudget)
	}
	if cfg.OrphanInterval == 0 {
		cfg.OrphanInterval = DefaultOrphanInterval
	}
	if cfg.MaxOrphans == 0 {
		cfg.MaxOrphans = DefaultMaxOrphans
	}
	if len(cfg.Prefixes) == 0 {
		cfg.Prefixes = []string{"wal/", "seg/", "ns/"}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &GC{cfg: cfg, sched: coord.GCSchedule{Store: cfg.Coord}, orphans: coord.Orphans{Store: cfg.Coord}}, nil
}

// Stats says what one Run did.
type Stats struct {
	Retired    int  // objects in the sequencer's retired set
	Deleted    int  // retired objects deleted (their grace had passed)
	Referenced int  // due objects found referenced again and kept
	Orphans    int  // unreferenced, unretired objects deleted (they stayed orphans for Grace)
	Swept      bool // the orphan sweep ran
	// OrphansWaiting counts orphans found that have not yet been orphans for Grace
	// (recorded now or before).
	OrphansWaiting int
	OrphansForgot  int // recorded orphans found referenced or retired, and forgotten
}

// Handler returns the function's invocation router (scheduled events run Run).
func (g *GC) Handler() notify.Handler {
	return notify.Handler{Sweep: func(ctx context.Context) error { _, err := g.Run(ctx); return err }}
}

// Run schedules newly retired objects, deletes the due ones and, when it is time, sweeps
// for orphans.
func (g *GC) Run(ctx context.Context) (Stats, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var st Stats
	retired, err := g.schedule(ctx)
	if err != nil {
		return st, err
	}
	st.Retired = len(retired)
	if err := g.deleteDue(ctx, &st); err != nil {
		return st, err
	}
	if g.cfg.OrphanInterval <= 0 {
		return st, nil
	}
	ok, err := g.orphans.ClaimSweep(ctx, g.cfg.Now(), g.cfg.OrphanInterval)
	if err != nil {
		return st, fmt.Errorf("gc: %w", err)
	}
	if ok {
		st.Swept = true
		if err := g.sweepOrphans(ctx, retired, &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

// schedule lists the retired set and schedules each object; it returns the set.
func (g *GC) schedule(ctx context.Context) (map[string]bool, error) {
	retired := map[string]bool{}
	after := ""
	for {
		page, err := g.cfg.Meta.ListRetired(ctx, after, listPage)
		if err != nil {
			return nil, fmt.Errorf("gc: list retired after %q: %w", after, err)
		}
		for _, r := range page {
			retired[r.Key] = true
			if _, err := g.sched.Schedule(ctx, r.Key, time.UnixMilli(r.RetiredMs).Add(g.grace(r.Key))); err != nil {
				return nil, fmt.Errorf("gc: schedule %s: %w", r.Key, err)
			}
		}
		if len(page) < listPage {
			return retired, nil
		}
		after = page[len(page)-1].Key
	}
}

func (g *GC) deleteDue(ctx context.Context, st *Stats) error {
	for {
		var due []coord.GCEntry
		err := g.sched.Due(ctx, g.cfg.Now(), func(e coord.GCEntry) error {
			due = append(due, e)
			if len(due) == batch {
				return errFull
			}
			return nil
		})
		if err != nil && !errors.Is(err, errFull) {
			return fmt.Errorf("gc: due: %w", err)
		}
		if len(due) == 0 {
			return nil
		}
		keys := make([]string, len(due))
		for i, e := range due {
			keys[i] = e.Key
		}
		refd, err := g.cfg.Meta.Referenced(ctx, keys)
		if err != nil {
			return fmt.Errorf("gc: referenced: %w", err)
		}
		if len(refd) != len(keys) {
			return fmt.Errorf("gc: referenced answered %d for %d keys", len(refd), len(keys))
		}
		var gone []string
		for i, e := range due {
			if refd[i] {
				g.cfg.Logger.Warn("retired object is referenced again; kept", "key", e.Key)
				st.Referenced++
				continue
			}
			if err := g.cfg.Bucket.Delete(ctx, e.Key); err != nil {
				return fmt.Errorf("gc: delete %s: %w", e.Key, err)
			}
			gone = append(gone, e.Key)
		}
		if len(gone) > 0 {
			if err := g.cfg.Meta.ForgetRetired(ctx, gone); err != nil {
				return fmt.Errorf("gc: forget retired: %w", err)
			}
		}
		for _, e := range due {
			if err := g.sched.Remove(ctx, e); err != nil {
				return err
			}
		}
		st.Deleted += len(gone)
		g.cfg.Logger.Debug("gc deleted retired objects", "n", len(gone))
		if len(due) < batch {
			return nil
		}
	}
}

var errFull = errors.New("gc: batch full")

// sweepOrphans lists the prefixes for objects older than OrphanAge that are neither
// referenced nor retired, records each in the orphan clock the first time, and deletes it
// once it has been an orphan for Grace.
func (g *GC) sweepOrphans(ctx context.Context, retired map[string]bool, st *Stats) error {
	now := g.cfg.Now()
	cutoff := now.Add(-g.cfg.OrphanAge)
	keep := g.cfg.Grace + 2*g.cfg.OrphanInterval
	known := map[string]coord.Orphan{} // at most the records' bound (see the package doc)
	if err := g.orphans.List(ctx, func(o coord.Orphan) error { known[o.Key] = o; return nil }); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	recorded := 0
	forget := func(k string) error {
		if _, ok := known[k]; !ok {
			return nil
		}
		if err := g.orphans.Forget(ctx, k); err != nil {
			return fmt.Errorf("gc: %w", err)
		}
		delete(known, k)
		st.OrphansForgot++
		return nil
	}
	var cands []string
	flush := func() error {
		if len(cands) == 0 {
			return nil
		}
		refd, err := g.cfg.Meta.Referenced(ctx, cands)
		if err != nil {
			return fmt.Errorf("gc: referenced: %w", err)
		}
		if len(refd) != len(cands) {
			return fmt.Errorf("gc: referenced answered %d for %d keys", len(refd), len(cands))
		}
		// Referenced answers false for retired objects too, and an object may have been
		// retired since the retired set was read: read it again, after Referenced, so every
		// object retired before that answer is seen and left to its grace period.
		retiredNow, err := g.retiredAmong(ctx, cands)
		if err != nil {
			return err
		}
		for i, k := range cands {
			if refd[i] || retiredNow[k] {
				if err := forget(k); err != nil {
					return err
				}
				continue
			}
			o, ok := known[k]
			if !ok {
				if recorded == g.cfg.MaxOrphans {
					continue // a later sweep records it
				}
				if o, err = g.orphans.Record(ctx, k, now, keep); err != nil {
					return fmt.Errorf("gc: %w", err)
				}
				recorded++
				known[k] = o
			}
			if now.Sub(o.FirstSeen) < g.cfg.Grace {
				st.OrphansWaiting++
				continue
			}
			if err := g.cfg.Bucket.Delete(ctx, k); err != nil {
				return fmt.Errorf("gc: delete orphan %s: %w", k, err)
			}
			if err := g.orphans.Forget(ctx, k); err != nil {
				return fmt.Errorf("gc: %w", err)
			}
			delete(known, k)
			st.Orphans++
			g.cfg.Logger.Info("gc deleted an orphan", "key", k, "first_seen", o.FirstSeen)
		}
		cands = cands[:0]
		return nil
	}
	for _, prefix := range g.cfg.Prefixes {
		err := g.cfg.Bucket.List(ctx, prefix, func(o objstore.ObjectInfo) error {
			if !o.LastModified.Before(cutoff) || !isDataKey(o.Key) {
				return nil
			}
			if retired[o.Key] {
				return forget(o.Key)
			}
			cands = append(cands, o.Key)
			if len(cands) == batch {
				return flush()
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("gc: list %s: %w", prefix, err)
		}
		if err := flush(); err != nil {
			return err
		}
	}
	return nil
}

// retiredAmong returns which of keys (in ascending order) are in the retired set now. It
// pages ListRetired over the keys' range only.
func (g *GC) retiredAmong(ctx context.Context, keys []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(keys) == 0 {
		return out, nil
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	first, last := keys[0], keys[len(keys)-1]
	after := first[:len(first)-1] // sorts before first, and before every key >= first
	for {
		page, err := g.cfg.Meta.ListRetired(ctx, after, listPage)
		if err != nil {
			return nil, fmt.Errorf("gc: list retired after %q: %w", after, err)
		}
		for _, r := range page {
			if r.Key > last {
				return out, nil
			}
			if want[r.Key] {
				out[r.Key] = true
			}
		}
		if len(page) < listPage {
			return out, nil
		}
		after = page[len(page)-1].Key
	}
}

// isDataKey reports whether key looks like a WAL or segment object (other files a bucket
// may hold under the prefixes are left alone).
func isDataKey(key string) bool {
	return strings.HasSuffix(key, ".wal") || strings.HasSuffix(key, ".seg")
}
