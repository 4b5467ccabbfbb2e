// Package reader is the log node's read path.
//
// # Basics
//
// A fetch of (stream, partition, offset) resolves the offset through the node's cached
// offset index, kept current by the sequencer's watch stream and by this node's own
// commits, then serves the bytes from, in order: the tail cache (filled at write time), the
// chunk cache (chunks and segment blocks read lately), a read from the bucket: a WAL
// object whole, with one GET that feeds every partition and consumer here that needs one
// of its chunks, or a range GET of a segment block. Every batch it returns has its
// baseOffset patched to the offset the sequencer assigned.
//
// Long-poll: a fetch at the high watermark waits for the partition's high watermark to move
// (a watch event or a local commit) until max wait passes, its context ends, or Drain.
//
// # Memory
//
// Bounded by configuration, never by the partitions in the cluster: the tail cache
// (TailCacheBytes), the chunk cache (ChunkCacheBytes), one cache of index entries shared
// by all partitions (IndexCacheBytes, LRU by partition), and the partition states
// (MaxPartitions, LRU): a partition is tracked only while fetched or written here lately,
// so watch events for the others cost a map lookup and allocate nothing. A shared read
// holds one WAL object (at most the writers' buffer, 8 MiB by default) until its waiters
// have cut their chunks out.
//
// # Caveats
//
// Batches are shared between callers and must not be modified. A partition dropped from
// the map (evicted, forgotten, a watch Reset) wakes its long-polls, which look it up again.
// A read that finds its object gone (segmented, then collected) drops the partition's
// cached entries, looks the offset up again and retries once.
// Lock order: Reader.mu, then a cache's own mutex; never the other way.
package reader

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
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
	// IndexCacheBytes bounds the index entries cached for all partitions together
	// (about 100 bytes each), default 64 MiB.
	IndexCacheBytes int64
	IndexEntries    int // cached index entries per partition at most, default 4096
	// MaxPartitions bounds the partitions whose state (bounds, waiters, cached entries)
	// the reader tracks, the least recently fetched or written dropped first; default
	// 32,768 (a few hundred bytes each). A dropped partition's long-polls look it up again,
	// so keep it above the partitions polled at once.
	MaxPartitions int
	// ReadTimeout bounds one shared read of the bucket (a WAL object, a segment block),
	// which runs apart from the fetches waiting for it; default 30 s.
	ReadTimeout time.Duration
	// DiskCacheDir and DiskCacheBytes bound an on-disk LRU of segment blocks read from the
	// bucket (a local NVMe cache). Empty dir: none.
	DiskCacheDir   string
	DiskCacheBytes int64
	// Opener opens chunks and segment blocks sealed with a namespace's key (an
	// envelope.Catalog, seal.go); nil: they answer envelope.ErrKeyUnavailable.
	Opener  Opener
	Logger  *slog.Logger
	Metrics *Metrics

	// Journal, when set, serves the partitions that live in a journal (journal.go).
	Journal JournalSource
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

// Reader serves fetches.
type Reader struct {
	cfg    Config
	tail   *spanCache
	chunks *chunkCache
	disk   *diskCache // nil: no disk cache
	segs   *infoCache

	mu         sync.Mutex
	parts      map[pkey]*partition // at most MaxPartitions
	lru        *list.List          // of *partition, front = most recently used
	runs       *list.List          // of *partition with cached entries, front = most recently used
	indexBytes int64               // what the runs cost, at most IndexCacheBytes
	loading    map[pkey]*pending   // partitions being looked up: one per fetch in flight at most

	flightMu sync.Mutex
	flight   map[string]*flightCall // shared reads in flight

	drainOnce sync.Once
	draining  chan struct{} // closed by Drain

	applied applied // the watch events applied so far (applied.go)
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
	if cfg.IndexCacheBytes <= 0 {
		cfg.IndexCacheBytes = 64 << 20
	}
	if cfg.IndexEntries <= 0 {
		cfg.IndexEntries = 4096
	}
	if cfg.MaxPartitions <= 0 {
		cfg.MaxPartitions = 32768
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
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
		disk.metrics, disk.log = cfg.Metrics, cfg.Logger
		cfg.Metrics.diskSize(disk.size())
	}
	return &Reader{
		cfg:      cfg,
		disk:     disk,
		segs:     newInfoCache(4096),
		tail:     newSpanCache(cfg.TailCacheBytes),
		chunks:   newChunkCache(cfg.ChunkCacheBytes),
		parts:    make(map[pkey]*partition),
		lru:      list.New(),
		runs:     list.New(),
		loading:  make(map[pkey]*pending),
		flight:   make(map[string]*flightCall),
		draining: make(chan struct{}),
	}, nil
}

// Drain ends every long-poll at once, and every later one before it waits: each answers
// with what it has (no batches at the high watermark), as when its wait runs out. A node
// calls it when it begins to stop, so open polls do not hold the shutdown for their wait.
// Fetches of data below the high watermark are served as before.
func (r *Reader) Drain() { r.drainOnce.Do(func() { close(r.draining) }) }

// Committed records a chunk this node committed: it fills the tail cache and advances the
// partition if it is tracked. All offsets below the chunk's end are committed, since the
// sequencer applies commits in order. The chunk's batches may come in parts (each whole
// batches, in offset order: the writer's requests), kept as they are, not joined.
func (r *Reader) Committed(streamID uint64, partition int32, e meta.IndexEntry, batches ...[]byte) {
	sp := &span{base: e.BaseOffset, end: e.End()}
	if len(batches) == 1 {
		sp.data = batches[0]
	} else {
		sp.parts = batches
	}
	r.tail.put(spanKey{stream: streamID, partition: partition, base: e.BaseOffset}, sp)
	if m := r.cfg.Metrics; m != nil {
		m.tailBytes.Set(float64(r.tail.size()))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.parts[pkey{streamID, partition}]
	if p == nil {
		if pl := r.loading[pkey{streamID, partition}]; pl != nil {
			pl.hwm = max(pl.hwm, e.End())
		}
		return
	}
	r.touchLocked(p)
	r.addEntriesLocked(p, []meta.IndexEntry{e})
	r.advanceLocked(p, p.logStart, e.End())
}

// Apply applies one watch event. An update of a partition the reader does not track costs
// a map lookup.
func (r *Reader) Apply(ev meta.Event) {
	// Covered once applied: the index moves after the partitions below are updated.
	defer r.applied.advance(ev.AppliedIndex)
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Reset {
		// Events were missed: swaps among them may have replaced what the tail cache and
		// the cached entries hold. Drop both; waiters re-resolve. (The chunk cache holds
		// objects' bytes, which never change.)
		for _, p := range r.parts {
			r.removeLocked(p)
		}
		r.tail.dropAll()
		return
	}
	for _, u := range ev.Partitions {
		k := pkey{u.StreamID, u.Partition}
		if u.Replaced {
			// Entries were swapped (segmenting, compaction) or trimmed: what the tail
			// cache holds may no longer be what the index serves (compaction drops
			// records), so it goes too.
			r.tail.dropPartition(k)
		}
		p := r.parts[k]
		if p == nil {
			if pl := r.loading[k]; pl != nil {
				pl.logStart, pl.hwm = max(pl.logStart, u.LogStart), max(pl.hwm, u.HighWatermark)
			}
			continue
		}
		if u.Replaced {
			r.dropRunLocked(p)
			p.gen++
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
			r.removeLocked(p)
		}
	}
	r.tail.dropStream(streamID)
	r.chunks.dropStream(streamID)
}

// Fetch returns batches of (streamID, partition) from offset, up to about maxBytes (always
// at least one batch when one exists), waiting up to maxWait for data at the high watermark.
func (r *Reader) Fetch(ctx context.Context, streamID uint64, partition int32, offset int64, maxBytes int, maxWait time.Duration) (Result, error) {
	if r.cfg.Journal != nil {
		if res, ok, err := r.cfg.Journal.FetchJournal(ctx, streamID, partition, offset, maxBytes, maxWait); ok {
			return r.journalBoundary(ctx, pkey{streamID, partition}, offset, maxBytes, res, err) // journal.go
		}
	}
	return r.fetchIndex(ctx, pkey{streamID, partition}, offset, maxBytes, maxWait)
}

// fetchIndex is Fetch through the offset index.
func (r *Reader) fetchIndex(ctx context.Context, k pkey, offset int64, maxBytes int, maxWait time.Duration) (Result, error) {
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
	retried := false
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
			if err != nil && errors.Is(err, objstore.ErrNotFound) && !retried {
				// The cached entry names an object that is gone (segmented and collected
				// since): look the offset up again, once.
				retried = true
				r.dropEntries(k)
				continue
			}
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
