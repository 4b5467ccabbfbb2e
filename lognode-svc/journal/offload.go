package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/segfmt"
)

// Offload: the journal's leader seals ranges of its partitions into segments in the
// bucket and truncates the journal behind them.
//
// A round (Member.Offload, every OffloadConfig.Interval on the leader) looks at each
// partition holding batches and seals a range when its retained bytes reach
// SegmentBytes, when its oldest retained batch has waited MaxAge (as this leader saw it),
// or, while the journal holds more than half of Config.MaxRetainedBytes, whatever it
// holds (largest partitions first); a partition sealed for a move (Seal) is sealed into
// segments at once, all of it. For a partition to seal:
//
//  1. Lookup the partition's state in the sequencer: its high watermark there is the end
//     of what is offloaded already. If it is past the journal's start, an earlier round
//     (on this leader or a previous one) committed a segment whose Trim did not land: the
//     journal is trimmed to it (step 5) and nothing is written.
//  2. Take the retained entries from the start, up to SegmentBytes (at least one entry),
//     and write their batches verbatim (offsets in) into one segfmt segment, built in
//     memory.
//  3. Put it under seg/<stream>/<partition>/<base>-<ULID>.seg with IfAbsent.
//  4. AppendSegments it to the partition's index under the partition's offload lease
//     (kind meta.LeaseOffload, holder OffloadConfig.Holder: the journal's, the same on
//     every member, so a new leader takes the lease over at once). The sequencer appends
//     only at its high watermark, so two leaders (one deposed) sealing the same range
//     commit one segment: the other is refused (meta.ErrIndexChanged) and deletes its
//     object once the sequencer says nothing references it. An append whose outcome is
//     unknown leaves its object; the next round's step 1 finds out.
//  5. Propose a Trim entry through the journal's Raft log: every member drops the
//     entries below the segment's end and records the segment (SegmentRef) in its state
//     and snapshot. After a round that trimmed, the leader takes a Raft snapshot (at most
//     every SnapshotEvery), so its log is compacted behind it.
//
// Readers find offloaded offsets through the sequencer's index like any stream's
// segments; the journal answers ErrOffloaded below its start.
//
// Memory: a round builds at most Parallel segments at once, each about SegmentBytes plus
// one append (Config.MaxEntryBytes); the leader remembers, per partition with retained
// batches, since when it saw its start (about 40 bytes each).

// OffloadIndex is what offload needs of the sequencer (meta.Client and
// meta.QuorumIndexClient).
type OffloadIndex interface {
	Lookup(ctx context.Context, streamID uint64, partition int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error)
	AcquireLease(ctx context.Context, streamID uint64, partition int32, kind, holder string, ttl time.Duration) (meta.Lease, error)
	Referenced(ctx context.Context, keys []string) ([]bool, error)
	meta.QuorumIndexClient
}

// OffloadConfig configures a member's offload (it runs while the member leads).
type OffloadConfig struct {
	Bucket objstore.Bucket
	Index  OffloadIndex
	// Holder is the offload lease's holder: the same on every member of the journal
	// (default "journal-<journal id>").
	Holder string

	SegmentBytes  int64         // default 16 MiB: a partition holding this much is sealed
	MaxAge        time.Duration // default 30 s: a partition whose oldest batch waited this long is sealed
	Interval      time.Duration // default 1 s between rounds
	Parallel      int           // default 4 partitions sealed at once
	LeaseTTL      time.Duration // default 60 s
	SnapshotEvery time.Duration // default 10 s: at most one Raft snapshot after trims per this

	Logger *slog.Logger
	Now    func() time.Time // default time.Now
}

func (c *OffloadConfig) defaults(journal string) error {
	if c.Bucket == nil || c.Index == nil {
		return errors.New("journal: offload needs a bucket and the sequencer's index")
	}
	if c.Holder == "" {
		c.Holder = "journal-" + journal
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 16 << 20
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 30 * time.Second
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Parallel <= 0 {
		c.Parallel = 4
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = time.Minute
	}
	if c.SnapshotEvery <= 0 {
		c.SnapshotEvery = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// OffloadStats is what one round did.
type OffloadStats struct {
	Segments int   // segments written and committed
	Bytes    int64 // bytes of batches they hold
	Trimmed  int   // partitions trimmed (after a segment of this round or an earlier one)
	Refused  int   // segments another leader's append beat (their objects deleted)
}

// offloader is a member's offload state (the leader's bookkeeping).
type offloader struct {
	cfg      OffloadConfig
	mu       sync.Mutex
	seen     map[Partition]seenStart // since when this leader saw each partition's start
	leases   map[Partition]leaseAt
	lastSnap time.Time
	running  sync.Mutex // one round at a time
}

type seenStart struct {
	start int64
	at    time.Time
}

type leaseAt struct {
	l  meta.Lease
	at time.Time
}

// StartOffload starts offloading while m leads its journal (OffloadConfig), until the
// member closes.
func (m *Member) StartOffload(cfg OffloadConfig) error {
	if err := m.setOffload(cfg); err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(m.off.cfg.Interval)
		defer t.Stop()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-m.done
			cancel()
		}()
		for {
			select {
			case <-m.done:
				return
			case <-t.C:
			}
			if !m.IsLeader() {
				m.off.forget()
				continue
			}
			if _, err := m.Offload(ctx); err != nil && ctx.Err() == nil {
				m.off.cfg.Logger.Warn("journal offload", "journal", m.cfg.Journal, "err", err)
			}
		}
	}()
	return nil
}

func (m *Member) setOffload(cfg OffloadConfig) error {
	if err := cfg.defaults(m.cfg.Journal); err != nil {
		return err
	}
	m.off = &offloader{cfg: cfg, seen: map[Partition]seenStart{}, leases: map[Partition]leaseAt{}}
	return nil
}

func (o *offloader) forget() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.seen)
	clear(o.leases)
}

// candidate is a partition with retained batches, as a round sees it.
type candidate struct {
	p            Partition
	start, bytes int64
	sealed       bool
}

// Offload runs one round now (on the leader; a follower's round does nothing). A round's
// error is the first partition's error; the other partitions are still offloaded.
func (m *Member) Offload(ctx context.Context) (OffloadStats, error) {
	var st OffloadStats
	o := m.off
	if o == nil {
		return st, errors.New("journal: offload is not configured")
	}
	o.running.Lock()
	defer o.running.Unlock()
	if !m.IsLeader() {
		return st, nil
	}
	now := o.cfg.Now()
	var cands []candidate
	m.fsm.mu.RLock()
	retained := m.fsm.st.Retained()
	for k, pt := range m.fsm.st.parts {
		if pt.bytes > 0 {
			cands = append(cands, candidate{p: k, start: pt.start, bytes: pt.bytes, sealed: pt.sealed})
		}
	}
	m.fsm.mu.RUnlock()
	pressure := retained > m.cfg.MaxRetainedBytes/2
	o.mu.Lock()
	var due []candidate
	live := make(map[Partition]bool, len(cands))
	for _, c := range cands {
		live[c.p] = true
		s, ok := o.seen[c.p]
		if !ok || s.start != c.start {
			s = seenStart{start: c.start, at: now}
			o.seen[c.p] = s
		}
		if pressure || c.sealed || c.bytes >= o.cfg.SegmentBytes || now.Sub(s.at) >= o.cfg.MaxAge {
			due = append(due, c)
		}
	}
	for k := range o.seen {
		if !live[k] {
			delete(o.seen, k)
		}
	}
	o.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].bytes > due[j].bytes })

	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, o.cfg.Parallel)
	var wg sync.WaitGroup
	for _, c := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			// A partition holding several segments' worth is sealed segment by segment
			// (at most maxSealsPerRound of them in one round).
			for n := 0; n < maxSealsPerRound; n++ {
				ps, err := m.offloadPartition(ctx, c.p)
				mu.Lock()
				st.Segments += ps.Segments
				st.Bytes += ps.Bytes
				st.Trimmed += ps.Trimmed
				st.Refused += ps.Refused
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
				if left := m.partBytes(c.p); err != nil || ps.Trimmed == 0 || left == 0 || (left < o.cfg.SegmentBytes && !c.sealed) {
					return
				}
			}
		}()
	}
	wg.Wait()
	if st.Trimmed > 0 && time.Since(o.lastSnap) >= o.cfg.SnapshotEvery {
		o.lastSnap = time.Now()
		if err := m.Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && first == nil {
			first = fmt.Errorf("journal %s: snapshot after trim: %w", m.cfg.Journal, err)
		}
	}
	return st, first
}

// maxSealsPerRound bounds the segments one round writes for one partition.
const maxSealsPerRound = 64

// partBytes is the bytes p holds in the journal.
func (m *Member) partBytes(p Partition) int64 {
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	if pt := m.fsm.st.parts[p]; pt != nil {
		return pt.bytes
	}
	return 0
}

// offloadPartition seals one range of p (or trims to what the index already covers).
func (m *Member) offloadPartition(ctx context.Context, p Partition) (OffloadStats, error) {
	var st OffloadStats
	o := m.off
	where := fmt.Sprintf("journal %s: offload %s", m.cfg.Journal, p)
	es, ps, err := o.cfg.Index.Lookup(ctx, p.Stream, int32(p.Partition), 0, 0)
	if err != nil {
		return st, fmt.Errorf("%s: lookup: %w", where, err)
	}
	view := m.sealView(p, o.cfg.SegmentBytes)
	switch {
	case view.count == 0:
		return st, nil
	case ps.HighWatermark > view.start:
		// An earlier round committed [.., hwm) and its Trim did not land: trim to it.
		if es, _, err = o.cfg.Index.Lookup(ctx, p.Stream, int32(p.Partition), ps.HighWatermark-1, 1); err != nil || len(es) == 0 {
			return st, fmt.Errorf("%s: the index covers [%d, %d) past the journal's start %d; its last entry: %v",
				where, ps.LogStart, ps.HighWatermark, view.start, err)
		}
		e := es[0]
		if _, err := m.TrimTo(ctx, Trim{Partition: p, Offset: e.End(), Segment: SegmentRef{Key: e.Object, Base: e.BaseOffset, End: e.End()}}); err != nil {
			return st, fmt.Errorf("%s: trim to the index's %d: %w", where, e.End(), err)
		}
		st.Trimmed++
		return st, nil
	case ps.HighWatermark < view.start:
		return st, fmt.Errorf("%s: the index ends at %d, before the journal's start %d: not offloaded", where, ps.HighWatermark, view.start)
	}
	entry, err := o.write(ctx, p, view)
	if err != nil {
		return st, fmt.Errorf("%s: %w", where, err)
	}
	lease, err := o.lease(ctx, p)
	if err != nil {
		o.deleteUnreferenced(ctx, entry.Object)
		return st, fmt.Errorf("%s: lease: %w", where, err)
	}
	err = o.cfg.Index.AppendSegments(ctx, meta.SegmentAppend{Lease: lease, Entries: []meta.IndexEntry{entry}, StampMs: o.cfg.Now().UnixMilli()})
	switch {
	case errors.Is(err, meta.ErrIndexChanged), errors.Is(err, meta.ErrLeaseLost):
		// Another leader's segment came first (or the lease moved on): ours is referenced by
		// nothing, unless an earlier attempt of this very append was applied.
		o.dropLease(p)
		o.deleteUnreferenced(ctx, entry.Object)
		st.Refused++
		return st, nil
	case err != nil:
		// Outcome unknown: the object may be referenced now. The next round looks.
		return st, fmt.Errorf("%s: append segment [%d, %d): %w", where, entry.BaseOffset, entry.End(), err)
	}
	st.Segments++
	st.Bytes += view.bytes
	if _, err := m.TrimTo(ctx, Trim{Partition: p, Offset: entry.End(), Segment: SegmentRef{Key: entry.Object, Base: entry.BaseOffset, End: entry.End()}}); err != nil {
		return st, fmt.Errorf("%s: trim to %d: %w", where, entry.End(), err)
	}
	st.Trimmed++
	return st, nil
}

// sealed is the range a partition's next segment holds: whole entries from the start.
type sealed struct {
	start, end int64
	count      int
	bytes      int64
	data       [][]byte // the entries' batches (immutable, shared with the state)
}

// sealView takes p's retained entries from its start until they hold maxBytes (at least
// one).
func (m *Member) sealView(p Partition, maxBytes int64) sealed {
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	pt := m.fsm.st.parts[p]
	var v sealed
	if pt == nil || len(pt.entries) == 0 {
		return v
	}
	v.start, v.end = pt.entries[0].base, pt.entries[0].base
	for _, e := range pt.entries {
		if v.count > 0 && v.bytes+int64(len(e.data)) > maxBytes {
			break
		}
		v.data = append(v.data, e.data)
		v.bytes += int64(len(e.data))
		v.end = e.base + e.count
		v.count++
	}
	return v
}

// write builds v's segment and puts it (IfAbsent, under a fresh key).
func (o *offloader) write(ctx context.Context, p Partition, v sealed) (meta.IndexEntry, error) {
	w, err := segfmt.NewWriterBuffer(segfmt.Header{Encoding: segfmt.EncodingKafka, StreamID: p.Stream, Partition: int32(p.Partition),
		BaseOffset: v.start, EndOffset: v.end, CreatedMs: o.cfg.Now().UnixMilli()}, make([]byte, 0, segfmt.Size(v.bytes, v.count*4)))
	if err != nil {
		return meta.IndexEntry{}, err
	}
	for _, d := range v.data {
		for rest := d; len(rest) > 0; {
			b, tail, ok := cutBatch(rest)
			if !ok {
				return meta.IndexEntry{}, fmt.Errorf("%w: a stored batch does not frame at offsets [%d, %d)", ErrBadBatches, v.start, v.end)
			}
			if err := w.Add(b); err != nil {
				return meta.IndexEntry{}, err
			}
			rest = tail
		}
	}
	obj, info, err := w.Finish()
	if err != nil {
		return meta.IndexEntry{}, err
	}
	key := segfmt.ObjectKey(p.Stream, int32(p.Partition), v.start, ulid.Make().String())
	if err := o.cfg.Bucket.Put(ctx, key, obj, objstore.IfAbsent()); err != nil {
		return meta.IndexEntry{}, fmt.Errorf("put %s: %w", key, err)
	}
	return meta.IndexEntry{BaseOffset: v.start, Count: v.end - v.start, Kind: meta.KindSegment, Object: key,
		Offset: info.DataOffset, Length: info.DataLength, MaxTimestamp: info.Header.MaxTimestamp}, nil
}

// cutBatch cuts the first RecordBatch (length-framed) off b.
func cutBatch(b []byte) (batch, rest []byte, ok bool) {
	if len(b) < 12 {
		return nil, nil, false
	}
	n := 12 + int64(int32(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])))
	if n < 12 || n > int64(len(b)) {
		return nil, nil, false
	}
	return b[:n:n], b[n:], true
}

// lease is the partition's offload lease, renewed once a third of its ttl has passed.
func (o *offloader) lease(ctx context.Context, p Partition) (meta.Lease, error) {
	o.mu.Lock()
	la, ok := o.leases[p]
	o.mu.Unlock()
	if ok && time.Since(la.at) < o.cfg.LeaseTTL/3 {
		return la.l, nil
	}
	l, err := o.cfg.Index.AcquireLease(ctx, p.Stream, int32(p.Partition), meta.LeaseOffload, o.cfg.Holder, o.cfg.LeaseTTL)
	if err != nil {
		return meta.Lease{}, err
	}
	o.mu.Lock()
	o.leases[p] = leaseAt{l: l, at: time.Now()}
	o.mu.Unlock()
	return l, nil
}

func (o *offloader) dropLease(p Partition) {
	o.mu.Lock()
	delete(o.leases, p)
	o.mu.Unlock()
}

// deleteUnreferenced deletes a segment no index entry references (else leaves it to gc).
func (o *offloader) deleteUnreferenced(ctx context.Context, key string) {
	ctx = context.WithoutCancel(ctx)
	refd, err := o.cfg.Index.Referenced(ctx, []string{key})
	if err != nil || len(refd) != 1 || refd[0] {
		if err != nil {
			o.cfg.Logger.Warn("journal offload: cannot tell whether a refused segment is referenced; left to gc", "key", key, "err", err)
		}
		return
	}
	if err := o.cfg.Bucket.Delete(ctx, key); err != nil {
		o.cfg.Logger.Warn("journal offload: delete refused segment", "key", key, "err", err)
	}
}
