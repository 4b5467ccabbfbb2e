// Package reader is the log node's read path (spec §6).
//
// # Basics
//
// A fetch of (stream, partition, offset) resolves the offset through the node's cached
// offset index, kept current by the sequencer's watch stream and by this node's own
// commits, then serves the bytes from, in order: the tail cache (filled at write time), the
// chunk cache (recent range GETs), a range GET of the WAL chunk or segment region. Every
// batch it returns has its baseOffset patched to the offset the sequencer assigned.
//
// Long-poll: a fetch at the high watermark waits for the partition's high watermark to move
// (a watch event or a local commit) until max wait passes.
//
// # Caveats
//
// Batches are shared between callers and must not be modified. The partition map holds
// only partitions someone fetched or this node wrote; others are looked up on demand.
// Lock order: Reader.mu, then a cache's own mutex; never the other way.
package reader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/segfmt"
	"github.com/loamhq/loam/shared/walfmt"
)

// ErrOutOfRange wraps meta.ErrOffsetOutOfRange with the partition's bounds.
type ErrOutOfRange struct {
	Offset, LogStart, HighWatermark int64
}

func (e *ErrOutOfRange) Error() string {
	return fmt.Sprintf("offset %d is out of range: the partition holds offsets [%d, %d)", e.Offset, e.LogStart, e.HighWatermark)
}

// Unwrap makes errors.Is(err, meta.ErrOffsetOutOfRange) hold.
func (e *ErrOutOfRange) Unwrap() error { return meta.ErrOffsetOutOfRange }

// Config configures a Reader.
type Config struct {
	Bucket          objstore.Bucket
	Meta            meta.Client
	TailCacheBytes  int64 // default 256 MiB
	ChunkCacheBytes int64 // default 256 MiB
	IndexEntries    int   // cached index entries per partition, default 4096
	// DiskCacheDir and DiskCacheBytes bound an on-disk LRU of segment blocks read from the
	// bucket (the spec's NVMe cache). Empty dir: none.
	DiskCacheDir   string
	DiskCacheBytes int64
	Logger         *slog.Logger
	Metrics        *Metrics
}

// Result is what a fetch returns.
type Result struct {
	Batches       [][]byte // whole batches, baseOffset patched; the first may start before the fetch offset
	NextOffset    int64
	HighWatermark int64
	LogStart      int64
}

type pkey struct {
	stream    uint64
	partition int32
}

type partition struct {
	logStart, hwm int64
	entries       []meta.IndexEntry // a contiguous run of the index, or empty
	notify        chan struct{}     // closed when hwm or logStart moves
}

// Reader serves fetches.
type Reader struct {
	cfg    Config
	tail   *spanCache
	chunks *spanCache
	disk   *diskCache // nil: no disk cache
	segs   *infoCache

	mu    sync.Mutex
	parts map[pkey]*partition

	flightMu sync.Mutex
	flight   map[spanKey]*flightCall

	drainOnce sync.Once
	draining  chan struct{} // closed by Drain
}

// New returns a Reader.
func New(cfg Config) (*Reader, error) {
	if cfg.Bucket == nil || cfg.Meta == nil {
		return nil, errors.New("reader: Bucket and Meta are required")
	}
	if cfg.TailCacheBytes <= 0 {
		cfg.TailCacheBytes = 256 << 20
	}
	if cfg.ChunkCacheBytes <= 0 {
		cfg.ChunkCacheBytes = 256 << 20
	}
	if cfg.IndexEntries <= 0 {
		cfg.IndexEntries = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var disk *diskCache
	if cfg.DiskCacheDir != "" {
		var err error
		if disk, err = openDiskCache(cfg.DiskCacheDir, cfg.DiskCacheBytes); err != nil {
			return nil, err
		}
	}
	return &Reader{
		cfg:      cfg,
		disk:     disk,
		segs:     newInfoCache(4096),
		tail:     newSpanCache(cfg.TailCacheBytes),
		chunks:   newSpanCache(cfg.ChunkCacheBytes),
		parts:    make(map[pkey]*partition),
		flight:   make(map[spanKey]*flightCall),
		draining: make(chan struct{}),
	}, nil
}

// Drain ends every long-poll at once, and every later one before it waits: each answers
// with what it has (no batches at the high watermark), as when its wait runs out. A node
// calls it when it begins to stop, so open polls do not hold the shutdown for their wait.
// Fetches of data below the high watermark are served as before.
func (r *Reader) Drain() { r.drainOnce.Do(func() { close(r.draining) }) }

// Committed records a chunk this node committed: it fills the tail cache and advances the
// partition. All offsets below the chunk's end are committed, since the sequencer applies
// commits in order.
func (r *Reader) Committed(streamID uint64, partition int32, e meta.IndexEntry, batches []byte) {
	r.tail.put(spanKey{stream: streamID, partition: partition, base: e.BaseOffset}, &span{base: e.BaseOffset, end: e.End(), data: batches})
	if m := r.cfg.Metrics; m != nil {
		m.tailBytes.Set(float64(r.tail.size()))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.parts[pkey{streamID, partition}]
	if p == nil {
		return
	}
	r.addEntriesLocked(p, []meta.IndexEntry{e})
	r.advanceLocked(p, p.logStart, e.End())
}

// Apply applies one watch event.
func (r *Reader) Apply(ev meta.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Reset {
		for k, p := range r.parts {
			delete(r.parts, k)
			close(p.notify) // waiters re-resolve
		}
		return
	}
	for _, u := range ev.Partitions {
		if u.Replaced {
			// Entries were swapped (segmenting, compaction) or trimmed: what the tail
			// cache holds may no longer be what the index serves (compaction drops
			// records), so it goes too.
			r.tail.dropPartition(pkey{u.StreamID, u.Partition})
		}
		p := r.parts[pkey{u.StreamID, u.Partition}]
		if p == nil {
			if u.Replaced || len(u.Added) == 0 {
				continue
			}
			// A partition written to: the update carries its whole state, so learn it
			// (the node can then serve it even while the sequencer is out of reach).
			p = &partition{logStart: u.LogStart, hwm: u.HighWatermark, notify: make(chan struct{})}
			r.parts[pkey{u.StreamID, u.Partition}] = p
			p.hwm = u.Added[0].BaseOffset // addEntriesLocked keeps a run that reaches the HWM
			r.addEntriesLocked(p, u.Added)
			p.hwm = u.HighWatermark
			continue
		}
		if u.Replaced {
			p.entries = nil
		} else {
			r.addEntriesLocked(p, u.Added)
		}
		r.advanceLocked(p, u.LogStart, u.HighWatermark)
	}
}

// Forget drops what the reader knows of a stream (deleted or recreated).
func (r *Reader) Forget(streamID uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, p := range r.parts {
		if k.stream == streamID {
			delete(r.parts, k)
			close(p.notify)
		}
	}
	r.tail.dropStream(streamID)
	r.chunks.dropStream(streamID)
}

func (r *Reader) addEntriesLocked(p *partition, added []meta.IndexEntry) {
	for _, e := range added {
		n := len(p.entries)
		switch {
		case n == 0:
			// Only a run that reaches the high watermark is kept: start one at the head.
			if e.BaseOffset == p.hwm || e.BaseOffset <= p.hwm && e.End() > p.hwm {
				p.entries = append(p.entries, e)
			}
		case e.BaseOffset == p.entries[n-1].End():
			p.entries = append(p.entries, e)
		case e.End() <= p.entries[n-1].End():
			// Already known (a local commit and its watch event).
		default:
			p.entries = nil // a gap: look up again
		}
	}
	if over := len(p.entries) - r.cfg.IndexEntries; over > 0 {
		p.entries = append(p.entries[:0:0], p.entries[over:]...)
	}
}

func (r *Reader) advanceLocked(p *partition, logStart, hwm int64) {
	moved := false
	if hwm > p.hwm {
		p.hwm = hwm
		moved = true
	}
	if logStart > p.logStart {
		p.logStart = logStart
		moved = true
		for len(p.entries) > 0 && p.entries[0].End() <= logStart {
			p.entries = p.entries[1:]
		}
	}
	if moved {
		close(p.notify)
		p.notify = make(chan struct{})
	}
}

// state returns the partition's bounds and its notify channel, loading it if unknown.
func (r *Reader) state(ctx context.Context, k pkey) (logStart, hwm int64, notify chan struct{}, err error) {
	r.mu.Lock()
	p := r.parts[k]
	if p != nil {
		defer r.mu.Unlock()
		return p.logStart, p.hwm, p.notify, nil
	}
	r.mu.Unlock()
	if err := r.load(ctx, k); err != nil {
		return 0, 0, nil, err
	}
	return r.state(ctx, k)
}

// load asks the sequencer for the partition's bounds.
func (r *Reader) load(ctx context.Context, k pkey) error {
	_, st, err := r.cfg.Meta.Lookup(ctx, k.stream, k.partition, 0, 0)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.parts[k]; p != nil {
		r.advanceLocked(p, st.LogStart, st.HighWatermark)
	} else {
		r.parts[k] = &partition{logStart: st.LogStart, hwm: st.HighWatermark, notify: make(chan struct{})}
	}
	return nil
}

// entryFor returns the index entry holding offset.
func (r *Reader) entryFor(ctx context.Context, k pkey, offset int64) (meta.IndexEntry, error) {
	r.mu.Lock()
	if p := r.parts[k]; p != nil && len(p.entries) > 0 && offset >= p.entries[0].BaseOffset {
		es := p.entries
		lo, hi := 0, len(es)
		for lo < hi {
			m := (lo + hi) / 2
			if es[m].End() <= offset {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo < len(es) && es[lo].BaseOffset <= offset {
			e := es[lo]
			r.mu.Unlock()
			return e, nil
		}
	}
	r.mu.Unlock()
	entries, st, err := r.cfg.Meta.Lookup(ctx, k.stream, k.partition, offset, 64)
	if err != nil {
		return meta.IndexEntry{}, err
	}
	if n := len(entries); n > 0 && entries[n-1].End() >= st.HighWatermark {
		// The run reaches the head of the partition: keep it, so the node can serve these
		// offsets without the sequencer (watch events extend it).
		r.mu.Lock()
		if p := r.parts[k]; p != nil && len(p.entries) == 0 && st.HighWatermark >= p.hwm {
			p.entries = append([]meta.IndexEntry(nil), entries...)
		}
		r.mu.Unlock()
	}
	if len(entries) == 0 || entries[0].BaseOffset > offset || entries[0].End() <= offset {
		return meta.IndexEntry{}, fmt.Errorf("reader: stream %d partition %d: no index entry holds offset %d", k.stream, k.partition, offset)
	}
	return entries[0], nil
}

// Fetch returns batches of (streamID, partition) from offset, up to about maxBytes (always
// at least one batch when one exists), waiting up to maxWait for data at the high watermark.
func (r *Reader) Fetch(ctx context.Context, streamID uint64, partition int32, offset int64, maxBytes int, maxWait time.Duration) (Result, error) {
	k := pkey{streamID, partition}
	var timeout <-chan time.Time
	if maxWait > 0 && !r.isDraining() {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		logStart, hwm, notify, err := r.state(ctx, k)
		if err != nil {
			return Result{}, err
		}
		if offset < logStart || offset > hwm {
			return Result{LogStart: logStart, HighWatermark: hwm}, &ErrOutOfRange{Offset: offset, LogStart: logStart, HighWatermark: hwm}
		}
		if offset == hwm {
			if timeout == nil {
				return Result{NextOffset: offset, HighWatermark: hwm, LogStart: logStart}, nil
			}
			select {
			case <-notify:
				continue
			case <-timeout:
				timeout = nil
				continue
			case <-r.draining:
				timeout = nil
				continue
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
		}
		return r.collect(ctx, k, offset, maxBytes, logStart, hwm)
	}
}

func (r *Reader) isDraining() bool {
	select {
	case <-r.draining:
		return true
	default:
		return false
	}
}

func (r *Reader) collect(ctx context.Context, k pkey, offset int64, maxBytes int, logStart, hwm int64) (Result, error) {
	res := Result{NextOffset: offset, HighWatermark: hwm, LogStart: logStart}
	size := 0
	for res.NextOffset < hwm && (size < maxBytes || len(res.Batches) == 0) {
		sp := r.tail.find(k, res.NextOffset)
		if sp != nil {
			r.cfg.Metrics.hit("tail")
		} else {
			e, err := r.entryFor(ctx, k, res.NextOffset)
			if err != nil {
				if len(res.Batches) > 0 {
					break
				}
				return res, err
			}
			sp, err = r.span(ctx, k, e, res.NextOffset)
			if err != nil {
				if len(res.Batches) > 0 {
					break
				}
				return res, err
			}
		}
		n := 0
		sp.each(func(base, end int64, batch []byte) bool {
			if end <= res.NextOffset {
				return true
			}
			if size >= maxBytes && len(res.Batches) > 0 {
				return false
			}
			res.Batches = append(res.Batches, batch)
			res.NextOffset = end
			size += len(batch)
			n++
			return true
		})
		if n == 0 {
			// The span holds nothing at NextOffset (e.g. compacted away): skip past it.
			if sp.end <= res.NextOffset {
				return res, fmt.Errorf("reader: stream %d partition %d: span [%d,%d) does not advance offset %d", k.stream, k.partition, sp.base, sp.end, res.NextOffset)
			}
			res.NextOffset = sp.end
		}
	}
	return res, nil
}

// span returns patched batches of one index entry holding offset: a whole WAL chunk, or
// the block of a segment that holds offset. It serves them from the chunk cache, or reads
// them (the disk cache, then a range GET); concurrent misses of one span share one read.
func (r *Reader) span(ctx context.Context, k pkey, e meta.IndexEntry, offset int64) (*span, error) {
	sk := spanKey{stream: k.stream, partition: k.partition, base: e.BaseOffset, object: e.Object}
	var seg *segfmt.Info
	block := -1
	if e.Kind == meta.KindSegment {
		var err error
		if seg, err = r.segmentInfo(ctx, e); err != nil {
			return nil, err
		}
		block = blockOf(seg, offset)
		if block < 0 {
			// No batch of the segment holds or follows offset (compacted away).
			return &span{base: offset, end: e.End()}, nil
		}
		sk.base, sk.block = -1, block
	}
	if sp := r.chunks.get(sk); sp != nil {
		r.cfg.Metrics.hit("chunk")
		return sp, nil
	}
	r.flightMu.Lock()
	if c := r.flight[sk]; c != nil {
		r.flightMu.Unlock()
		select {
		case <-c.done:
			return c.sp, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &flightCall{done: make(chan struct{})}
	r.flight[sk] = c
	r.flightMu.Unlock()

	if seg != nil {
		c.sp, c.err = r.readBlock(ctx, e, seg, block)
	} else {
		c.sp, c.err = r.readSpan(ctx, e)
	}
	if c.err == nil {
		r.chunks.put(sk, c.sp)
	}
	r.flightMu.Lock()
	delete(r.flight, sk)
	r.flightMu.Unlock()
	close(c.done)
	return c.sp, c.err
}

type flightCall struct {
	done chan struct{}
	sp   *span
	err  error
}

func (r *Reader) readSpan(ctx context.Context, e meta.IndexEntry) (*span, error) {
	r.cfg.Metrics.hit("object")
	b, err := r.cfg.Bucket.GetRange(ctx, e.Object, e.Offset, e.Length)
	if err != nil {
		return nil, fmt.Errorf("reader: read %s [%d+%d]: %w", e.Object, e.Offset, e.Length, err)
	}
	var payload []byte
	switch e.Kind {
	case meta.KindWAL:
		_, payload, err = walfmt.DecodeChunk(b)
		if err != nil {
			return nil, fmt.Errorf("reader: %s [%d+%d]: %w", e.Object, e.Offset, e.Length, err)
		}
	default:
		payload = b // a segment region holds batches with offsets already patched
	}
	off := e.BaseOffset
	rest := payload
	for len(rest) > 0 {
		batch, tail, err := recordbatch.Parse(rest)
		if err != nil {
			return nil, fmt.Errorf("reader: %s [%d+%d] at offset %d: %w", e.Object, e.Offset, e.Length, off, err)
		}
		if e.Kind == meta.KindWAL {
			// A WAL batch still carries the producer's baseOffset: offsets are dense in a chunk.
			_ = recordbatch.SetBaseOffset(batch.Raw, off)
			off += batch.OffsetCount()
		}
		rest = tail
	}
	return &span{base: e.BaseOffset, end: e.End(), data: payload}, nil
}
