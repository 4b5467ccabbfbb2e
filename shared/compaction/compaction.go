// Package compaction is the compaction function's handler: for streams with
// cleanup_policy=compact it keeps the latest record per key over the whole partition,
// drops tombstones older than the tombstone retention, writes new segments and swaps index
// entries. It works like Kafka's log cleaner, in memory bounded by its configuration.
//
// # Basics
//
// A partition's segment run (its segment entries from the log start up to the first WAL
// entry: unsegmented data is left to the segmenter) has a clean section, the offsets below
// its cleaned point, where each key has at most one record, and a dirty section after it.
// The cleaned point is kept in the coordination store (coord.CleanPoints), or in memory
// when the Compactor has no store. Partition, under the partition's "compact" lease, runs
// passes until the dirty section is empty:
//
//  1. Key map. It reads the dirty section from the cleaned point and records each key's
//     latest offset in a map of at most KeyMapBytes. Where the map is full the pass ends,
//     at the start of the entry that did not fit (inside it when it is the first dirty
//     entry): the pass covers the offsets below passEnd.
//  2. Rewrite. It reads the run from the log start and decides each record below passEnd:
//     dropped when the map holds a later offset for its key, or when it is a tombstone
//     (null value) whose key has no later record and whose timestamp is older than now -
//     TombstoneRetention. Records with a null key, records from passEnd on and control
//     batches are kept, and so is the run's very last record (a segment holds at least one
//     batch).
//  3. Segments. Consecutive entries holding a dropped record are rebuilt into segments of
//     about TargetBytes (a segment ends before an entry that might not fit; an unchanged
//     entry joins a segment being built, and otherwise keeps its entry), each standing for a contiguous range of offsets (with
//     gaps inside, which fetch skips): a batch that lost records is re-encoded with
//     recordbatch.Append keeping each record's offset delta, the base offset, codec and
//     producer fields; a batch that lost none is kept verbatim; a batch that lost all is
//     dropped. Each segment is Put with IfAbsent and swapped in for the entries it replaces
//     by one SwapIndex; the sequencer retires the old segments and gc deletes them after
//     grace.
//  4. Point. Once every swap of the pass is applied the cleaned point moves to passEnd,
//     with the time the earliest tombstone kept below it expires.
//
// A partition with an empty dirty section is skipped without reading it, until its
// earliest kept tombstone expires; then one pass with an empty map rewrites what expired.
//
// Offsets never change: a consumer that committed an offset resumes at the next record
// kept. A lost lease or a changed index refuses a swap: the swaps already applied stand
// (each replaced entries by segments with the same records minus dropped ones), the
// refused segment is deleted, the cleaned point stays where it was, and the next run
// repeats the pass.
//
// # Memory
//
// One Partition call holds at most: the key map, KeyMapBytes (its table and key bytes,
// counting both tables while it grows); the read buffer, about 2 x ReadBytes, or one batch
// plus ReadBytes when a batch is larger; the segment being built, twice (its batches, then
// the object), whose data is at most the larger of TargetBytes and the largest old entry
// it replaces; one decoded batch; and the index entries of the run (about 150 bytes
// each). Never a run of decoded records.
//
// # Caveats
//
//   - Only segments are compacted: a key's value in the WAL tail does not yet remove its
//     older values in segments (the first run after segmenting does).
//   - The run's last record is never dropped, even an expired tombstone.
//   - A re-encoded batch loses the log-append-time and transactional attribute bits
//     (recordbatch.Append writes create-time, non-transactional batches); control batches
//     are never re-encoded.
//   - Every pass reads the clean section again (as Kafka's cleaner does); a pass that
//     drops nothing there rewrites nothing.
//   - Without a coordination store a new process compacts every partition from its log
//     start once. The lease is renewed before each entry read and each swap, once a third
//     of its TTL has passed; reading one entry must take less than the rest.
//   - A key larger than the key map (about KeyMapBytes - 2 KiB) stops the partition's
//     compaction with an error naming it, until KeyMapBytes is raised.
package compaction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/notify"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/rewrite"
	"github.com/loamhq/loam/shared/segfmt"
)

// Defaults of Config.
const (
	DefaultTombstoneRetention = 24 * time.Hour
	DefaultTargetBytes        = 128 << 20
	DefaultKeyMapBytes        = 64 << 20
	DefaultReadBytes          = 4 << 20
	DefaultLeaseTTL           = 5 * time.Minute
	LeaseKind                 = meta.LeaseCompact
	// MinKeyMapBytes is the smallest KeyMapBytes: room for a few small keys.
	MinKeyMapBytes = 4 << 10
)

// ErrConfig: the configuration cannot work.
var ErrConfig = errors.New("compaction: invalid config")

// Meta is what compaction needs from the sequencer (a subset of meta.Client).
type Meta = rewrite.Meta

// Config configures a Compactor.
type Config struct {
	Bucket objstore.Bucket // required
	Meta   Meta            // required
	// Coord keeps each partition's cleaned point (coord.CleanPoints). Nil: points are kept
	// in this Compactor's memory (one small entry per compacted partition).
	Coord              coord.Store
	TombstoneRetention time.Duration // default 24 h
	TargetBytes        int64         // segment size; default 128 MiB
	// KeyMapBytes bounds the key -> offset map of one pass (table and key bytes); a dirty
	// section whose keys do not fit takes several passes. Default 64 MiB, at least
	// MinKeyMapBytes.
	KeyMapBytes int64
	ReadBytes   int64         // size of one range GET of segment data; default 4 MiB
	LeaseTTL    time.Duration // default 5 min
	Holder      string        // default "compactor-" + random
	Now         func() time.Time
	Logger      *slog.Logger

	// Namespaces with a key (sealed.go): Keys opens their sealed segments and seals the
	// compacted ones (pages of PageSize bytes, default 64 KiB; SSEKMS also asks the store
	// for SSE-KMS with the namespace's key). Nil: their partitions answer
	// ErrSealedSegments.
	Keys     *envelope.Catalog
	PageSize int
	SSEKMS   bool
}

// Compactor compacts partitions. Safe for concurrent use.
type Compactor struct {
	cfg    Config
	points points
}

// points is where cleaned points live.
type points interface {
	get(ctx context.Context, p coord.Partition) (coord.CleanPoint, error)
	set(ctx context.Context, p coord.Partition, pt coord.CleanPoint) error
}

type storePoints struct{ coord.CleanPoints }

func (s storePoints) get(ctx context.Context, p coord.Partition) (coord.CleanPoint, error) {
	return s.Get(ctx, p)
}

func (s storePoints) set(ctx context.Context, p coord.Partition, pt coord.CleanPoint) error {
	return s.Set(ctx, p, pt)
}

// memPoints holds one point per partition compacted by this process.
type memPoints struct {
	mu sync.Mutex
	m  map[coord.Partition]coord.CleanPoint
}

func (m *memPoints) get(_ context.Context, p coord.Partition) (coord.CleanPoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[p], nil
}

func (m *memPoints) set(_ context.Context, p coord.Partition, pt coord.CleanPoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[p] = pt
	return nil
}

// New returns a Compactor.
func New(cfg Config) (*Compactor, error) {
	switch {
	case cfg.Bucket == nil || cfg.Meta == nil:
		return nil, fmt.Errorf("%w: Bucket and Meta are required", ErrConfig)
	case cfg.TombstoneRetention < 0 || cfg.TargetBytes < 0 || cfg.KeyMapBytes < 0 || cfg.ReadBytes < 0 || cfg.LeaseTTL < 0:
		return nil, fmt.Errorf("%w: negative setting", ErrConfig)
	case cfg.KeyMapBytes != 0 && cfg.KeyMapBytes < MinKeyMapBytes:
		return nil, fmt.Errorf("%w: KeyMapBytes %d is below the minimum %d", ErrConfig, cfg.KeyMapBytes, MinKeyMapBytes)
	}
	if cfg.TombstoneRetention == 0 {
		cfg.TombstoneRetention = DefaultTombstoneRetention
	}
	if cfg.TargetBytes == 0 {
		cfg.TargetBytes = DefaultTargetBytes
	}
	if cfg.KeyMapBytes == 0 {
		cfg.KeyMapBytes = DefaultKeyMapBytes
	}
	if cfg.ReadBytes == 0 {
		cfg.ReadBytes = DefaultReadBytes
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Holder == "" {
		cfg.Holder = rewrite.Holder("compactor")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := sealedPages(&cfg); err != nil {
		return nil, err
	}
	c := &Compactor{cfg: cfg}
	if cfg.Coord != nil {
		c.points = storePoints{coord.CleanPoints{Store: cfg.Coord}}
	} else {
		c.points = &memPoints{m: map[coord.Partition]coord.CleanPoint{}}
	}
	return c, nil
}

// Handler returns the function's invocation router (scheduled events run Sweep).
func (c *Compactor) Handler() notify.Handler {
	return notify.Handler{Sweep: c.Sweep}
}

// Result says what one Partition call did.
type Result struct {
	Passes   int // passes completed or begun
	Entries  int // old segment entries replaced
	Segments int // new segments written
	Dropped  int // records removed
	Kept     int // records of the replaced entries kept (summed over passes)
	Busy     bool
	Refused  bool
}

// Sweep compacts every partition of every compacted stream.
func (c *Compactor) Sweep(ctx context.Context) error {
	c.refreshKeys(ctx)
	nss, err := c.cfg.Meta.ListNamespaces(ctx)
	if err != nil {
		return fmt.Errorf("compaction: sweep: %w", err)
	}
	var errs []error
	for _, ns := range nss {
		sts, err := c.cfg.Meta.ListStreams(ctx, ns)
		if err != nil {
			errs = append(errs, fmt.Errorf("compaction: sweep %s: %w", ns, err))
			continue
		}
		for _, st := range sts {
			if st.CleanupPolicy != meta.CleanupCompact {
				continue
			}
			for p := range st.Partitions {
				if _, err := c.Partition(ctx, st.ID, p); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// errRefused: a swap or lease renewal was refused; the run stops.
var errRefused = errors.New("compaction: refused")

// run is one Partition call's state.
type run struct {
	c     *Compactor
	p     coord.Partition
	lease meta.Lease
	renew time.Time // when the lease was last granted
	res   *Result
	rd    batchReader
	data  []byte // reused buffer of the segment being built
	obj   []byte // reused buffer of the segment object
}

// Partition compacts one partition (see the package comment).
func (c *Compactor) Partition(ctx context.Context, streamID uint64, partition int32) (Result, error) {
	var res Result
	p := coord.Partition{StreamID: streamID, Partition: partition}
	pt, err := c.points.get(ctx, p)
	if err != nil {
		return res, fmt.Errorf("compaction: %d/%d: %w", streamID, partition, err)
	}
	segs, logStart, err := c.segmentRun(ctx, streamID, partition)
	if err != nil {
		if errors.Is(err, meta.ErrStreamNotFound) || errors.Is(err, meta.ErrPartitionNotFound) {
			return res, nil
		}
		return res, err
	}
	if !c.due(pt, logStart, segs) {
		return res, nil
	}
	if err := c.checkSealed(segs); err != nil {
		return res, fmt.Errorf("compaction: %d/%d: %w", streamID, partition, err)
	}
	lease, err := c.cfg.Meta.AcquireLease(ctx, streamID, partition, LeaseKind, c.cfg.Holder, c.cfg.LeaseTTL)
	if errors.Is(err, meta.ErrLeaseHeld) {
		res.Busy = true
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("compaction: lease %d/%d: %w", streamID, partition, err)
	}
	r := &run{c: c, p: p, lease: lease, renew: c.cfg.Now(), res: &res, rd: batchReader{bucket: c.cfg.Bucket, chunk: c.cfg.ReadBytes}}
	defer func() { _ = c.cfg.Meta.ReleaseLease(context.WithoutCancel(ctx), r.lease) }()
	for {
		// The point is read again under the lease: another holder may have moved it.
		if pt, err = c.points.get(ctx, p); err != nil {
			return res, fmt.Errorf("compaction: %d/%d: %w", streamID, partition, err)
		}
		if segs, logStart, err = c.segmentRun(ctx, streamID, partition); err != nil {
			return res, err
		}
		dirty := max(pt.Offset, logStart)
		if !c.due(pt, logStart, segs) || (res.Passes > 0 && dirty >= segs[len(segs)-1].End()) {
			break // clean, or a tombstone-only pass was done
		}
		res.Passes++
		err = r.pass(ctx, segs, dirty)
		if errors.Is(err, errRefused) {
			res.Refused = true
			return res, nil
		}
		if err != nil {
			return res, err
		}
	}
	if res.Entries > 0 {
		c.cfg.Logger.Info("compacted a partition", "stream", streamID, "partition", partition, "passes", res.Passes,
			"entries", res.Entries, "segments", res.Segments, "dropped", res.Dropped, "kept", res.Kept)
	}
	return res, nil
}

// due reports whether the partition has a dirty section or an expired kept tombstone.
func (c *Compactor) due(pt coord.CleanPoint, logStart int64, segs []meta.IndexEntry) bool {
	if len(segs) == 0 {
		return false
	}
	if max(pt.Offset, logStart) < segs[len(segs)-1].End() {
		return true
	}
	return pt.RecheckMs != 0 && c.cfg.Now().UnixMilli() >= pt.RecheckMs
}

// segmentRun returns the partition's leading run of segment entries from the log start,
// and the log start.
func (c *Compactor) segmentRun(ctx context.Context, streamID uint64, partition int32) ([]meta.IndexEntry, int64, error) {
	_, st, err := c.cfg.Meta.Lookup(ctx, streamID, partition, 0, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("compaction: lookup %d/%d: %w", streamID, partition, err)
	}
	var segs []meta.IndexEntry
	for from := st.LogStart; from < st.HighWatermark; {
		es, _, err := c.cfg.Meta.Lookup(ctx, streamID, partition, from, 1000)
		if errors.Is(err, meta.ErrOffsetOutOfRange) {
			return nil, st.LogStart, nil // trimmed meanwhile: next time
		}
		if err != nil {
			return nil, 0, fmt.Errorf("compaction: lookup %d/%d from %d: %w", streamID, partition, from, err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			if e.Kind != meta.KindSegment {
				return segs, st.LogStart, nil
			}
			segs = append(segs, e)
		}
		from = es[len(es)-1].End()
	}
	return segs, st.LogStart, nil
}

// keyMap builds the key map of the dirty section from dirty on and returns it with the
// pass's end: the start of the entry holding the first record whose key did not fit (that
// record's offset if the entry holds dirty), or the run's end.
func (r *run) keyMap(ctx context.Context, segs []meta.IndexEntry, dirty int64) (*keyMap, int64, error) {
	km := newKeyMap(r.c.cfg.KeyMapBytes)
	for _, e := range segs {
		if e.End() <= dirty {
			continue
		}
		if err := r.renewLease(ctx); err != nil {
			return nil, 0, err
		}
		r.rd.reset(e)
		for {
			b, ok, err := r.rd.next(ctx)
			if err != nil {
				return nil, 0, err
			}
			if !ok {
				break
			}
			if b.Control() || b.LastOffset() < dirty {
				continue
			}
			recs, err := b.Records()
			if err != nil {
				return nil, 0, fmt.Errorf("compaction: %s at %d: %w", e.Object, b.BaseOffset, err)
			}
			for _, rec := range recs {
				off := b.BaseOffset + int64(rec.OffsetDelta)
				if off < dirty || rec.Key == nil || km.put(rec.Key, off) {
					continue
				}
				if km.n == 0 || off == dirty {
					return nil, 0, fmt.Errorf("compaction: %s: the key of the record at %d (%d bytes) does not fit in KeyMapBytes %d",
						e.Object, off, len(rec.Key), r.c.cfg.KeyMapBytes)
				}
				if e.BaseOffset > dirty {
					// End at the entry's start, so the entry is not rewritten twice; the
					// keys of it already in the map have later records, which are kept.
					return km, e.BaseOffset, nil
				}
				return km, off, nil
			}
		}
	}
	return km, segs[len(segs)-1].End(), nil
}

// group is the segment being built: the old entries it replaces and its batches.
type group struct {
	old     []meta.IndexEntry
	ends    []int // end of each batch in run.data
	changed bool  // a record of old was dropped
	kept    int   // records kept
	dropped int
}

// pass runs one pass (see the package comment) over segs, whose dirty section starts at
// dirty.
func (r *run) pass(ctx context.Context, segs []meta.IndexEntry, dirty int64) error {
	if err := r.renewLease(ctx); err != nil {
		return err
	}
	km, passEnd, err := r.keyMap(ctx, segs, dirty)
	if err != nil {
		return err
	}
	cfg := &r.c.cfg
	horizon := cfg.Now().Add(-cfg.TombstoneRetention).UnixMilli()
	var recheck int64
	lastKept := false
	g := &group{}
	r.data = r.data[:0]
	for i := 0; i < len(segs); i++ {
		e := segs[i]
		if e.BaseOffset >= passEnd && (len(g.old) == 0 || len(g.ends) > 0) {
			break // past the pass, and no batchless segment waits for a batch
		}
		if len(g.ends) > 0 && int64(len(r.data))+e.Length > cfg.TargetBytes {
			// The entry might not fit: the segment ends before it, so no segment exceeds
			// the larger of TargetBytes and the largest entry it replaces.
			if err := r.flush(ctx, g); err != nil {
				return err
			}
		}
		if err := r.renewLease(ctx); err != nil {
			return err
		}
		mark, markEnds := len(r.data), len(g.ends)
		kept, dropped := 0, 0
		r.rd.reset(e)
		for {
			b, ok, err := r.rd.next(ctx)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			lastBatch := i == len(segs)-1 && r.rd.last()
			if b.Control() || b.BaseOffset >= passEnd {
				r.data = append(r.data, b.Raw...)
				g.ends = append(g.ends, len(r.data))
				kept += int(b.NumRecords)
				continue
			}
			recs, err := b.Records()
			if err != nil {
				return fmt.Errorf("compaction: %s at %d: %w", e.Object, b.BaseOffset, err)
			}
			keep := make([]recordbatch.Record, 0, len(recs))
			for k, rec := range recs {
				off := b.BaseOffset + int64(rec.OffsetDelta)
				ok := true
				switch {
				case off >= passEnd || rec.Key == nil:
				case lastBatch && k == len(recs)-1:
					// The run's last record stays: the last segment needs a batch. An
					// expired tombstone kept so sets no recheck.
					lastKept = rec.Value == nil && rec.Timestamp < horizon
				default:
					if latest, in := km.get(rec.Key); in && latest > off {
						ok = false
					} else if rec.Value == nil && rec.Timestamp < horizon {
						ok = false
					}
				}
				if !ok {
					continue
				}
				keep = append(keep, rec)
				if rec.Key != nil && rec.Value == nil && off < passEnd && !lastKept {
					if exp := time.UnixMilli(rec.Timestamp).Add(cfg.TombstoneRetention).UnixMilli(); recheck == 0 || exp < recheck {
						recheck = max(exp, 1)
					}
				}
			}
			kept += len(keep)
			dropped += len(recs) - len(keep)
			switch {
			case len(keep) == len(recs):
				r.data = append(r.data, b.Raw...)
			case len(keep) > 0:
				r.data, err = recordbatch.Append(r.data, keep, recordbatch.BuildOptions{BaseOffset: b.BaseOffset, Compression: b.Compression(),
					ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence})
				if err != nil {
					return fmt.Errorf("compaction: rebuild batch at %d: %w", b.BaseOffset, err)
				}
			default:
				continue
			}
			g.ends = append(g.ends, len(r.data))
		}
		if dropped == 0 && len(g.old) == 0 {
			// Unchanged and no segment to join: the entry stays as it is.
			r.data, g.ends = r.data[:mark], g.ends[:markEnds]
			continue
		}
		g.old = append(g.old, e)
		g.changed = g.changed || dropped > 0
		g.kept += kept
		g.dropped += dropped
		if len(g.ends) > 0 && int64(len(r.data)) >= cfg.TargetBytes {
			if err := r.flush(ctx, g); err != nil {
				return err
			}
		}
	}
	if len(g.old) > 0 {
		if len(g.ends) == 0 {
			return fmt.Errorf("compaction: %d/%d: entries from %d hold no batch to keep", r.p.StreamID, r.p.Partition, g.old[0].BaseOffset)
		}
		if err := r.flush(ctx, g); err != nil {
			return err
		}
	}
	if err := r.c.points.set(ctx, r.p, coord.CleanPoint{Offset: passEnd, RecheckMs: recheck}); err != nil {
		return fmt.Errorf("compaction: %d/%d: %w", r.p.StreamID, r.p.Partition, err)
	}
	return nil
}

// renewLease renews the lease when a third of its TTL has passed since it was granted.
func (r *run) renewLease(ctx context.Context) error {
	cfg := &r.c.cfg
	if cfg.Now().Sub(r.renew) < cfg.LeaseTTL/3 {
		return nil
	}
	l, err := cfg.Meta.AcquireLease(ctx, r.p.StreamID, r.p.Partition, LeaseKind, cfg.Holder, cfg.LeaseTTL)
	if errors.Is(err, meta.ErrLeaseHeld) {
		return errRefused
	}
	if err != nil {
		return fmt.Errorf("compaction: renew lease %d/%d: %w", r.p.StreamID, r.p.Partition, err)
	}
	if l.Epoch != r.lease.Epoch {
		// It lapsed and was granted anew: someone may have worked meanwhile.
		r.lease = l
		return errRefused
	}
	r.lease, r.renew = l, cfg.Now()
	return nil
}

// flush writes g as one segment and swaps it in for g.old, then empties g. A group that
// dropped nothing (unchanged entries only) is not written.
func (r *run) flush(ctx context.Context, g *group) error {
	defer func() {
		*g = group{ends: g.ends[:0], old: g.old[:0]}
		r.data = r.data[:0]
	}()
	if !g.changed {
		return nil
	}
	cfg := &r.c.cfg
	base, end := g.old[0].BaseOffset, g.old[len(g.old)-1].End()
	w, err := segfmt.NewWriterBuffer(segfmt.Header{Encoding: segfmt.EncodingKafka, StreamID: r.p.StreamID, Partition: r.p.Partition,
		BaseOffset: base, EndOffset: end, CreatedMs: cfg.Now().UnixMilli()}, r.obj)
	if err != nil {
		return fmt.Errorf("compaction: %w", err)
	}
	w.Reserve(segfmt.Size(int64(len(r.data)), len(g.ends)))
	from := 0
	for _, to := range g.ends {
		if err := w.Add(r.data[from:to]); err != nil {
			return fmt.Errorf("compaction: segment [%d,%d): %w", base, end, err)
		}
		from = to
	}
	obj, info, err := w.Finish()
	if err != nil {
		return fmt.Errorf("compaction: %w", err)
	}
	r.obj = obj[:0]
	key, err := r.c.segmentKey(ctx, r.p.StreamID, g.old, segfmt.ObjectKey(r.p.StreamID, r.p.Partition, base, ulid.Make().String()))
	if err != nil {
		return fmt.Errorf("compaction: %d/%d: %w", r.p.StreamID, r.p.Partition, err)
	}
	if err := cfg.Bucket.Put(ctx, key, obj, objstore.IfAbsent()); err != nil {
		return fmt.Errorf("compaction: put %s: %w", key, err)
	}
	ne := meta.IndexEntry{BaseOffset: base, Count: end - base, Kind: meta.KindSegment, Object: key,
		Offset: info.DataOffset, Length: info.DataLength, MaxTimestamp: info.Header.MaxTimestamp}
	err = r.renewLease(ctx)
	if err == nil {
		err = cfg.Meta.SwapIndex(ctx, meta.IndexSwap{Lease: r.lease, Old: g.old, New: []meta.IndexEntry{ne}, StampMs: cfg.Now().UnixMilli()})
		if errors.Is(err, meta.ErrLeaseLost) || errors.Is(err, meta.ErrIndexChanged) {
			err = errRefused
		}
	}
	if err != nil {
		// An unanswered swap may have been applied: delete the segment only if nothing
		// references it.
		rewrite.DeleteUnreferenced(context.WithoutCancel(ctx), cfg.Meta, cfg.Bucket, cfg.Logger, key)
		if errors.Is(err, errRefused) {
			return err
		}
		return fmt.Errorf("compaction: swap %d/%d: %w", r.p.StreamID, r.p.Partition, err)
	}
	r.res.Entries += len(g.old)
	r.res.Segments++
	r.res.Dropped += g.dropped
	r.res.Kept += g.kept
	return nil
}
