package metafake

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// Meta is an in-memory sequencer for unit tests: one namespace, streams with an offset
// index per partition, leases, index swaps, trims, reference counts and the retired set,
// with the sequencer's rules (package metatest runs the same suite over both).
type Meta struct {
	// Now is the clock leases, commits and retirements are stamped with; New sets time.Now.
	Now func() time.Time
	// BeforeSwap, when set, is called at the start of each SwapIndex, without the lock.
	BeforeSwap func(meta.IndexSwap)

	mu      sync.Mutex
	streams []meta.Stream
	parts   map[pkey]*partition
	leases  map[leaseKey]*lease
	refs    map[string]int64 // index entries per object
	retired map[string]int64 // object -> retired at (ms)
	dedupe  map[string]meta.CommitResult
	swaps   int
	apiKeys keys // auth.go

	producers producers                      // producers.go
	consumers map[consumerKey]*consumerState // consumers.go
	nsKeys    map[string]meta.NamespaceKey   // nskeys.go
	schemas   map[uint64][]meta.StreamSchema // schemas.go
	placement *placementState                // placement.go
}

type pkey struct {
	stream uint64
	p      int32
}

type leaseKey struct {
	pkey
	kind string
}

type lease struct {
	holder    string
	epoch     uint64
	expiresMs int64 // 0: released
}

type partition struct {
	logStart, hwm, bytes int64
	entries              []meta.IndexEntry
}

// New returns an empty Meta with the namespace "default".
func New() *Meta {
	return &Meta{Now: time.Now, parts: map[pkey]*partition{}, leases: map[leaseKey]*lease{},
		refs: map[string]int64{}, retired: map[string]int64{}, dedupe: map[string]meta.CommitResult{}}
}

// AddStream adds stream id, named "s<id>" in "default", with empty partitions.
func (f *Meta) AddStream(id uint64, partitions int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addStream(meta.Stream{ID: id, CreatedAtMs: f.Now().UnixMilli(), StreamConfig: meta.StreamConfig{Namespace: meta.DefaultNS,
		Name: fmt.Sprint("s", id), Partitions: partitions, Class: meta.ClassStandard, Encoding: meta.EncodingKafka,
		RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete}})
}

func (f *Meta) addStream(st meta.Stream) {
	f.streams = append(f.streams, st)
	for p := range st.Partitions {
		f.parts[pkey{st.ID, p}] = &partition{}
	}
}

// CreateStream creates a stream in "default" (other namespaces are meta.ErrNamespaceNotFound)
// with the next free ID. Only the name, partition count and leader zone are checked.
func (f *Meta) CreateStream(ctx context.Context, cfg meta.StreamConfig) (meta.Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cfg.Namespace == "" {
		cfg.Namespace = meta.DefaultNS
	}
	switch {
	case cfg.Namespace != meta.DefaultNS:
		return meta.Stream{}, fmt.Errorf("metafake: namespace %q: %w", cfg.Namespace, meta.ErrNamespaceNotFound)
	case cfg.Name == "" || len(cfg.Name) > meta.MaxNameLength:
		return meta.Stream{}, fmt.Errorf("%w: stream name %q", meta.ErrInvalidArgument, cfg.Name)
	case cfg.Partitions < 1 || cfg.Partitions > meta.MaxPartitions:
		return meta.Stream{}, fmt.Errorf("%w: partitions %d: want 1..%d", meta.ErrInvalidArgument, cfg.Partitions, meta.MaxPartitions)
	}
	if err := meta.CheckLeaderZone(cfg.Class, cfg.LeaderZone); err != nil {
		return meta.Stream{}, err
	}
	var id uint64
	for _, st := range f.streams {
		if st.Name == cfg.Name {
			return meta.Stream{}, fmt.Errorf("metafake: stream %q: %w", cfg.Name, meta.ErrStreamExists)
		}
		id = max(id, st.ID)
	}
	st := meta.Stream{ID: id + 1, CreatedAtMs: f.Now().UnixMilli(), StreamConfig: cfg}
	f.addStream(st)
	f.placeLocked(st, 0) // placement.go
	return st, nil
}

// ListNamespaces answers "default".
func (f *Meta) ListNamespaces(ctx context.Context) ([]string, error) {
	return []string{meta.DefaultNS}, nil
}

// ListStreams answers every stream added, whatever ns.
func (f *Meta) ListStreams(ctx context.Context, ns string) ([]meta.Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.streams), nil
}

// part finds a partition: meta.ErrStreamNotFound or meta.ErrPartitionNotFound when missing.
func (f *Meta) part(stream uint64, p int32) (*partition, error) {
	if fp := f.parts[pkey{stream, p}]; fp != nil {
		return fp, nil
	}
	for _, st := range f.streams {
		if st.ID == stream {
			return nil, fmt.Errorf("metafake: partition %d/%d: %w", stream, p, meta.ErrPartitionNotFound)
		}
	}
	return nil, fmt.Errorf("metafake: stream %d: %w", stream, meta.ErrStreamNotFound)
}

// mustPart is part for the test helpers: a missing partition is a test bug.
func (f *Meta) mustPart(stream uint64, p int32) *partition {
	fp, err := f.part(stream, p)
	if err != nil {
		panic(err)
	}
	return fp
}

// ref moves object's reference count by d, retiring it when the count reaches zero and
// taking it out of the retired set when it is referenced again.
func (f *Meta) ref(object string, d int64) {
	n := f.refs[object] + d
	switch {
	case n < 0:
		panic(fmt.Sprintf("metafake: object %s: reference count %d", object, n))
	case n == 0:
		delete(f.refs, object)
		f.retired[object] = f.Now().UnixMilli()
	default:
		delete(f.retired, object)
		f.refs[object] = n
	}
}

// Commit appends e (its BaseOffset set to the high watermark) to the partition's index,
// advances the high watermark by e.Count and returns the base offset.
func (f *Meta) Commit(stream uint64, p int32, e meta.IndexEntry) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commit(f.mustPart(stream, p), e)
}

func (f *Meta) commit(fp *partition, e meta.IndexEntry) int64 {
	e.BaseOffset = fp.hwm
	fp.hwm += e.Count
	fp.bytes += e.Length
	fp.entries = append(fp.entries, e)
	f.ref(e.Object, 1)
	return e.BaseOffset
}

// CommitWal assigns offsets to the chunks of one WAL object, in order, and appends their
// index entries; a retry of a committed object answers the first commit's offsets with
// Duplicate set. A chunk of a missing stream or partition fails the whole commit. There is
// no commit window (StaleAfter) and no clock check. Chunks carrying a producer are
// checked as the sequencer checks them (producers.go): a duplicate is answered with its
// original offset, a refusal in Status, and the other chunks commit.
func (f *Meta) CommitWal(ctx context.Context, c meta.CommitWal) (meta.CommitResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Object == "" {
		return meta.CommitResult{}, fmt.Errorf("%w: commit wal: empty object key", meta.ErrInvalidArgument)
	}
	if len(c.Chunks) == 0 {
		return meta.CommitResult{}, fmt.Errorf("%w: commit wal %s: no chunks", meta.ErrInvalidArgument, c.Object)
	}
	for i, ch := range c.Chunks {
		if ch.Records <= 0 || ch.Offset < 0 || ch.Length <= 0 {
			return meta.CommitResult{}, fmt.Errorf("%w: commit wal %s: chunk %d: records %d, offset %d, length %d",
				meta.ErrInvalidArgument, c.Object, i, ch.Records, ch.Offset, ch.Length)
		}
	}
	if r, ok := f.dedupe[c.Object]; ok {
		r.BaseOffsets = slices.Clone(r.BaseOffsets)
		r.Duplicate = true
		return r, nil
	}
	for _, ch := range c.Chunks {
		if _, err := f.part(ch.StreamID, ch.Partition); err != nil {
			return meta.CommitResult{}, fmt.Errorf("commit wal %s: %w", c.Object, err)
		}
	}
	res := meta.CommitResult{BaseOffsets: make([]int64, len(c.Chunks))}
	for i, ch := range c.Chunks {
		if ch.Producer.Has() {
			st, base := f.checkProducerChunk(ch)
			if st != meta.ChunkCommitted {
				if res.Status == nil {
					res.Status = make([]meta.ChunkStatus, len(c.Chunks))
				}
				res.Status[i], res.BaseOffsets[i] = st, base
				continue
			}
		}
		res.BaseOffsets[i] = f.commit(f.parts[pkey{ch.StreamID, ch.Partition}], meta.IndexEntry{Count: ch.Records, Kind: meta.KindWAL,
			Object: c.Object, Offset: ch.Offset, Length: ch.Length, MaxTimestamp: ch.MaxTimestamp})
		if ch.Producer.Has() {
			f.recordProducerChunk(ch, res.BaseOffsets[i])
		}
	}
	f.dedupe[c.Object] = res
	res.BaseOffsets = slices.Clone(res.BaseOffsets)
	return res, nil
}

// HighWatermark returns the partition's high watermark.
func (f *Meta) HighWatermark(stream uint64, p int32) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mustPart(stream, p).hwm
}

// Entries returns a copy of the partition's index.
func (f *Meta) Entries(stream uint64, p int32) []meta.IndexEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.mustPart(stream, p).entries)
}

// Swaps returns how many SwapIndex calls changed the index.
func (f *Meta) Swaps() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.swaps
}

// DropLeases ends every lease (epochs are kept), as if each had expired and been taken
// over: a swap under any lease granted so far is refused with meta.ErrLeaseLost.
func (f *Meta) DropLeases() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.leases {
		l.expiresMs = 0
	}
}

// Lookup answers the partition's state and, when max > 0, up to max entries from the one
// that holds from; from outside [log start, high watermark] is meta.ErrOffsetOutOfRange.
func (f *Meta) Lookup(ctx context.Context, stream uint64, p int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp, err := f.part(stream, p)
	if err != nil {
		return nil, meta.PartitionState{}, fmt.Errorf("lookup: %w", err)
	}
	st := f.state(stream, p, fp)
	if max <= 0 {
		return nil, st, nil
	}
	if from < fp.logStart || from > fp.hwm {
		return nil, st, fmt.Errorf("lookup %d/%d offset %d: log start %d, high watermark %d: %w", stream, p, from, fp.logStart, fp.hwm, meta.ErrOffsetOutOfRange)
	}
	i := sort.Search(len(fp.entries), func(i int) bool { return fp.entries[i].End() > from })
	return slices.Clone(fp.entries[i:min(len(fp.entries), i+max)]), st, nil
}

func (f *Meta) state(stream uint64, p int32, fp *partition) meta.PartitionState {
	return meta.PartitionState{StreamID: stream, Partition: p, LogStart: fp.logStart, HighWatermark: fp.hwm, Bytes: fp.bytes}
}

// validName is the sequencer's rule for names (a lease kind): 1..MaxNameLength characters
// of [a-zA-Z0-9._-], not "." or "..".
func validName(s string) bool {
	if s == "" || len(s) > meta.MaxNameLength || s == "." || s == ".." {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == ""
}

// validHolder: 1..MaxNameLength printable ASCII characters, no space.
func validHolder(s string) bool {
	if s == "" || len(s) > meta.MaxNameLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// AcquireLease grants or renews the (stream, partition, kind) lease for holder: a grant to
// a holder without a live lease takes the next epoch.
func (f *Meta) AcquireLease(ctx context.Context, stream uint64, p int32, kind, holder string, ttl time.Duration) (meta.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch ttlMs := ttl.Milliseconds(); {
	case !validName(kind):
		return meta.Lease{}, fmt.Errorf("%w: acquire lease: lease kind %q", meta.ErrInvalidArgument, kind)
	case !validHolder(holder):
		return meta.Lease{}, fmt.Errorf("%w: acquire lease: holder %q", meta.ErrInvalidArgument, holder)
	case ttlMs <= 0 || ttlMs > meta.MaxLeaseTTL.Milliseconds():
		return meta.Lease{}, fmt.Errorf("%w: acquire lease: ttl %d ms: want 1..%d", meta.ErrInvalidArgument, ttlMs, meta.MaxLeaseTTL.Milliseconds())
	}
	if _, err := f.part(stream, p); err != nil {
		return meta.Lease{}, fmt.Errorf("acquire lease: %w", err)
	}
	k := leaseKey{pkey{stream, p}, kind}
	now := f.Now().UnixMilli()
	l := f.leases[k]
	if l == nil {
		l = &lease{}
		f.leases[k] = l
	}
	live := l.expiresMs > now
	if live && l.holder != holder {
		return meta.Lease{}, fmt.Errorf("acquire lease %d/%d %s: held by %s (epoch %d): %w", stream, p, kind, l.holder, l.epoch, meta.ErrLeaseHeld)
	}
	if !live {
		l.epoch++
		l.holder = holder
	}
	l.expiresMs = now + ttl.Milliseconds()
	return meta.Lease{StreamID: stream, Partition: p, Kind: kind, Holder: holder, Epoch: l.epoch, ExpiresMs: l.expiresMs}, nil
}

// ReleaseLease ends l if it is still the current grant; otherwise it does nothing.
func (f *Meta) ReleaseLease(ctx context.Context, l meta.Lease) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.leases[leaseKey{pkey{l.StreamID, l.Partition}, l.Kind}]; cur != nil && cur.holder == l.Holder && cur.epoch == l.Epoch {
		cur.expiresMs = 0
	}
	return nil
}

// sameEntries compares entries as the index keeps them: MaxTimestamp is not compared.
func sameEntries(a, b []meta.IndexEntry) bool {
	return slices.EqualFunc(a, b, func(x, y meta.IndexEntry) bool {
		return x.BaseOffset == y.BaseOffset && x.Count == y.Count && x.Kind == y.Kind && x.Object == y.Object && x.Offset == y.Offset && x.Length == y.Length
	})
}

// checkSwap is the sequencer's shape check of a swap: a lease with kind, holder and epoch;
// Old and New non-empty, contiguous, well-formed; New all segments covering Old's offsets.
func checkSwap(s meta.IndexSwap) error {
	l := s.Lease
	if l.Kind == "" || l.Holder == "" || l.Epoch == 0 {
		return fmt.Errorf("%w: swap index: lease without kind, holder or epoch", meta.ErrInvalidArgument)
	}
	for _, run := range []struct {
		name string
		es   []meta.IndexEntry
	}{{"old", s.Old}, {"new", s.New}} {
		if len(run.es) == 0 || len(run.es) > meta.MaxSwapEntries {
			return fmt.Errorf("%w: swap index: %d %s entries: want 1..%d", meta.ErrInvalidArgument, len(run.es), run.name, meta.MaxSwapEntries)
		}
		for i, e := range run.es {
			if e.Count <= 0 || e.BaseOffset < 0 || e.Object == "" || e.Offset < 0 || e.Length <= 0 {
				return fmt.Errorf("%w: swap index: %s entry %d %+v", meta.ErrInvalidArgument, run.name, i, e)
			}
			if i > 0 && e.BaseOffset != run.es[i-1].End() {
				return fmt.Errorf("%w: swap index: %s entries not contiguous at %d", meta.ErrInvalidArgument, run.name, e.BaseOffset)
			}
			if run.name == "new" && e.Kind != meta.KindSegment {
				return fmt.Errorf("%w: swap index: new entry %d of kind %d: want segment", meta.ErrInvalidArgument, i, e.Kind)
			}
		}
	}
	if s.New[0].BaseOffset != s.Old[0].BaseOffset || s.New[len(s.New)-1].End() != s.Old[len(s.Old)-1].End() {
		return fmt.Errorf("%w: swap index: new entries do not cover the old ones' offsets", meta.ErrInvalidArgument)
	}
	return nil
}

// SwapIndex replaces the run s.Old of the index by s.New under the current lease s.Lease,
// with the sequencer's checks in its order: shape (meta.ErrInvalidArgument), partition,
// a retry of an applied swap (nil), lease (meta.ErrLeaseLost), Old (meta.ErrIndexChanged).
func (f *Meta) SwapIndex(ctx context.Context, s meta.IndexSwap) error {
	if f.BeforeSwap != nil {
		f.BeforeSwap(s)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkSwap(s); err != nil {
		return err
	}
	l := s.Lease
	fp, err := f.part(l.StreamID, l.Partition)
	if err != nil {
		return fmt.Errorf("swap index: %w", err)
	}
	from, to := s.Old[0].BaseOffset, s.Old[len(s.Old)-1].End()
	lo := sort.Search(len(fp.entries), func(i int) bool { return fp.entries[i].End() > from })
	hi := sort.Search(len(fp.entries), func(i int) bool { return fp.entries[i].BaseOffset >= to })
	cur := fp.entries[lo:hi]
	// New entries wholly below the log start are not kept (a trim would have dropped them).
	keep := s.New
	for len(keep) > 0 && keep[0].End() <= fp.logStart {
		keep = keep[1:]
	}
	if len(keep) > 0 {
		i := 0
		for i < len(cur) && cur[i].End() <= keep[0].BaseOffset {
			i++
		}
		if sameEntries(cur[i:], keep) {
			return nil // a retry of an applied swap
		}
	}
	ll := f.leases[leaseKey{pkey{l.StreamID, l.Partition}, l.Kind}]
	if ll == nil || ll.holder != l.Holder || ll.epoch != l.Epoch || ll.expiresMs <= f.Now().UnixMilli() {
		return fmt.Errorf("swap index %d/%d [%d,%d): %w", l.StreamID, l.Partition, from, to, meta.ErrLeaseLost)
	}
	if !sameEntries(cur, s.Old) {
		return fmt.Errorf("swap index %d/%d [%d,%d): the old entries are no longer in the index: %w", l.StreamID, l.Partition, from, to, meta.ErrIndexChanged)
	}
	fp.entries = slices.Concat(fp.entries[:lo], keep, fp.entries[hi:])
	for _, e := range keep {
		fp.bytes += e.Length
		f.ref(e.Object, 1)
	}
	for _, e := range s.Old {
		fp.bytes -= e.Length
		f.ref(e.Object, -1)
	}
	for _, e := range s.New[:len(s.New)-len(keep)] {
		if _, ok := f.refs[e.Object]; !ok {
			if _, ok := f.retired[e.Object]; !ok {
				f.retired[e.Object] = f.Now().UnixMilli()
			}
		}
	}
	f.swaps++
	return nil
}

// TrimPartition moves the log start forward and drops the entries wholly below it,
// retiring objects left unreferenced.
func (f *Meta) TrimPartition(ctx context.Context, stream uint64, p int32, logStart int64) (meta.PartitionState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fp, err := f.part(stream, p)
	if err != nil {
		return meta.PartitionState{}, fmt.Errorf("trim partition: %w", err)
	}
	if logStart > fp.hwm {
		return f.state(stream, p, fp), fmt.Errorf("trim partition %d/%d to %d: high watermark %d: %w", stream, p, logStart, fp.hwm, meta.ErrOffsetOutOfRange)
	}
	if logStart <= fp.logStart {
		return f.state(stream, p, fp), nil
	}
	n := 0
	for n < len(fp.entries) && fp.entries[n].End() <= logStart {
		fp.bytes -= fp.entries[n].Length
		f.ref(fp.entries[n].Object, -1)
		n++
	}
	fp.entries = slices.Clone(fp.entries[n:])
	fp.logStart = logStart
	return f.state(stream, p, fp), nil
}

// ListRetired lists up to limit retired objects after `after`, in key order.
func (f *Meta) ListRetired(ctx context.Context, after string, limit int) ([]meta.RetiredObject, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if limit <= 0 || limit > meta.MaxRetiredList {
		limit = meta.MaxRetiredList
	}
	var out []meta.RetiredObject
	for k, ms := range f.retired {
		if k > after {
			out = append(out, meta.RetiredObject{Key: k, RetiredMs: ms})
		}
	}
	slices.SortFunc(out, func(a, b meta.RetiredObject) int { return strings.Compare(a.Key, b.Key) })
	return out[:min(len(out), limit)], nil
}

// ForgetRetired removes keys from the retired set; keys not in it are ignored.
func (f *Meta) ForgetRetired(ctx context.Context, keys []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.retired, k)
	}
	return nil
}

// Referenced answers, for each key, whether an index entry names it.
func (f *Meta) Referenced(ctx context.Context, keys []string) ([]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = f.refs[k] > 0
	}
	return out, nil
}
