package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

// Errors of the fsm package. Domain errors are the meta sentinels.
var (
	// ErrBadCommand: a Raft log entry that does not decode as a command. Applying it
	// changes nothing but the applied index.
	ErrBadCommand = errors.New("fsm: malformed command")
	// ErrCorrupt: the state database or a snapshot is damaged or of an unknown format.
	ErrCorrupt = errors.New("fsm: corrupt state")
)

// Formats of the state database (the package doc). v2 added the refs, retired and leases
// buckets to v1; v3 replaced the index bucket by index blocks and pending commits; v4 added
// the idempotent producers' buckets (producers.go). Older databases (and snapshots) are
// migrated when opened.
const (
	formatV1 = "loam-fsm v1"
	formatV2 = "loam-fsm v2"
	formatV3 = "loam-fsm v3"
	formatV4 = "loam-fsm v4"
)

// pruneBatch bounds how many expired dedupe records one applied batch deletes.
const pruneBatch = 4096

// MaxLookup caps the entries one Lookup returns.
const MaxLookup = 10000

var (
	bMeta      = []byte("meta")
	bNS        = []byte("namespaces")
	bStreams   = []byte("streams")
	bStreamIDs = []byte("stream_ids")
	bParts     = []byte("partitions")
	bIndex     = []byte("index")
	bDedupe    = []byte("dedupe")
	bDedupeT   = []byte("dedupe_time")
	bNodes     = []byte("nodes")
	bRefs      = []byte("refs")
	bRetired   = []byte("retired")
	bLeases    = []byte("leases")
	bBlocks    = []byte("index_blocks")
	bGroups    = []byte("partition_groups")
	bPending   = []byte("pending")
	v1Buckets  = [][]byte{bMeta, bNS, bStreams, bStreamIDs, bParts, bIndex, bDedupe, bDedupeT, bNodes}
	v2Buckets  = append(v1Buckets[:len(v1Buckets):len(v1Buckets)], bRefs, bRetired, bLeases)
	v3Buckets  = [][]byte{bMeta, bNS, bStreams, bStreamIDs, bGroups, bBlocks, bPending, bDedupe, bDedupeT, bNodes, bRefs, bRetired, bLeases}
	allBuckets = append(v3Buckets[:len(v3Buckets):len(v3Buckets)], v4Buckets...)

	kFormat   = []byte("format")
	kApplied  = []byte("applied")
	kClock    = []byte("clock")
	kNextID   = []byte("next_stream_id")
	kEvent    = []byte("last_event")
	kPendingN = []byte("pending_commits")
)

// Options tune an FSM. The zero value is usable.
type Options struct {
	// Publish receives the events of each applied batch, in applied order, after the batch's
	// transaction committed (and a single Reset event after Restore). It runs on the Raft
	// apply goroutine and must not block.
	Publish func([]meta.Event)
	// InitialMmapSize is bbolt's initial mmap size (default 256 MiB, address space only).
	// A snapshot holds a read transaction while Raft persists it; bbolt writers block when
	// they must grow the mmap under an open read transaction, so keep this generous.
	InitialMmapSize int
	// NoSync skips fsync on commit (tests and benchmarks only: a crash may corrupt the file).
	NoSync bool
	// LazySync skips fsync on commit but keeps the file trustworthy: Close syncs it, and Open
	// discards a file that a crash of the machine (not just of the process) may have left
	// with lost writes (session.go). The caller must then rebuild the state from its newest
	// snapshot and the Raft log, as package server does.
	LazySync bool
}

// FSM is the sequencer state machine over one bbolt file. It implements raft.BatchingFSM.
// Reads (GetStream, ListStreams, Lookup, ...) may run concurrently with Apply.
type FSM struct {
	path string
	opts Options

	// mu guards db: Apply, Snapshot and reads hold it shared; Restore holds it exclusively
	// while it swaps the file. Lock order: mu before any bbolt transaction.
	mu sync.RWMutex
	db *bolt.DB

	// tmu guards t.streams for readers: a read holds it shared for its whole transaction,
	// ApplyBatch exclusively while it commits and installs its staged tails (tail.go).
	// Lock order: mu, tmu, then a bbolt transaction.
	tmu sync.RWMutex
	t   *tails

	scratch scratch // the applier's reusable buffers (Apply runs one batch at a time)

	discarded error // why Open discarded the file (LazySync), or nil
}

var _ raft.BatchingFSM = (*FSM)(nil)

// Open opens (creating if needed) the state database at path. A new database holds the
// namespace "default" and nothing else.
func Open(path string, opts Options) (*FSM, error) {
	if opts.InitialMmapSize == 0 {
		opts.InitialMmapSize = 256 << 20
	}
	f := &FSM{path: path, opts: opts}
	if opts.LazySync {
		var err error
		if f.discarded, err = startSession(path, opts.NoSync); err != nil {
			return nil, err
		}
	}
	db, err := f.openDB(false)
	if err != nil {
		return nil, err
	}
	f.db = db
	if err := f.loadTails(); err != nil {
		db.Close()
		return nil, err
	}
	return f, nil
}

// loadTails rebuilds the in-memory pending entries from the database.
func (f *FSM) loadTails() error {
	return f.db.Update(func(tx *bolt.Tx) error {
		t, err := loadTails(tx)
		if err != nil {
			return fmt.Errorf("fsm: load pending entries of %s: %w", f.path, err)
		}
		f.t = t
		return nil
	})
}

// openDB opens f.path, initializing a new file unless mustExist (a restored snapshot must
// already be a state database).
func (f *FSM) openDB(mustExist bool) (*bolt.DB, error) {
	db, err := bolt.Open(f.path, 0o600, &bolt.Options{
		Timeout: 5 * time.Second, InitialMmapSize: f.opts.InitialMmapSize, NoSync: f.opts.NoSync || f.opts.LazySync, NoGrowSync: f.opts.NoSync || f.opts.LazySync,
		NoFreelistSync: true, FreelistType: bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("fsm: open %s: %w", f.path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		if m != nil {
			got := string(m.Get(kFormat))
			want := allBuckets
			switch got {
			case formatV4:
			case formatV3:
				want = v3Buckets
			case formatV2:
				want = v2Buckets
			case formatV1:
				want = v1Buckets
			default:
				return fmt.Errorf("%w: %s: format %q, want %q, %q, %q or %q", ErrCorrupt, f.path, got, formatV4, formatV3, formatV2, formatV1)
			}
			for _, b := range want {
				if tx.Bucket(b) == nil {
					return fmt.Errorf("%w: %s: bucket %s missing", ErrCorrupt, f.path, b)
				}
			}
			if got == formatV1 {
				if err := migrateV1(tx); err != nil {
					return err
				}
				got = formatV2
			}
			if got == formatV2 {
				if err := migrateV2(tx); err != nil {
					return err
				}
				got = formatV3
			}
			if got == formatV3 {
				return migrateV3(tx)
			}
			return nil
		}
		if mustExist {
			return fmt.Errorf("%w: %s: not a state database (no meta bucket)", ErrCorrupt, f.path)
		}
		for _, b := range allBuckets {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		m = tx.Bucket(bMeta)
		if err := m.Put(kFormat, []byte(formatV4)); err != nil {
			return err
		}
		if err := putU64(m, kNextID, 1); err != nil {
			return err
		}
		return tx.Bucket(bNS).Put([]byte(meta.DefaultNS), nil)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("fsm: init %s: %w", f.path, err)
	}
	return db, nil
}

// Discarded says why Open discarded the state database (LazySync), or is nil.
func (f *FSM) Discarded() error { return f.discarded }

// Close closes the database (with LazySync: syncs it first and marks it clean).
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db == nil {
		return nil
	}
	var err error
	if f.opts.LazySync && !f.opts.NoSync {
		err = f.db.Sync()
	}
	if cerr := f.db.Close(); err == nil {
		err = cerr
	}
	f.db = nil
	if err == nil && f.opts.LazySync {
		err = endSession(f.path, f.opts.NoSync)
	}
	return err
}

// view runs fn in a read transaction; f.t.streams matches it while fn runs.
func (f *FSM) view(fn func(tx *bolt.Tx) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return fmt.Errorf("fsm: closed: %w", meta.ErrUnavailable)
	}
	f.tmu.RLock()
	defer f.tmu.RUnlock()
	return f.db.View(fn)
}

// AppliedIndex is the index of the last Raft entry applied to the database.
func (f *FSM) AppliedIndex() uint64 {
	var idx uint64
	_ = f.view(func(tx *bolt.Tx) error {
		idx = getU64(tx.Bucket(bMeta), kApplied)
		return nil
	})
	return idx
}

// LastEventIndex is the index of the last applied entry that published an event: a
// watcher that has seen it has seen everything.
func (f *FSM) LastEventIndex() uint64 {
	var idx uint64
	_ = f.view(func(tx *bolt.Tx) error {
		idx = getU64(tx.Bucket(bMeta), kEvent)
		return nil
	})
	return idx
}

// ClockMs is the state machine's clock: the largest command stamp applied.
func (f *FSM) ClockMs() int64 {
	var c int64
	_ = f.view(func(tx *bolt.Tx) error {
		c = int64(getU64(tx.Bucket(bMeta), kClock))
		return nil
	})
	return c
}

// Result is what applying one command returns through raft's ApplyFuture.Response.
type Result struct {
	Index     uint64
	Stream    meta.Stream         // CreateStream, UpdateStream
	Commit    meta.CommitResult   // CommitWal
	Lease     meta.Lease          // AcquireLease
	Partition meta.PartitionState // TrimPartition
	Commits   []*Result           // CommitWalBatch: one per commit, in order
	Producer  meta.Producer       // InitProducer
	Key       meta.APIKey         // CreateKey
	Quota     meta.Quota          // SetQuota
	Err       error               // a meta sentinel, wrapped; nothing was changed

	Consumer meta.ConsumerAssignment // consumer heartbeat (consumers.go)

	Events          []meta.EventClaimAnswer   // ClaimEvents (cloudevents.go)
	KafkaGroup      meta.KafkaGroupGeneration // AdvanceKafkaGroup (kafkagroups.go)
	ConsumerOffsets []meta.ConsumerOffset     // consumer offsets reset (consumers_admin.go)
	NamespaceKey    meta.NamespaceKey         // namespace key commands (nskeys.go)
	Journal         meta.Journal              // placement commands (placement.go)
	Schema          meta.StreamSchema         // PutSchema (schemas.go)
}

// Apply applies one entry (raft.FSM).
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies entries in one bbolt transaction (raft.BatchingFSM). Entries at or
// below the stored applied index are skipped (nil response), so replay after a restart is
// harmless. A storage failure panics: the replica cannot go on without diverging, and a
// restart replays the entries from the Raft log.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	var events []meta.Event
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		panic(fmt.Sprintf("fsm: apply at index %d: state database closed (or lost by a failed restore)", logs[0].Index))
	}
	tx, err := f.db.Begin(true)
	if err != nil {
		panic(fmt.Sprintf("fsm: apply batch ending at index %d: %v", logs[len(logs)-1].Index, err))
	}
	a := applier{tx: tx, t: f.t, scratch: &f.scratch}
	a.load()
	for i, l := range logs {
		if l.Index <= a.applied {
			continue
		}
		a.applied = l.Index
		if l.Type != raft.LogCommand {
			continue
		}
		res, ev := a.apply(l)
		if a.err != nil {
			break
		}
		out[i] = res
		if ev != nil {
			events = append(events, *ev)
			a.lastEvent = l.Index
		}
	}
	if a.err == nil {
		a.prune()
		a.store()
	}
	if a.err != nil {
		_ = tx.Rollback()
		panic(fmt.Sprintf("fsm: apply batch ending at index %d: %v", logs[len(logs)-1].Index, a.err))
	}
	f.tmu.Lock()
	err = tx.Commit()
	if err == nil {
		a.install()
	}
	f.tmu.Unlock()
	if err != nil {
		panic(fmt.Sprintf("fsm: apply batch ending at index %d: %v", logs[len(logs)-1].Index, err))
	}
	if f.opts.Publish != nil && len(events) > 0 {
		f.opts.Publish(events)
	}
	return out
}

// applier applies commands inside one write transaction. err is sticky and is a storage
// error (fatal); domain errors go into Results.
type applier struct {
	tx        *bolt.Tx
	applied   uint64
	lastEvent uint64
	clock     int64
	err       error
	groups    map[gkey]*group // partition groups loaded by this batch
	t         *tails          // pending entries: records (changed in place) and committed tails
	staged    map[uint64]*stagedTails
	// the stream staged last, and the group loaded last (most chunks hit the same again)
	lastStaged   *stagedTails
	lastStagedID uint64
	lastGroup    *group
	lastGroupKey gkey
	ev           eventBuilder // the partition updates of the entry being applied
	scratch      *scratch     // buffers reused across commits
}

func (a *applier) load() {
	m := a.tx.Bucket(bMeta)
	a.applied = getU64(m, kApplied)
	a.lastEvent = getU64(m, kEvent)
	a.clock = int64(getU64(m, kClock))
}

func (a *applier) store() {
	a.flushGroups()
	m := a.tx.Bucket(bMeta)
	a.check(putU64(m, kApplied, a.applied))
	a.check(putU64(m, kClock, uint64(a.clock)))
	a.check(putU64(m, kEvent, a.lastEvent))
}

func (a *applier) check(err error) {
	if err != nil && a.err == nil {
		a.err = err
	}
}

func (a *applier) apply(l *raft.Log) (*Result, *meta.Event) {
	res := &Result{Index: l.Index}
	cmd, err := Decode(l.Data)
	if err != nil {
		res.Err = err
		return res, nil
	}
	if s := cmd.GetStampMs(); s > a.clock {
		a.clock = s
	}
	var ev *meta.Event
	switch op := cmd.Op.(type) {
	case *metapb.Command_CreateNamespace:
		res.Err = a.createNamespace(op.CreateNamespace.GetName())
	case *metapb.Command_CreateStream:
		res.Stream, res.Err = a.createStream(metapb.ToStreamConfig(op.CreateStream))
		if res.Err == nil {
			ev = &meta.Event{AppliedIndex: l.Index, StreamsChanged: true}
		}
	case *metapb.Command_UpdateStream:
		u := op.UpdateStream
		res.Stream, res.Err = a.updateStream(u.GetNamespace(), u.GetName(), metapb.ToStreamPatch(u.GetPatch()))
		if res.Err == nil {
			ev = &meta.Event{AppliedIndex: l.Index, StreamsChanged: true}
		}
	case *metapb.Command_DeleteStream:
		d := op.DeleteStream
		res.Err = a.deleteStream(d.GetNamespace(), d.GetName())
		if res.Err == nil {
			ev = &meta.Event{AppliedIndex: l.Index, StreamsChanged: true}
		}
	case *metapb.Command_CommitWal:
		a.ev.reset()
		res.Commit, res.Err = a.commitWal(l.Index, -1, op.CommitWal)
		if parts := a.ev.build(a); len(parts) > 0 {
			ev = &meta.Event{AppliedIndex: l.Index, Partitions: parts}
		}
	case *metapb.Command_CommitWalBatch:
		a.ev.reset()
		res.Commits, res.Err = a.commitWalBatch(l.Index, op.CommitWalBatch)
		if parts := a.ev.build(a); len(parts) > 0 {
			ev = &meta.Event{AppliedIndex: l.Index, Partitions: parts}
		}
	case *metapb.Command_RegisterNode:
		r := op.RegisterNode
		if r.GetId() == "" {
			res.Err = fmt.Errorf("%w: register node: empty id", meta.ErrInvalidArgument)
		} else {
			a.check(a.tx.Bucket(bNodes).Put([]byte(r.GetId()), []byte(r.GetRpcAddr())))
		}
	case *metapb.Command_AcquireLease:
		res.Lease, res.Err = a.acquireLease(op.AcquireLease)
	case *metapb.Command_ReleaseLease:
		res.Err = a.releaseLease(metapb.ToLease(op.ReleaseLease))
	case *metapb.Command_SwapIndex:
		var u meta.PartitionUpdate
		var changed bool
		u, changed, res.Err = a.swapIndex(op.SwapIndex)
		if res.Err == nil && changed {
			ev = &meta.Event{AppliedIndex: l.Index, Partitions: []meta.PartitionUpdate{u}}
		}
	case *metapb.Command_AppendSegments: // quorumindex.go
		var u meta.PartitionUpdate
		var changed bool
		u, changed, res.Err = a.appendSegments(op.AppendSegments)
		if res.Err == nil && changed {
			ev = &meta.Event{AppliedIndex: l.Index, Partitions: []meta.PartitionUpdate{u}}
		}
	case *metapb.Command_TrimPartition:
		t := op.TrimPartition
		var u *meta.PartitionUpdate
		res.Partition, u, res.Err = a.trimPartition(t.GetStreamId(), t.GetPartition(), t.GetLogStart())
		if res.Err == nil && u != nil {
			ev = &meta.Event{AppliedIndex: l.Index, Partitions: []meta.PartitionUpdate{*u}}
		}
	case *metapb.Command_ForgetRetired:
		a.forgetRetired(op.ForgetRetired.GetKeys())
	case *metapb.Command_InitProducer:
		res.Producer, res.Err = a.initProducer(op.InitProducer)
	case *metapb.Command_Auth:
		a.applyAuth(op.Auth, res)
	case *metapb.Command_Consumer:
		a.applyConsumer(op.Consumer, res)
	case *metapb.Command_SetQuota:
		res.Quota, res.Err = a.setQuota(op.SetQuota)
	case *metapb.Command_EventLedger:
		a.applyEventLedger(op.EventLedger, res)
	case *metapb.Command_KafkaGroup:
		res.KafkaGroup, res.Err = a.applyKafkaGroup(l.Index, op.KafkaGroup)
	case *metapb.Command_NamespaceKey:
		res.NamespaceKey, res.Err = a.applyNamespaceKey(op.NamespaceKey)
	case *metapb.Command_Placement:
		var changed bool
		if res.Journal, changed, res.Err = a.applyPlacement(op.Placement); changed {
			ev = &meta.Event{AppliedIndex: l.Index, JournalsChanged: true}
		}
	case *metapb.Command_Schema:
		applySchemaInto(a, op.Schema, res)
		if res.Err == nil {
			ev = &meta.Event{AppliedIndex: l.Index, StreamsChanged: true}
		}
	default:
		res.Err = fmt.Errorf("%w: index %d: unknown operation", ErrBadCommand, l.Index)
	}
	return res, ev
}

func (a *applier) createNamespace(name string) error {
	if err := checkName("namespace", name); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	b := a.tx.Bucket(bNS)
	if !hasKey(b, []byte(name)) {
		a.check(b.Put([]byte(name), nil))
	}
	return nil
}

func (a *applier) nsExists(ns string) bool {
	return hasKey(a.tx.Bucket(bNS), []byte(ns))
}

// hasKey reports whether b holds key k. Namespaces are stored with empty values, and bbolt
// answers Get of a key put with a nil value in the same (not yet committed) transaction with
// nil, as if it were absent: ApplyBatch would then see a namespace created earlier in the
// same batch as missing, and replicas that batch entries differently would diverge. A
// cursor seek does not depend on the value.
func hasKey(b *bolt.Bucket, k []byte) bool {
	got, _ := b.Cursor().Seek(k)
	return got != nil && bytes.Equal(got, k)
}

func (a *applier) createStream(c meta.StreamConfig) (meta.Stream, error) {
	c, err := NormalizeConfig(c)
	if err != nil {
		return meta.Stream{}, fmt.Errorf("create stream %s/%s: %w", c.Namespace, c.Name, err)
	}
	if !a.nsExists(c.Namespace) {
		return meta.Stream{}, fmt.Errorf("create stream %s/%s: %w", c.Namespace, c.Name, meta.ErrNamespaceNotFound)
	}
	sk := streamKey(c.Namespace, c.Name)
	streams := a.tx.Bucket(bStreams)
	if streams.Get(sk) != nil {
		return meta.Stream{}, fmt.Errorf("create stream %s/%s: %w", c.Namespace, c.Name, meta.ErrStreamExists)
	}
	m := a.tx.Bucket(bMeta)
	id := getU64(m, kNextID)
	a.check(putU64(m, kNextID, id+1))
	s := meta.Stream{ID: id, CreatedAtMs: a.clock, StreamConfig: c}
	a.putStream(sk, s)
	a.check(a.tx.Bucket(bStreamIDs).Put(u64(id), sk))
	a.addPartitions(id, 0, c.Partitions)
	if c.Class == meta.ClassQuorum {
		a.placeStream(id, c.LeaderZone, 0, c.Partitions) // placement.go
	}
	return s, nil
}

func (a *applier) putStream(sk []byte, s meta.Stream) {
	v, err := proto.Marshal(metapb.FromStream(s))
	a.check(err)
	a.check(a.tx.Bucket(bStreams).Put(sk, v))
}

func (a *applier) getStream(ns, name string) (meta.Stream, []byte, error) {
	if !a.nsExists(ns) {
		return meta.Stream{}, nil, meta.ErrNamespaceNotFound
	}
	sk := streamKey(ns, name)
	v := a.tx.Bucket(bStreams).Get(sk)
	if v == nil {
		return meta.Stream{}, nil, meta.ErrStreamNotFound
	}
	s, err := decodeStream(v)
	return s, sk, err
}

func (a *applier) updateStream(ns, name string, p meta.StreamPatch) (meta.Stream, error) {
	s, sk, err := a.getStream(ns, name)
	if err != nil {
		return s, fmt.Errorf("update stream %s/%s: %w", ns, name, err)
	}
	next, err := ApplyPatch(s.StreamConfig, p)
	if err == nil && next.Encoding == meta.EncodingArrow && next.CleanupPolicy == meta.CleanupCompact {
		err = fmt.Errorf("%w: cleanup policy compact is not supported for arrow streams yet", meta.ErrInvalidArgument)
	}
	if err != nil {
		return s, fmt.Errorf("update stream %s/%s: %w", ns, name, err)
	}
	old := s.Partitions
	s.StreamConfig = next
	a.putStream(sk, s)
	a.addPartitions(s.ID, old, next.Partitions)
	if next.Class == meta.ClassQuorum {
		a.placeStream(s.ID, next.LeaderZone, old, next.Partitions) // placement.go
	}
	return s, nil
}

func (a *applier) deleteStream(ns, name string) error {
	s, sk, err := a.getStream(ns, name)
	if err != nil {
		return fmt.Errorf("delete stream %s/%s: %w", ns, name, err)
	}
	a.check(a.tx.Bucket(bStreams).Delete(sk))
	a.check(a.tx.Bucket(bStreamIDs).Delete(u64(s.ID)))
	a.dropSchemas(s.ID)      // schemas.go
	a.dropJournalParts(s.ID) // placement.go
	prefix := u64(s.ID)
	refs := refDelta{}
	// Entries of pending commits: the partitions' tails.
	for p := range s.Partitions {
		for _, e := range a.dropTail(pkey{s.ID, p}) {
			refs.add(e.Object, -1)
		}
	}
	a.stagedOf(s.ID, true).deleted = true
	bb := a.tx.Bucket(bBlocks)
	var keys [][]byte
	var es []meta.IndexEntry
	c := bb.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var err error
		es, err = decodeBlock(k, v, es[:0])
		a.check(err)
		for _, e := range es {
			refs.add(e.Object, -1)
		}
		keys = append(keys, bytes.Clone(k))
	}
	a.deleteKeys(bb, keys)
	a.dropGroups(s.ID)
	a.applyRefs(refs)
	a.deletePrefix(a.tx.Bucket(bLeases), prefix)
	return nil
}

// deletePrefix deletes every key of b starting with prefix. Keys are collected first:
// bbolt's Cursor.Delete followed by Next skips a key when the leaf was already changed in
// the same transaction.
func (a *applier) deletePrefix(b *bolt.Bucket, prefix []byte) {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	a.deleteKeys(b, keys)
}

func (a *applier) deleteKeys(b *bolt.Bucket, keys [][]byte) {
	for _, k := range keys {
		a.check(b.Delete(k))
	}
}

// dedupeExpired reports whether a dedupe record with time key t is past the window on
// clock. Expired records are treated as absent whether or not they were pruned yet, so
// the moment of pruning never changes an answer.
func dedupeExpired(t, clock int64) bool {
	return t < clock-meta.DedupeWindow.Milliseconds()
}

// pendingKey is the pending-bucket key of a commit: its Raft index, and for commit sub of a
// CommitWalBatch the index then sub u32 (so it sorts after the entries before and before
// those after).
func pendingKey(index uint64, sub int) []byte {
	k := u64(index)
	if sub >= 0 {
		k = binary.BigEndian.AppendUint32(k, uint32(sub))
	}
	return k
}

// commitWalBatch applies the commits of a CommitWalBatch in order, each with its own
// result; the partition updates of those that applied go into one event (a.ev).
func (a *applier) commitWalBatch(index uint64, b *metapb.CommitWalBatchCmd) ([]*Result, error) {
	if len(b.GetCommits()) == 0 {
		return nil, fmt.Errorf("%w: commit wal batch: no commits", meta.ErrInvalidArgument)
	}
	out := make([]*Result, len(b.GetCommits()))
	for i, w := range b.GetCommits() {
		r := &Result{Index: index}
		r.Commit, r.Err = a.commitWal(index, i, w)
		out[i] = r
		if a.err != nil {
			break
		}
	}
	return out, nil
}

// commitWal applies one CommitWal: the whole command (sub < 0) or commit sub of a batch.
// A chunk naming a missing stream or partition is refused alone (w.PerChunk) or fails the
// whole commit (commands proposed for all or nothing, and those of leaders that predate
// per-chunk answers: replaying them gives what they gave).
func (a *applier) commitWal(index uint64, sub int, w *metapb.CommitWalCmd) (meta.CommitResult, error) {
	c, err := decodeCommitWalInto(w, a.scratch.chunks)
	if err != nil {
		return meta.CommitResult{}, err
	}
	a.scratch.chunks = c.Chunks[:0]
	if err := CheckCommit(c); err != nil {
		return meta.CommitResult{}, err
	}
	dedupe := a.tx.Bucket(bDedupe)
	if v := dedupe.Get([]byte(c.Object)); v != nil {
		var rec metapb.DedupeRecord
		if err := proto.Unmarshal(v, &rec); err != nil {
			a.check(fmt.Errorf("%w: dedupe record %s: %v", ErrCorrupt, c.Object, err))
			return meta.CommitResult{}, nil
		}
		if !dedupeExpired(rec.GetExpiresKeyMs(), a.clock) {
			return meta.CommitResult{BaseOffsets: rec.GetBaseOffsets(), Status: metapb.ToChunkStatus(rec.GetChunkStatus()),
				Duplicate: true, AppliedIndex: rec.GetAppliedIndex()}, nil
		}
	}
	if c.CreatedMs < a.clock-meta.StaleAfter.Milliseconds() {
		return meta.CommitResult{}, fmt.Errorf("commit wal %s: created %s, metastore clock %s: %w",
			c.Object, fmtMs(c.CreatedMs), fmtMs(a.clock), meta.ErrStaleCommit)
	}

	// Validate every chunk before writing anything: find each one's partition column, or
	// why it is refused. Chunks come sorted by partition (the WAL format's order); a commit
	// whose chunks are not is served too, through a map.
	n := len(c.Chunks)
	slots := a.scratch.slotsFor(n)
	parts := make([]pkey, 0, n)  // kept by the pending record
	first := a.scratch.first[:0] // each partition's first chunk
	var seen map[pkey]int
	var status []meta.ChunkStatus // nil while no chunk is refused
	var prevK pkey
	prevStatus := meta.ChunkCommitted
	for i, ch := range c.Chunks {
		k := pkey{ch.StreamID, ch.Partition}
		if i > 0 && k == prevK {
			if prevStatus != meta.ChunkCommitted {
				status[i] = prevStatus
			} else {
				slots[i] = slots[i-1]
			}
			continue
		}
		if i > 0 && seen == nil && !keyLess(prevK, k) {
			seen = make(map[pkey]int, n) // out of order: index what came before
			for j, pk := range parts {
				seen[pk] = j
			}
		}
		prevK, prevStatus = k, meta.ChunkCommitted
		if seen != nil {
			if j, ok := seen[k]; ok {
				slots[i] = slots[first[j]]
				continue
			}
		}
		gr, col, err := a.slot(ch.StreamID, ch.Partition)
		if err != nil {
			st, refusal := meta.ChunkStatusOf(err)
			if !refusal || c.AllOrNothing {
				a.scratch.first = first
				return meta.CommitResult{}, fmt.Errorf("commit wal %s: chunk %d names stream %d partition %d: %w (nothing committed)",
					c.Object, i, ch.StreamID, ch.Partition, err)
			}
			if status == nil {
				status = make([]meta.ChunkStatus, n)
			}
			status[i], prevStatus = st, st
			continue
		}
		slots[i] = slotOf{gr: gr, i: col, upd: len(parts)}
		if seen != nil {
			seen[k] = len(parts)
		}
		parts, first = append(parts, k), append(first, i)
	}
	a.scratch.first = first
	pc := a.checkProducers(c, &status)
	if a.err != nil {
		return meta.CommitResult{}, nil
	}
	if pc != nil {
		parts, first = dropRefusedParts(c, status, slots, parts, first)
		a.scratch.first = first
	}
	res := meta.CommitResult{BaseOffsets: make([]int64, n), Status: status, AppliedIndex: index}
	committed := n
	for i, st := range status {
		if st != meta.ChunkCommitted {
			res.BaseOffsets[i] = -1
			committed--
		}
	}

	if committed > 0 {
		a.assignOffsets(index, sub, w, c, parts, slots, first, status, res.BaseOffsets, committed)
	} else {
		// Nothing references the object: retire it now, so GC deletes it after its grace.
		a.retireUnreferenced(c.Object)
	}
	if pc != nil {
		pc.finish(a, c, res.BaseOffsets)
	}

	tkey := max(c.CreatedMs, a.clock)
	rec, err := proto.Marshal(&metapb.DedupeRecord{BaseOffsets: res.BaseOffsets, CommittedMs: a.clock,
		CreatedMs: c.CreatedMs, AppliedIndex: index, ExpiresKeyMs: tkey, ChunkStatus: metapb.FromChunkStatus(status)})
	a.check(err)
	a.check(dedupe.Put([]byte(c.Object), rec))
	a.check(a.tx.Bucket(bDedupeT).Put(dedupeTimeKey(tkey, c.Object), nil))
	return res, nil
}

// assignOffsets commits the chunks of c that were not refused (status[i] zero, or status
// nil): offsets in chunk order into bases, the entries to the partitions' tails and to the
// entry's event, one reference per committed chunk and a pending record of them.
func (a *applier) assignOffsets(index uint64, sub int, w *metapb.CommitWalCmd, c meta.CommitWal, parts []pkey, slots []slotOf,
	first []int, status []meta.ChunkStatus, bases []int64, committed int) {
	refused := func(i int) bool { return status != nil && status[i] != meta.ChunkCommitted }
	rk := recKey{index, int32(sub)}
	r := a.addRecord(rk, committed, parts)
	for j, k := range parts {
		s := slots[first[j]]
		a.ev.touch(a, k, s.gr.g.LogStart[s.i])
	}
	// A run of chunks of one partition appends to its tail once.
	cur, curTail := -1, ptail{}
	for i, ch := range c.Chunks {
		if refused(i) {
			continue
		}
		s := slots[i]
		if s.upd != cur {
			if cur >= 0 {
				a.setTail(parts[cur], curTail)
			}
			cur, curTail = s.upd, a.tailForAppend(parts[s.upd])
		}
		g := s.gr.g
		base := g.HighWatermark[s.i]
		bases[i] = base
		g.HighWatermark[s.i] += ch.Records
		g.Bytes[s.i] += ch.Length
		s.gr.dirty = true
		curTail.es = append(curTail.es, meta.IndexEntry{BaseOffset: base, Count: ch.Records, Kind: meta.KindWAL,
			Object: c.Object, Offset: ch.Offset, Length: ch.Length, MaxTimestamp: ch.MaxTimestamp})
		curTail.recs = append(curTail.recs, r.slot)
	}
	a.setTail(parts[cur], curTail)
	for j, k := range parts {
		s := slots[first[j]]
		a.ev.setHighWatermark(k, s.gr.g.HighWatermark[s.i])
	}
	a.applyRefs(refDelta{c.Object: int64(committed)})
	if committed == len(c.Chunks) {
		a.putPending(rk.bytes(), w, bases)
	} else {
		// The pending record holds the committed chunks only (what loadTails reads back).
		kept := meta.CommitWal{Object: c.Object, NodeID: c.NodeID, Class: c.Class, CreatedMs: c.CreatedMs,
			Chunks: make([]meta.Chunk, 0, committed)}
		keptBases := make([]int64, 0, committed)
		for i, ch := range c.Chunks {
			if !refused(i) {
				kept.Chunks, keptBases = append(kept.Chunks, ch), append(keptBases, bases[i])
			}
		}
		a.putPending(rk.bytes(), commitWalCmd(kept), keptBases)
	}
	for j, k := range parts {
		if len(a.tailOf(k).es) >= settleAt(k) {
			s := slots[first[j]]
			a.settleGroupSlot(k, s.gr, s.i)
		}
	}
	a.settleOldest()
}

// retireUnreferenced puts an object no index entry references into the retired set at the
// FSM clock (unless it is referenced or already retired).
func (a *applier) retireUnreferenced(obj string) {
	kb := []byte(obj)
	if getU64(a.tx.Bucket(bRefs), kb) > 0 {
		return
	}
	retired := a.tx.Bucket(bRetired)
	if retired.Get(kb) == nil {
		a.check(putU64(retired, kb, uint64(a.clock)))
	}
}

// prune deletes up to pruneBatch expired dedupe records and up to pruneBatch expired
// producers, oldest first.
func (a *applier) prune() {
	a.pruneProducers(pruneBatch)
	a.pruneLedger(pruneBatch)
	tb, db := a.tx.Bucket(bDedupeT), a.tx.Bucket(bDedupe)
	c := tb.Cursor()
	n := 0
	for k, _ := c.First(); k != nil && n < pruneBatch; k, _ = c.Next() {
		if len(k) < 8 || !dedupeExpired(int64(binary.BigEndian.Uint64(k)), a.clock) {
			break
		}
		obj := k[8:]
		// Delete the primary record unless a newer record replaced it (cannot happen
		// today: a live record is never overwritten).
		if v := db.Get(obj); v != nil {
			var rec metapb.DedupeRecord
			if proto.Unmarshal(v, &rec) == nil && rec.GetExpiresKeyMs() == int64(binary.BigEndian.Uint64(k)) {
				a.check(db.Delete(obj))
			}
		}
		a.check(c.Delete())
		n++
	}
}

// ---- reads ----

// ListNamespaces lists namespace names in byte order.
func (f *FSM) ListNamespaces() ([]string, error) {
	var out []string
	err := f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bNS).ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	return out, err
}

// GetStream returns a stream and its partitions' states.
func (f *FSM) GetStream(ns, name string) (meta.Stream, []meta.PartitionState, error) {
	var s meta.Stream
	var parts []meta.PartitionState
	err := f.view(func(tx *bolt.Tx) error {
		a := applier{tx: tx}
		var err error
		if s, _, err = a.getStream(ns, name); err != nil {
			return fmt.Errorf("get stream %s/%s: %w", ns, name, err)
		}
		prefix := u64(s.ID)
		c := tx.Bucket(bGroups).Cursor()
		parts = make([]meta.PartitionState, 0, s.Partitions)
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if parts, err = groupStates(k, v, parts); err != nil {
				return err
			}
		}
		return nil
	})
	return s, parts, err
}

// ListStreams lists the streams of a namespace by name.
func (f *FSM) ListStreams(ns string) ([]meta.Stream, error) {
	var out []meta.Stream
	err := f.view(func(tx *bolt.Tx) error {
		if !hasKey(tx.Bucket(bNS), []byte(ns)) {
			return fmt.Errorf("list streams %s: %w", ns, meta.ErrNamespaceNotFound)
		}
		prefix := streamKey(ns, "")
		c := tx.Bucket(bStreams).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			s, err := decodeStream(v)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

// Lookup returns up to max index entries of a partition starting with the one holding
// offset from (meta.Client.Lookup). max <= 0 answers the partition's state alone, whatever
// from is; above MaxLookup means MaxLookup.
func (f *FSM) Lookup(streamID uint64, partition int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error) {
	max = min(max, MaxLookup)
	var st meta.PartitionState
	var out []meta.IndexEntry
	err := f.view(func(tx *bolt.Tx) error {
		rec, err := readPartition(tx, streamID, partition)
		if err != nil {
			return err
		}
		if rec == nil {
			what := meta.ErrPartitionNotFound
			if tx.Bucket(bStreamIDs).Get(u64(streamID)) == nil {
				what = meta.ErrStreamNotFound
			}
			return fmt.Errorf("lookup %d/%d: %w", streamID, partition, what)
		}
		st = meta.PartitionState{StreamID: streamID, Partition: partition, LogStart: rec.GetLogStart(),
			HighWatermark: rec.GetHighWatermark(), Bytes: rec.GetBytes()}
		if max <= 0 {
			return nil
		}
		if from < st.LogStart || from > st.HighWatermark {
			return fmt.Errorf("lookup %d/%d offset %d: log start %d, high watermark %d: %w",
				streamID, partition, from, st.LogStart, st.HighWatermark, meta.ErrOffsetOutOfRange)
		}
		if from == st.HighWatermark {
			return nil
		}
		out, err = readEntries(tx, streamID, partition, rec.GetSettled(), f.t.get(pkey{streamID, partition}).es, from, math.MaxInt64, max)
		return err
	})
	return out, st, err
}

// NodeAddr returns the RPC address voter id registered, or "".
func (f *FSM) NodeAddr(id string) string {
	var addr string
	_ = f.view(func(tx *bolt.Tx) error {
		addr = string(tx.Bucket(bNodes).Get([]byte(id)))
		return nil
	})
	return addr
}

// ---- keys and values ----

func streamKey(ns, name string) []byte {
	k := make([]byte, 0, len(ns)+1+len(name))
	k = append(k, ns...)
	k = append(k, 0)
	return append(k, name...)
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func partKey(id uint64, p int32) []byte {
	k := make([]byte, 12)
	binary.BigEndian.PutUint64(k, id)
	binary.BigEndian.PutUint32(k[8:], uint32(p))
	return k
}

func indexKey(id uint64, p int32, base int64) []byte {
	k := make([]byte, 20)
	binary.BigEndian.PutUint64(k, id)
	binary.BigEndian.PutUint32(k[8:], uint32(p))
	binary.BigEndian.PutUint64(k[12:], uint64(base))
	return k
}

func dedupeTimeKey(ms int64, object string) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(object)), uint64(ms))
	return append(k, object...)
}

func getU64(b *bolt.Bucket, k []byte) uint64 {
	v := b.Get(k)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func putU64(b *bolt.Bucket, k []byte, v uint64) error { return b.Put(k, u64(v)) }

func decodeStream(v []byte) (meta.Stream, error) {
	var s metapb.Stream
	if err := proto.Unmarshal(v, &s); err != nil {
		return meta.Stream{}, fmt.Errorf("%w: stream record: %v", ErrCorrupt, err)
	}
	return metapb.ToStream(&s), nil
}

func decodePartitionRecord(k, v []byte) (*metapb.PartitionRecord, error) {
	r := &metapb.PartitionRecord{}
	if err := proto.Unmarshal(v, r); err != nil {
		return nil, fmt.Errorf("%w: partition record %x: %v", ErrCorrupt, k, err)
	}
	return r, nil
}

func decodeIndex(k, v []byte) (meta.IndexEntry, error) {
	var r metapb.IndexRecord
	if len(k) != 20 {
		return meta.IndexEntry{}, fmt.Errorf("%w: index key of %d bytes", ErrCorrupt, len(k))
	}
	if err := proto.Unmarshal(v, &r); err != nil {
		return meta.IndexEntry{}, fmt.Errorf("%w: index record: %v", ErrCorrupt, err)
	}
	return meta.IndexEntry{
		BaseOffset: int64(binary.BigEndian.Uint64(k[12:])), Count: r.GetCount(), Kind: meta.EntryKind(r.GetKind()),
		Object: r.GetObject(), Offset: r.GetOffset(), Length: r.GetLength(), MaxTimestamp: r.GetMaxTimestamp(),
	}, nil
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// removeFile removes path, ignoring a missing file.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
