// Package compaction is the compaction function's handler (spec §5): for streams with
// cleanup_policy=compact it keeps the latest record per key, drops tombstones older than
// the tombstone retention, writes new segments and swaps index entries.
//
// # Basics
//
// Partition, under the partition's "compact" lease:
//
//  1. Lookups the partition's leading run of segment entries (from the log start up to the
//     first WAL entry: unsegmented data is left to the segmenter) and range-GETs their data
//     regions (up to MaxBytes).
//  2. Finds the latest offset of every key over the run. A record is dropped when a later
//     record of the run has its key, or when it is a tombstone (null value) that is its key's
//     latest and whose timestamp is older than now - TombstoneRetention. Records with a null
//     key and control batches are kept.
//  3. If nothing is dropped it stops: running it again changes nothing. Otherwise it takes
//     the smallest run of entries holding every change, rebuilds their batches (a batch that
//     lost records is re-encoded with recordbatch.Append keeping each record's offset delta,
//     the base offset, codec and producer fields; a batch that lost none is kept verbatim; a
//     batch that lost all is dropped), cuts them into segments of about TargetBytes, each
//     standing for a contiguous range of offsets (with gaps inside, which fetch skips), Puts
//     them with IfAbsent and swaps them in for the old entries. The sequencer retires the old
//     segments; gc deletes them after grace.
//
// Offsets never change: a consumer that committed an offset resumes at the next record kept.
//
// # Caveats
//
//   - Only records of the run are compared: a key's value in the WAL tail does not yet
//     remove its older values in segments (the next run after segmenting does).
//   - If every record of the changed run would go, its last batch is kept as it was (a
//     segment holds at least one batch).
//   - A re-encoded batch loses the log-append-time and transactional attribute bits
//     (recordbatch.Append writes create-time, non-transactional batches); control batches
//     are never re-encoded.
//   - Sweeps skip a partition whose segment run is unchanged since it was last found clean
//     by this Compactor, until its earliest kept tombstone expires; a new process reads
//     every compacted partition once.
//   - The run is held in memory: at most MaxBytes of segment data (default 512 MiB).
package compaction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

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
	DefaultMaxBytes           = 512 << 20
	DefaultLeaseTTL           = 5 * time.Minute
	LeaseKind                 = meta.LeaseCompact
)

// ErrConfig: the configuration cannot work.
var ErrConfig = errors.New("compaction: invalid config")

// Meta is what compaction needs from the sequencer (a subset of meta.Client).
type Meta = rewrite.Meta

// Config configures a Compactor.
type Config struct {
	Bucket             objstore.Bucket // required
	Meta               Meta            // required
	TombstoneRetention time.Duration   // default 24 h
	TargetBytes        int64           // segment size; default 128 MiB
	MaxBytes           int64           // segment data read per run; default 512 MiB
	LeaseTTL           time.Duration   // default 5 min
	Holder             string          // default "compactor-" + random
	Now                func() time.Time
	Logger             *slog.Logger
}

// Compactor compacts partitions. Safe for concurrent use.
type Compactor struct {
	cfg   Config
	mu    sync.Mutex
	clean map[[2]int64]cleanState
}

type cleanState struct {
	objects []string  // the segment run found clean
	recheck time.Time // when its earliest kept tombstone expires (zero: none)
}

// New returns a Compactor.
func New(cfg Config) (*Compactor, error) {
	switch {
	case cfg.Bucket == nil || cfg.Meta == nil:
		return nil, fmt.Errorf("%w: Bucket and Meta are required", ErrConfig)
	case cfg.TombstoneRetention < 0 || cfg.TargetBytes < 0 || cfg.MaxBytes < 0 || cfg.LeaseTTL < 0:
		return nil, fmt.Errorf("%w: negative setting", ErrConfig)
	}
	if cfg.TombstoneRetention == 0 {
		cfg.TombstoneRetention = DefaultTombstoneRetention
	}
	if cfg.TargetBytes == 0 {
		cfg.TargetBytes = DefaultTargetBytes
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
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
	return &Compactor{cfg: cfg, clean: map[[2]int64]cleanState{}}, nil
}

// Handler returns the function's invocation router (scheduled events run Sweep).
func (c *Compactor) Handler() notify.Handler {
	return notify.Handler{Sweep: c.Sweep}
}

// Result says what one Partition call did.
type Result struct {
	Entries  int // old segment entries replaced
	Segments int // new segments written
	Dropped  int // records removed
	Kept     int // records of the replaced entries kept
	Busy     bool
	Refused  bool
}

// Sweep compacts every partition of every compacted stream.
func (c *Compactor) Sweep(ctx context.Context) error {
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

// segment is one old segment entry with its data region and batches.
type segment struct {
	entry   meta.IndexEntry
	batches []batchPlan
	changed bool
}

type batchPlan struct {
	batch   recordbatch.Batch
	recs    []recordbatch.Record // nil for control batches (kept verbatim)
	keep    []bool
	dropped int
}

// Partition compacts one partition (see the package comment).
func (c *Compactor) Partition(ctx context.Context, streamID uint64, partition int32) (Result, error) {
	var res Result
	pk := [2]int64{int64(streamID), int64(partition)}
	run, err := c.segmentRun(ctx, streamID, partition)
	if err != nil {
		if errors.Is(err, meta.ErrStreamNotFound) || errors.Is(err, meta.ErrPartitionNotFound) {
			return res, nil
		}
		return res, err
	}
	if len(run) == 0 {
		return res, nil
	}
	objs := make([]string, len(run))
	for i, e := range run {
		objs[i] = e.Object
	}
	c.mu.Lock()
	cs, ok := c.clean[pk]
	c.mu.Unlock()
	if ok && slices.Equal(cs.objects, objs) && (cs.recheck.IsZero() || c.cfg.Now().Before(cs.recheck)) {
		return res, nil
	}
	lease, err := c.cfg.Meta.AcquireLease(ctx, streamID, partition, LeaseKind, c.cfg.Holder, c.cfg.LeaseTTL)
	if errors.Is(err, meta.ErrLeaseHeld) {
		res.Busy = true
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("compaction: lease %d/%d: %w", streamID, partition, err)
	}
	defer func() { _ = c.cfg.Meta.ReleaseLease(context.WithoutCancel(ctx), lease) }()

	segs, recheck, err := c.plan(ctx, run)
	if err != nil {
		return res, err
	}
	first, last := -1, -1
	for i, s := range segs {
		if s.changed {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		c.mu.Lock()
		c.clean[pk] = cleanState{objects: objs, recheck: recheck}
		c.mu.Unlock()
		return res, nil
	}
	segs = segs[first : last+1]
	newEntries, err := c.write(ctx, streamID, partition, segs, &res)
	if err != nil {
		return res, err
	}
	old := make([]meta.IndexEntry, len(segs))
	for i, s := range segs {
		old[i] = s.entry
	}
	err = c.cfg.Meta.SwapIndex(ctx, meta.IndexSwap{Lease: lease, Old: old, New: newEntries, StampMs: c.cfg.Now().UnixMilli()})
	if errors.Is(err, meta.ErrLeaseLost) || errors.Is(err, meta.ErrIndexChanged) {
		keys := make([]string, len(newEntries))
		for i, e := range newEntries {
			keys[i] = e.Object
		}
		rewrite.DeleteUnreferenced(context.WithoutCancel(ctx), c.cfg.Meta, c.cfg.Bucket, c.cfg.Logger, keys...)
		res.Refused = true
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("compaction: swap %d/%d: %w", streamID, partition, err)
	}
	res.Entries = len(old)
	res.Segments = len(newEntries)
	c.cfg.Logger.Info("compacted a partition", "stream", streamID, "partition", partition, "entries", res.Entries,
		"segments", res.Segments, "dropped", res.Dropped, "kept", res.Kept)
	return res, nil
}

// segmentRun returns the leading run of segment entries from the log start, up to MaxBytes.
func (c *Compactor) segmentRun(ctx context.Context, streamID uint64, partition int32) ([]meta.IndexEntry, error) {
	_, st, err := c.cfg.Meta.Lookup(ctx, streamID, partition, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("compaction: lookup %d/%d: %w", streamID, partition, err)
	}
	var run []meta.IndexEntry
	var bytes int64
	for from := st.LogStart; from < st.HighWatermark; {
		es, _, err := c.cfg.Meta.Lookup(ctx, streamID, partition, from, 1000)
		if errors.Is(err, meta.ErrOffsetOutOfRange) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("compaction: lookup %d/%d from %d: %w", streamID, partition, from, err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			if e.Kind != meta.KindSegment || (len(run) > 0 && bytes+e.Length > c.cfg.MaxBytes) {
				return run, nil
			}
			run = append(run, e)
			bytes += e.Length
		}
		from = es[len(es)-1].End()
	}
	return run, nil
}

// plan reads the run and marks what to keep. recheck is when the earliest kept tombstone
// expires (zero: none kept).
func (c *Compactor) plan(ctx context.Context, run []meta.IndexEntry) ([]segment, time.Time, error) {
	segs := make([]segment, len(run))
	latest := map[string]int64{}
	for i, e := range run {
		data, err := c.cfg.Bucket.GetRange(ctx, e.Object, e.Offset, e.Length)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("compaction: read %s: %w", e.Object, err)
		}
		segs[i].entry = e
		for rest := data; len(rest) > 0; {
			b, tail, err := recordbatch.Parse(rest)
			if err != nil {
				return nil, time.Time{}, fmt.Errorf("compaction: %s: %w", e.Object, err)
			}
			rest = tail
			bp := batchPlan{batch: b}
			if !b.Control() {
				if bp.recs, err = b.Records(); err != nil {
					return nil, time.Time{}, fmt.Errorf("compaction: %s at %d: %w", e.Object, b.BaseOffset, err)
				}
				for _, r := range bp.recs {
					if r.Key != nil {
						latest[string(r.Key)] = b.BaseOffset + int64(r.OffsetDelta)
					}
				}
			}
			segs[i].batches = append(segs[i].batches, bp)
		}
	}
	horizon := c.cfg.Now().Add(-c.cfg.TombstoneRetention).UnixMilli()
	var recheck time.Time
	for i := range segs {
		for j := range segs[i].batches {
			bp := &segs[i].batches[j]
			bp.keep = make([]bool, len(bp.recs))
			for k, r := range bp.recs {
				off := bp.batch.BaseOffset + int64(r.OffsetDelta)
				keep := r.Key == nil || (latest[string(r.Key)] == off && (r.Value != nil || r.Timestamp >= horizon))
				if keep && r.Key != nil && r.Value == nil {
					exp := time.UnixMilli(r.Timestamp).Add(c.cfg.TombstoneRetention)
					if recheck.IsZero() || exp.Before(recheck) {
						recheck = exp
					}
				}
				bp.keep[k] = keep
				if !keep {
					bp.dropped++
					segs[i].changed = true
				}
			}
		}
	}
	return segs, recheck, nil
}

// write rebuilds segs into new segments of about TargetBytes, each standing for the offsets
// of the old entries it replaces, and Puts them.
func (c *Compactor) write(ctx context.Context, streamID uint64, partition int32, segs []segment, res *Result) ([]meta.IndexEntry, error) {
	type group struct {
		base, end int64
		batches   [][]byte
		bytes     int64
	}
	var groups []*group
	cur := &group{base: segs[0].entry.BaseOffset}
	for _, s := range segs {
		for _, bp := range s.batches {
			res.Dropped += bp.dropped
			switch {
			case bp.recs == nil || bp.dropped == 0:
				cur.batches = append(cur.batches, bp.batch.Raw)
				cur.bytes += int64(len(bp.batch.Raw))
				res.Kept += len(bp.recs)
			case bp.dropped < len(bp.recs):
				var kept []recordbatch.Record
				for k, r := range bp.recs {
					if bp.keep[k] {
						kept = append(kept, r)
					}
				}
				b, err := recordbatch.Append(nil, kept, recordbatch.BuildOptions{BaseOffset: bp.batch.BaseOffset, Compression: bp.batch.Compression(),
					ProducerID: bp.batch.ProducerID, ProducerEpoch: bp.batch.ProducerEpoch, BaseSequence: bp.batch.BaseSequence})
				if err != nil {
					return nil, fmt.Errorf("compaction: rebuild batch at %d: %w", bp.batch.BaseOffset, err)
				}
				cur.batches = append(cur.batches, b)
				cur.bytes += int64(len(b))
				res.Kept += len(kept)
			}
		}
		cur.end = s.entry.End()
		if cur.bytes >= c.cfg.TargetBytes {
			groups = append(groups, cur)
			cur = &group{base: cur.end}
		}
	}
	if cur.end > cur.base {
		groups = append(groups, cur)
	}
	// Fold batchless groups into a neighbour: every segment needs a batch.
	var out []*group
	for _, g := range groups {
		if len(out) > 0 && (len(g.batches) == 0 || len(out[len(out)-1].batches) == 0) {
			prev := out[len(out)-1]
			prev.batches = append(prev.batches, g.batches...)
			prev.bytes += g.bytes
			prev.end = g.end
			continue
		}
		out = append(out, g)
	}
	if len(out[0].batches) == 0 { // every record went: keep the run's last batch as it was
		lastSeg := segs[len(segs)-1]
		lb := lastSeg.batches[len(lastSeg.batches)-1]
		out[0].batches = [][]byte{lb.batch.Raw}
		res.Dropped -= lb.dropped
		res.Kept += len(lb.recs)
	}
	var entries []meta.IndexEntry
	var written []string
	cleanup := func() {
		for _, k := range written {
			_ = c.cfg.Bucket.Delete(context.WithoutCancel(ctx), k)
		}
	}
	for _, g := range out {
		w, err := segfmt.NewWriter(segfmt.Header{Encoding: segfmt.EncodingKafka, StreamID: streamID, Partition: partition,
			BaseOffset: g.base, EndOffset: g.end, CreatedMs: c.cfg.Now().UnixMilli()})
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("compaction: %w", err)
		}
		for _, b := range g.batches {
			if err := w.Add(b); err != nil {
				cleanup()
				return nil, fmt.Errorf("compaction: segment [%d,%d): %w", g.base, g.end, err)
			}
		}
		obj, info, err := w.Finish()
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("compaction: %w", err)
		}
		key := segfmt.ObjectKey(streamID, partition, g.base, ulid.Make().String())
		if err := c.cfg.Bucket.Put(ctx, key, obj, objstore.IfAbsent()); err != nil {
			cleanup()
			return nil, fmt.Errorf("compaction: put %s: %w", key, err)
		}
		written = append(written, key)
		entries = append(entries, meta.IndexEntry{BaseOffset: g.base, Count: g.end - g.base, Kind: meta.KindSegment, Object: key,
			Offset: info.DataOffset, Length: info.DataLength, MaxTimestamp: info.Header.MaxTimestamp})
	}
	return entries, nil
}
