package segmenter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/notify"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/rewrite"
	"github.com/loamhq/loam/shared/segfmt"
	"github.com/loamhq/loam/shared/walfmt"
)

// Defaults of Config.
const (
	DefaultTargetBytes = 128 << 20
	MinTargetBytes     = 1 << 10 // tests and loam dev go this low; production uses 64–256 MiB
	DefaultMaxAge      = 10 * time.Minute
	DefaultLeaseTTL    = 2 * time.Minute
	DefaultClaimTTL    = 5 * time.Minute
	DefaultReadAhead   = 8
	DefaultSweepPar    = 2
	// LeaseKind is the lease kind the segmenter takes.
	LeaseKind = meta.LeaseSegment
	// lookupPage is how many index entries one Lookup asks for.
	lookupPage = 1000
	// maxRounds bounds the segments one Partition call writes, so one invocation ends.
	maxRounds = 64
)

// ErrConfig: the configuration cannot work.
var ErrConfig = errors.New("segmenter: invalid config")

// ErrCorrupt: a WAL chunk does not match the index entry that points at it.
var ErrCorrupt = errors.New("segmenter: chunk does not match its index entry")

// ErrSealedChunk: the run holds a chunk sealed with its namespace's key and the segmenter
// has no Config.Keys to open it: the partition is left in the WAL, where reads open its
// chunks, and nothing is swapped.
var ErrSealedChunk = errors.New("segmenter: sealed chunk of a namespace with a key, and no namespace keys configured: its partitions stay in the WAL")

// Meta is what the segmenter needs from the sequencer (a subset of meta.Client).
type Meta = rewrite.Meta

// Config configures a Segmenter.
type Config struct {
	Bucket objstore.Bucket // required
	Meta   Meta            // required
	// KeyPrefix is the prefix the bucket puts before every key (an S3 bucket opened with a
	// prefix): it is stripped from the keys of notifications, which name whole keys.
	KeyPrefix string
	// Coord, when set, records handled notifications (claims) and counts pending WAL bytes
	// per partition (coord.WALWork: one write per WAL object), so a notification looks a
	// partition up only once enough is pending. Without it every notification checks its
	// partitions with a Lookup.
	Coord coord.Store
	// TargetBytes: a partition is segmented once its unsegmented WAL data reaches this many
	// bytes, and segments are cut at about this size. Default 128 MiB.
	TargetBytes int64
	// MaxAge: a partition whose oldest unsegmented WAL object is older than this is
	// segmented whatever its size (by the sweep, or the next notification). Default 10 min.
	MaxAge time.Duration
	// ExpressAge: a partition whose oldest unsegmented express WAL object
	// (wal/express/...) is older than this is segmented whatever its size; default
	// DefaultExpressAge. Express objects live on three zonal buckets and are costly to keep.
	ExpressAge time.Duration
	LeaseTTL   time.Duration // default 2 min
	ClaimTTL   time.Duration // notification claims; default 5 min
	Holder     string        // lease holder name; default "segmenter-" + random
	ReadAhead  int           // chunk GETs in flight per segment; default 8
	// SweepParallel is how many partitions a sweep segments at once (each holds up to a
	// segment in memory). Default 2.
	SweepParallel int
	Now           func() time.Time
	Logger        *slog.Logger

	// Namespaces with a key (sealed.go). Keys opens their sealed WAL chunks and seals
	// their segments (under ns/<id>/seg/, in pages of PageSize bytes, default 64 KiB); nil:
	// their sealed chunks stay in the WAL (ErrSealedChunk). SSEKMS also asks the store for
	// SSE-KMS with the namespace's KMS key on each such segment's PUT.
	Keys     *envelope.Catalog
	PageSize int
	SSEKMS   bool
}

func (c *Config) defaults() error {
	switch {
	case c.Bucket == nil:
		return fmt.Errorf("%w: Bucket is required", ErrConfig)
	case c.Meta == nil:
		return fmt.Errorf("%w: Meta is required", ErrConfig)
	case c.TargetBytes < 0 || (c.TargetBytes > 0 && c.TargetBytes < MinTargetBytes):
		return fmt.Errorf("%w: TargetBytes %d below %d", ErrConfig, c.TargetBytes, MinTargetBytes)
	case c.MaxAge < 0 || c.LeaseTTL < 0 || c.ClaimTTL < 0 || c.ReadAhead < 0 || c.SweepParallel < 0:
		return fmt.Errorf("%w: negative setting", ErrConfig)
	}
	if c.TargetBytes == 0 {
		c.TargetBytes = DefaultTargetBytes
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.ExpressAge <= 0 {
		c.ExpressAge = DefaultExpressAge
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.ClaimTTL == 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	if c.Holder == "" {
		c.Holder = rewrite.Holder("segmenter")
	}
	if c.ReadAhead == 0 {
		c.ReadAhead = DefaultReadAhead
	}
	if c.SweepParallel == 0 {
		c.SweepParallel = DefaultSweepPar
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Segmenter rewrites partitions' WAL chunks into segments. Safe for concurrent use.
type Segmenter struct {
	cfg  Config
	ntf  coord.Notifications
	work coord.WALWork
	// nodes is how many log nodes had WAL bytes pending at the last sweep's count (at least
	// 1): a notification's node holds about 1/nodes of a partition's pending bytes.
	nodes atomic.Int64
	reg   coord.Registry

	liveMu sync.Mutex
	live   int64     // live log nodes in the registry, as last read
	liveAt time.Time // when

	mu    sync.Mutex
	hints map[coord.Partition]int64 // where the partition's unsegmented run started last time
	bufs  sync.Pool
	out   objstore.Bucket // where segments are put: Bucket, or a PagesBucket over it
}

// New returns a Segmenter.
func New(cfg Config) (*Segmenter, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Segmenter{cfg: cfg, hints: map[coord.Partition]int64{}, out: cfg.Bucket}
	if cfg.Keys != nil {
		pb, err := envelope.NewPagesBucket(envelope.PagesConfig{Bucket: cfg.Bucket, Keys: cfg.Keys, PageSize: cfg.PageSize, SSEKMS: cfg.SSEKMS})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		s.out = pb
	}
	if cfg.Coord != nil {
		s.ntf = coord.Notifications{Store: cfg.Coord}
		s.work = coord.WALWork{Store: cfg.Coord}
		s.reg = coord.Registry{Store: cfg.Coord}
	}
	s.nodes.Store(1)
	return s, nil
}

// Result says what one Partition call did.
type Result struct {
	Segments int   // segments written and swapped in
	Entries  int   // WAL index entries they replaced
	Bytes    int64 // WAL bytes (chunk lengths) they replaced
	Pending  int64 // WAL bytes still unsegmented after the call
	Busy     bool  // another holder had the lease: nothing done
	Refused  bool  // a swap was refused (lease lost or index changed); its object was deleted
	// KeyUnavailable: the partition's namespace key cannot be had; it stays in the WAL.
	KeyUnavailable bool

	// byNode is Pending by the log node that wrote the WAL objects (nil when the
	// partition's index was not read to the end): what the sweep corrects counts with.
	byNode map[string]int64
}

// Handler returns the function's invocation router: S3/SQS notifications and the sweep.
func (s *Segmenter) Handler() notify.Handler {
	return notify.Handler{S3: s.HandleS3, Sweep: func(ctx context.Context) error { return s.Sweep(ctx) }}
}

// HandleS3 handles WAL-object-created notifications: it counts the object's chunk bytes as
// pending for their partitions, in one coordination-store write for the object (the item of
// the node that wrote it), and segments each partition once enough is pending (or its
// oldest data is older than MaxAge). Other keys and event kinds are
// ignored. Each notification is claimed in the coordination store (when configured) so a
// redelivery does nothing; a failed one is released so the redelivery retries it.
func (s *Segmenter) HandleS3(ctx context.Context, ev events.S3Event) error {
	objs, err := notify.Objects(ev)
	if err != nil {
		return err
	}
	s.refreshKeys(ctx)
	var errs []error
	for _, o := range objs {
		if p := s.cfg.KeyPrefix; p != "" {
			if !strings.HasPrefix(o.Key, strings.TrimSuffix(p, "/")+"/") {
				continue
			}
			o.Key = strings.TrimPrefix(o.Key, strings.TrimSuffix(p, "/")+"/")
		}
		if !o.Created() || !IsWALKey(o.Key) {
			continue
		}
		if s.cfg.Coord != nil {
			first, err := s.ntf.Claim(ctx, o.ID(), s.cfg.ClaimTTL)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !first {
				continue
			}
		}
		err := s.handleWAL(ctx, o)
		if s.cfg.Coord != nil {
			if err != nil {
				err = errors.Join(err, s.ntf.Release(context.WithoutCancel(ctx), o.ID()))
			} else {
				err = s.ntf.Done(ctx, o.ID())
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("segmenter: %s: %w", o.Key, err))
		}
	}
	return errors.Join(errs...)
}

// IsWALKey reports whether key names a WAL object (wal/<class>/<node>/<ulid>.wal).
func IsWALKey(key string) bool {
	return strings.HasPrefix(key, "wal/") && strings.HasSuffix(key, ".wal")
}

func (s *Segmenter) handleWAL(ctx context.Context, o notify.Object) error {
	size := o.Size
	if size <= 0 {
		st, err := s.cfg.Bucket.Stat(ctx, o.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			return nil // deleted since: nothing of it is left to segment
		}
		if err != nil {
			return err
		}
		size = st.Size
	}
	idx, err := walfmt.ReadIndex(ctx, s.cfg.Bucket, o.Key, size)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	bytes := map[coord.Partition]int64{}
	var parts []coord.Partition // in object order
	for _, c := range idx.Chunks {
		p := coord.Partition{StreamID: c.StreamID, Partition: c.Partition}
		if _, ok := bytes[p]; !ok {
			parts = append(parts, p)
		}
		bytes[p] += c.Length
	}
	worth := func(coord.Partition) bool { return true }
	if s.cfg.Coord != nil && len(parts) > 0 {
		// The node's share of each partition's pending bytes; the partition's total is
		// about nodes times that (Partition checks the index before it does anything).
		share, err := s.work.Add(ctx, idx.Header.NodeID, bytes)
		if err != nil {
			return err
		}
		old, nodes := s.old(idx.Header.ULID) || s.expressDue(o.Key, idx.Header.ULID), s.writers(ctx)
		worth = func(p coord.Partition) bool { return old || share[p] >= (s.cfg.TargetBytes+nodes-1)/nodes }
	}
	var errs []error
	done := doneWork{}
	for _, p := range parts {
		if !worth(p) {
			continue
		}
		if _, err := s.partition(ctx, p, done); err != nil {
			errs = append(errs, err)
		}
	}
	s.subtract(ctx, done)
	return errors.Join(errs...)
}

// liveEvery is how long the registry's count of live log nodes is reused.
const liveEvery = time.Minute

// writers estimates how many log nodes write WAL objects: the live nodes of the registry
// (read at most every liveEvery) or the nodes the last sweep found with pending bytes,
// whichever is more; at least 1.
func (s *Segmenter) writers(ctx context.Context) int64 {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if now := s.cfg.Now(); s.liveAt.IsZero() || now.Sub(s.liveAt) >= liveEvery {
		s.liveAt = now
		nodes, err := s.reg.Live(ctx, "")
		if err != nil {
			s.cfg.Logger.Debug("live nodes", "err", err)
		}
		s.live = int64(len(nodes))
	}
	return max(s.live, s.nodes.Load(), 1)
}

// old reports whether a WAL object created at id's time is past MaxAge.
func (s *Segmenter) old(id ulid.ULID) bool {
	return s.cfg.Now().Sub(ulid.Time(id.Time())) >= s.cfg.MaxAge
}

// Sweep checks every partition of every stream and segments those worth it; it also
// corrects the pending-bytes counts of the coordination store from the index (one write per
// node whose counts were off). It is what the schedule (and loam dev's timer) runs, so a
// partition that went quiet is segmented once its data is older than MaxAge.
func (s *Segmenter) Sweep(ctx context.Context) error {
	s.refreshKeys(ctx)
	nss, err := s.cfg.Meta.ListNamespaces(ctx)
	if err != nil {
		return fmt.Errorf("segmenter: sweep: %w", err)
	}
	// The counts as they stand before the index is read: a count added meanwhile is
	// counted twice until the next sweep (too many bytes: a Lookup too early), never lost.
	var counted map[string]map[coord.Partition]int64
	if s.cfg.Coord != nil {
		counted = map[string]map[coord.Partition]int64{}
		if err := s.work.Nodes(ctx, func(node string, m map[coord.Partition]int64) error { counted[node] = m; return nil }); err != nil {
			return fmt.Errorf("segmenter: sweep: %w", err)
		}
	}
	// truth: each partition's pending bytes by node, from the index. Bounded by the
	// partitions with unsegmented data times the nodes that wrote it.
	truth := map[coord.Partition]map[string]int64{}
	done := doneWork{} // work done in partitions without a truth
	listed := true
	type job struct {
		stream    uint64
		partition int32
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range s.cfg.SweepParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				p := coord.Partition{StreamID: j.stream, Partition: j.partition}
				mine := doneWork{}
				res, err := s.partition(ctx, p, mine)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				if err == nil && res.byNode != nil {
					truth[p] = res.byNode // correct counts this partition's work done
				} else {
					done.merge(mine)
				}
				mu.Unlock()
			}
		}()
	}
	for _, ns := range nss {
		sts, err := s.cfg.Meta.ListStreams(ctx, ns)
		if err != nil {
			errs = append(errs, fmt.Errorf("segmenter: sweep %s: %w", ns, err))
			listed = false
			continue
		}
		for _, st := range sts {
			for p := range st.Partitions {
				select {
				case jobs <- job{st.ID, p}:
				case <-ctx.Done():
				}
			}
		}
	}
	close(jobs)
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	s.subtract(ctx, done)
	if s.cfg.Coord != nil {
		if err := s.correct(ctx, counted, truth, listed && len(errs) == 0); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// correct brings the coordination store's counts to the index's: per node, one Add of the
// differences and a Compact when a count reached zero. With all, every partition was read,
// so counts of partitions not in truth (deleted streams) go too.
func (s *Segmenter) correct(ctx context.Context, counted map[string]map[coord.Partition]int64, truth map[coord.Partition]map[string]int64, all bool) error {
	want := map[string]map[coord.Partition]int64{}
	for p, byNode := range truth {
		for node, n := range byNode {
			if want[node] == nil {
				want[node] = map[coord.Partition]int64{}
			}
			want[node][p] = n
		}
	}
	nodes := map[string]bool{}
	for node := range counted {
		nodes[node] = true
	}
	for node := range want {
		nodes[node] = true
	}
	var errs []error
	live := int64(0)
	for node := range nodes {
		delta := map[coord.Partition]int64{}
		zero := false
		for p, n := range counted[node] {
			if _, read := truth[p]; read || all {
				if d := want[node][p] - n; d != 0 {
					delta[p] = d
				}
				zero = zero || want[node][p] <= 0
			}
		}
		for p, n := range want[node] {
			if _, ok := counted[node][p]; !ok && n != 0 {
				delta[p] = n
			}
		}
		if len(want[node]) > 0 {
			live++
		}
		if len(delta) > 0 {
			if _, err := s.work.Add(ctx, node, delta); err != nil {
				errs = append(errs, fmt.Errorf("segmenter: sweep: %w", err))
				continue
			}
		}
		if zero {
			if err := s.work.Compact(ctx, node); err != nil {
				errs = append(errs, fmt.Errorf("segmenter: sweep: %w", err))
			}
		}
	}
	s.nodes.Store(max(live, 1))
	return errors.Join(errs...)
}

// Partition segments one partition if it is worth it: under the partition's "segment"
// lease it takes the run of WAL entries that follows the last segment, writes one segment
// of about TargetBytes from its start (or of all of it when its oldest object is older than
// MaxAge), swaps the entries for the segment's, and repeats while a full segment's worth
// is pending. A partition whose lease another holder has is left alone (Result.Busy). A
// stream deleted meanwhile is not an error.
func (s *Segmenter) Partition(ctx context.Context, streamID uint64, partition int32) (Result, error) {
	done := doneWork{}
	defer s.subtract(ctx, done)
	return s.partition(ctx, coord.Partition{StreamID: streamID, Partition: partition}, done)
}

// doneWork is WAL bytes segmented, by node and partition, not yet subtracted from the
// coordination store's counts.
type doneWork map[string]map[coord.Partition]int64

func (d doneWork) add(node string, p coord.Partition, n int64) {
	if d[node] == nil {
		d[node] = map[coord.Partition]int64{}
	}
	d[node][p] += n
}

func (d doneWork) merge(o doneWork) {
	for node, m := range o {
		for p, n := range m {
			d.add(node, p, n)
		}
	}
}

// subtract takes done off the counts: one write per node (per coord.MaxAddAll partitions).
func (s *Segmenter) subtract(ctx context.Context, done doneWork) {
	if s.cfg.Coord == nil {
		return
	}
	for node, m := range done {
		for p := range m {
			m[p] = -m[p]
		}
		if _, err := s.work.Add(context.WithoutCancel(ctx), node, m); err != nil {
			s.cfg.Logger.Warn("work accounting", "node", node, "err", err)
		}
	}
}

func (s *Segmenter) partition(ctx context.Context, p coord.Partition, done doneWork) (Result, error) {
	streamID, partition := p.StreamID, p.Partition
	var res Result
	// A read-only look first: most calls find nothing to do and take no lease.
	run, pending, byNode, err := s.walRun(ctx, p)
	if err != nil {
		return res, s.ignoreGone(p, err)
	}
	res.Pending, res.byNode = pending, byNode
	if len(s.pick(run)) == 0 {
		return res, nil
	}
	lease, err := s.cfg.Meta.AcquireLease(ctx, streamID, partition, LeaseKind, s.cfg.Holder, s.cfg.LeaseTTL)
	if errors.Is(err, meta.ErrLeaseHeld) {
		res.Busy = true
		return res, nil
	}
	if err != nil {
		return res, s.ignoreGone(p, fmt.Errorf("segmenter: lease %s: %w", p, err))
	}
	defer func() {
		if err := s.cfg.Meta.ReleaseLease(context.WithoutCancel(ctx), lease); err != nil {
			s.cfg.Logger.Debug("release lease", "partition", p.String(), "err", err)
		}
	}()
	leaseAt := time.Now()
	for round := 0; round < maxRounds; round++ {
		if round > 0 {
			if run, pending, byNode, err = s.walRun(ctx, p); err != nil {
				return res, s.ignoreGone(p, err)
			}
			res.Pending, res.byNode = pending, byNode
		}
		pick := s.pick(run)
		if len(pick) == 0 {
			break
		}
		if time.Since(leaseAt) > s.cfg.LeaseTTL/3 { // renew: the same holder keeps its epoch
			l, err := s.cfg.Meta.AcquireLease(ctx, streamID, partition, LeaseKind, s.cfg.Holder, s.cfg.LeaseTTL)
			if err != nil {
				return res, fmt.Errorf("segmenter: renew lease %s: %w", p, err)
			}
			lease, leaseAt = l, time.Now()
		}
		entry, err := s.write(ctx, p, pick)
		if errors.Is(err, segfmt.ErrUnsupportedEncoding) {
			// Chunks of an encoding this segmenter cannot write: the data stays in WAL
			// objects. Not an error, or its notification would be redelivered forever.
			s.cfg.Logger.Debug("partition not segmented", "partition", p.String(), "err", err)
			return res, nil
		}
		if s.keyUnavailable(p, err) {
			res.KeyUnavailable = true
			return res, nil
		}
		if err != nil {
			return res, s.ignoreGone(p, err) // a stream deleted meanwhile (its namespace lookup)
		}
		var bytes int64
		picked := map[string]int64{} // bytes by node
		for _, e := range pick {
			bytes += e.Length
			picked[nodeOf(e.Object)] += e.Length
		}
		err = s.cfg.Meta.SwapIndex(ctx, meta.IndexSwap{Lease: lease, Old: pick, New: []meta.IndexEntry{entry}, StampMs: s.cfg.Now().UnixMilli()})
		if errors.Is(err, meta.ErrLeaseLost) || errors.Is(err, meta.ErrIndexChanged) {
			// Someone else segmented (or trimmed) this range: our object is referenced by
			// nothing, unless an earlier attempt of this very swap was applied. Delete it
			// once the sequencer confirms; GC's orphan sweep catches it otherwise.
			rewrite.DeleteUnreferenced(context.WithoutCancel(ctx), s.cfg.Meta, s.out, s.cfg.Logger, entry.Object)
			s.cfg.Logger.Info("segment swap refused", "partition", p.String(), "key", entry.Object, "err", err)
			res.Refused, res.byNode = true, nil
			return res, nil
		}
		if err != nil {
			// Outcome unknown: the swap may have happened. If it did not, the object is an
			// orphan for GC; if it did, deleting it would lose data. Leave it.
			return res, fmt.Errorf("segmenter: swap %s [%d,%d): %w", p, pick[0].BaseOffset, pick[len(pick)-1].End(), err)
		}
		res.Segments++
		res.Entries += len(pick)
		res.Bytes += bytes
		res.Pending -= bytes
		s.mu.Lock()
		s.hints[p] = entry.End()
		s.mu.Unlock()
		for node, n := range picked {
			if res.byNode != nil {
				res.byNode[node] -= n
			}
			if node != "" {
				done.add(node, p, n)
			}
		}
		s.cfg.Logger.Debug("segment written", "partition", p.String(), "key", entry.Object,
			"base", entry.BaseOffset, "end", entry.End(), "entries", len(pick), "bytes", entry.Length)
	}
	return res, nil
}

// nodeOf is the log node that wrote WAL object key ("" for a key of another shape).
func nodeOf(key string) string {
	_, node, _, err := walfmt.ParseObjectKey(key)
	if err != nil {
		return ""
	}
	return node
}

func (s *Segmenter) ignoreGone(p coord.Partition, err error) error {
	if errors.Is(err, meta.ErrStreamNotFound) || errors.Is(err, meta.ErrPartitionNotFound) {
		s.mu.Lock()
		delete(s.hints, p)
		s.mu.Unlock()
		return nil
	}
	return err
}

// walRun returns the partition's run of WAL entries that follows its last segment (or
// starts at the log start), at most enough to fill one segment plus the rest's byte count:
// pending is the bytes of every WAL entry of the run, byNode the same by the node that
// wrote the entry's object (nil when the run was cut short by a trim).
func (s *Segmenter) walRun(ctx context.Context, p coord.Partition) (run []meta.IndexEntry, pending int64, byNode map[string]int64, err error) {
	_, st, err := s.cfg.Meta.Lookup(ctx, p.StreamID, p.Partition, 0, 0)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("segmenter: lookup %s: %w", p, err)
	}
	byNode = map[string]int64{}
	s.mu.Lock()
	from := s.hints[p]
	s.mu.Unlock()
	from = max(from, st.LogStart)
	if from > st.HighWatermark {
		from = st.LogStart
	}
	var acc int64
	for from < st.HighWatermark {
		es, _, err := s.cfg.Meta.Lookup(ctx, p.StreamID, p.Partition, from, lookupPage)
		if errors.Is(err, meta.ErrOffsetOutOfRange) {
			return nil, 0, nil, nil // trimmed meanwhile; the next call starts afresh
		}
		if err != nil {
			return nil, 0, nil, fmt.Errorf("segmenter: lookup %s from %d: %w", p, from, err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			switch {
			case e.Kind != meta.KindWAL:
				if len(run) > 0 {
					// A segment after WAL entries (cannot happen: segments replace runs
					// from the start). Stop at the first run.
					return run, pending, byNode, nil
				}
				s.mu.Lock()
				s.hints[p] = e.End()
				s.mu.Unlock()
			default:
				pending += e.Length
				if n := nodeOf(e.Object); n != "" {
					byNode[n] += e.Length
				}
				if acc < 2*s.cfg.TargetBytes { // enough for a pick; the rest is only counted
					run = append(run, e)
					acc += e.Length
				}
			}
		}
		from = es[len(es)-1].End()
	}
	return run, pending, byNode, nil
}

// pick returns the prefix of run to segment now: entries from the start until they reach
// TargetBytes, or all of run when they do not but its oldest object is past MaxAge.
func (s *Segmenter) pick(run []meta.IndexEntry) []meta.IndexEntry {
	if len(run) == 0 {
		return nil
	}
	var acc int64
	for i, e := range run {
		acc += e.Length
		if acc >= s.cfg.TargetBytes {
			return run[:i+1]
		}
	}
	if s.cfg.Now().Sub(entryTime(run[0])) >= s.cfg.MaxAge || s.expressRunDue(run) {
		return run
	}
	return nil
}

// entryTime is when a WAL entry's data was written: its object's ULID time, else (a key
// of another shape) its max timestamp.
func entryTime(e meta.IndexEntry) time.Time {
	if _, _, id, err := walfmt.ParseObjectKey(e.Object); err == nil {
		return ulid.Time(id.Time())
	}
	return time.UnixMilli(e.MaxTimestamp)
}

// write reads the chunks of run, writes them as one segment (Put IfAbsent under a fresh
// key) and returns the segment's index entry.
func (s *Segmenter) write(ctx context.Context, p coord.Partition, run []meta.IndexEntry) (meta.IndexEntry, error) {
	var total int64
	for _, e := range run {
		total += e.Length
	}
	first, last := run[0], run[len(run)-1]
	nsKey, keyed, err := s.sealedKey(ctx, p)
	if err != nil {
		return meta.IndexEntry{}, err
	}
	opener := &chunkOpener{s: s}
	buf, _ := s.bufs.Get().([]byte)
	defer func() { s.bufs.Put(buf[:0]) }() //nolint:staticcheck // a slice header is fine here
	if need := segfmt.Size(total, len(run)*4); int64(cap(buf)) < need {
		buf = make([]byte, 0, need)
	}
	w, err := segfmt.NewWriterBuffer(segfmt.Header{Encoding: segfmt.EncodingKafka, StreamID: p.StreamID, Partition: p.Partition,
		BaseOffset: first.BaseOffset, EndOffset: last.End(), CreatedMs: s.cfg.Now().UnixMilli()}, buf)
	if err != nil {
		return meta.IndexEntry{}, fmt.Errorf("segmenter: %s: %w", p, err)
	}
	var aseg *arrowSegment // an arrow stream's partition: set by its first chunk (arrow.go)
	defer func() {
		if aseg != nil {
			aseg.release()
		}
	}()
	err = s.readChunks(ctx, run, func(e meta.IndexEntry, b []byte) error {
		ref, payload, err := walfmt.DecodeChunk(b)
		if err != nil {
			return fmt.Errorf("segmenter: %s [%d+%d]: %w", e.Object, e.Offset, e.Length, err)
		}
		if ref.Encrypted {
			if !keyed {
				// No Keys, or a sealed chunk of a namespace with no key on record.
				if s.cfg.Keys != nil {
					return fmt.Errorf("segmenter: %s [%d+%d] (%s): %w: a sealed chunk, and its namespace has no key on record", e.Object, e.Offset, e.Length, p, envelope.ErrKeyUnavailable)
				}
				return fmt.Errorf("segmenter: %s [%d+%d] (%s): %w", e.Object, e.Offset, e.Length, p, ErrSealedChunk)
			}
			if payload, err = opener.open(ctx, e, ref, payload); err != nil {
				return fmt.Errorf("segmenter: %s [%d+%d] (%s): %w", e.Object, e.Offset, e.Length, p, err)
			}
		}
		if ref.StreamID != p.StreamID || ref.Partition != p.Partition || ref.Records != e.Count {
			return fmt.Errorf("segmenter: %s [%d+%d]: chunk of %d/%d with %d records, entry of %s with %d: %w",
				e.Object, e.Offset, e.Length, ref.StreamID, ref.Partition, ref.Records, p, e.Count, ErrCorrupt)
		}
		if ref.Encoding == walfmt.EncodingArrow && aseg == nil && w.Batches() == 0 {
			if w, err = segfmt.NewWriterBuffer(segfmt.Header{Encoding: segfmt.EncodingArrow, StreamID: p.StreamID, Partition: p.Partition,
				BaseOffset: first.BaseOffset, EndOffset: last.End(), CreatedMs: s.cfg.Now().UnixMilli()}, buf); err != nil {
				return fmt.Errorf("segmenter: %s: %w", p, err)
			}
			aseg = newArrowSegment(w, p)
		}
		if (ref.Encoding == walfmt.EncodingArrow) != (aseg != nil) {
			return fmt.Errorf("segmenter: %s: encoding %d after chunks of another encoding: %w", e.Object, ref.Encoding, ErrCorrupt)
		}
		if aseg != nil {
			return aseg.add(e, payload)
		}
		if ref.Encoding != walfmt.EncodingKafka {
			return fmt.Errorf("segmenter: %s: encoding %d: %w", e.Object, ref.Encoding, segfmt.ErrUnsupportedEncoding)
		}
		off := e.BaseOffset
		for rest := payload; len(rest) > 0; {
			batch, tail, err := recordbatch.Parse(rest)
			if err != nil {
				return fmt.Errorf("segmenter: %s at offset %d: %w", e.Object, off, err)
			}
			if err := recordbatch.SetBaseOffset(batch.Raw, off); err != nil {
				return err
			}
			if err := w.Add(batch.Raw); err != nil {
				return fmt.Errorf("segmenter: %s at offset %d: %w", e.Object, off, err)
			}
			off += batch.OffsetCount()
			rest = tail
		}
		if off != e.End() {
			return fmt.Errorf("segmenter: %s [%d+%d]: batches end at %d, entry at %d: %w", e.Object, e.Offset, e.Length, off, e.End(), ErrCorrupt)
		}
		return nil
	})
	if err != nil {
		return meta.IndexEntry{}, err
	}
	var obj []byte
	var info segfmt.Info
	if aseg != nil {
		obj, info, err = aseg.finish()
	} else {
		obj, info, err = w.Finish()
	}
	if err != nil {
		return meta.IndexEntry{}, fmt.Errorf("segmenter: %s: %w", p, err)
	}
	buf = obj
	key := segfmt.ObjectKey(p.StreamID, p.Partition, first.BaseOffset, ulid.Make().String())
	if keyed {
		key = envelope.SegmentKey(nsKey.ID, key) // sealed in pages by s.out
	}
	if err := s.out.Put(ctx, key, obj, objstore.IfAbsent()); err != nil {
		return meta.IndexEntry{}, fmt.Errorf("segmenter: put %s: %w", key, err)
	}
	return meta.IndexEntry{BaseOffset: info.Header.BaseOffset, Count: info.Header.EndOffset - info.Header.BaseOffset,
		Kind: meta.KindSegment, Object: key, Offset: info.DataOffset, Length: info.DataLength, MaxTimestamp: info.Header.MaxTimestamp}, nil
}

// readChunks range-GETs the chunks of run, ReadAhead at a time, and calls fn with each in
// run order. Neighbouring chunks of one object are read with one GET.
func (s *Segmenter) readChunks(ctx context.Context, run []meta.IndexEntry, fn func(meta.IndexEntry, []byte) error) error {
	type read struct {
		first, n int // entries run[first:first+n], contiguous in one object
		done     chan struct{}
		b        []byte
		err      error
	}
	var reads []*read
	for i := 0; i < len(run); {
		r := &read{first: i, n: 1, done: make(chan struct{})}
		for i+r.n < len(run) && run[i+r.n].Object == run[i].Object && run[i+r.n].Offset == run[i+r.n-1].Offset+run[i+r.n-1].Length {
			r.n++
		}
		reads = append(reads, r)
		i += r.n
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, s.cfg.ReadAhead)
	go func() {
		for _, r := range reads {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				r.err = ctx.Err()
				close(r.done)
				continue
			}
			go func() {
				defer close(r.done)
				first, last := run[r.first], run[r.first+r.n-1]
				n := last.Offset + last.Length - first.Offset
				r.b, r.err = s.cfg.Bucket.GetRange(ctx, first.Object, first.Offset, n)
				if r.err == nil && int64(len(r.b)) != n {
					r.err = fmt.Errorf("segmenter: %s [%d+%d]: short read of %d bytes: %w", first.Object, first.Offset, n, len(r.b), ErrCorrupt)
				}
			}()
		}
	}()
	for _, r := range reads {
		<-r.done
		if r.err != nil {
			return fmt.Errorf("segmenter: read %s: %w", run[r.first].Object, r.err)
		}
		off := run[r.first].Offset
		for _, e := range run[r.first : r.first+r.n] {
			if err := fn(e, r.b[e.Offset-off:e.Offset-off+e.Length]); err != nil {
				return err
			}
		}
		r.b = nil
		<-sem
	}
	return nil
}
