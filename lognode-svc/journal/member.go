package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/sequencer-svc/raftlog"
	"github.com/loamhq/loam/shared/meta"
)

// Member errors.
var (
	// ErrJournalFull: the journal holds Config.MaxRetainedBytes of batches not yet
	// offloaded; nothing was written, retry after offload catches up.
	ErrJournalFull = errors.New("journal: full")
	// ErrCommitUnknown: the leader lost its leadership while the append was in flight; it
	// may or may not be committed. An idempotent producer's retry is answered either way.
	ErrCommitUnknown = errors.New("journal: commit outcome unknown")
	// ErrTooLarge: an append larger than Config.MaxEntryBytes.
	ErrTooLarge = errors.New("journal: append too large")
	// ErrClosed: the member is shut down.
	ErrClosed = errors.New("journal: member closed")
)

// NotLeaderError: this member is not the journal's leader; Leader names the one it knows
// of (empty while an election runs). Nothing was written. errors.Is(err, raft.ErrNotLeader).
type NotLeaderError struct {
	Journal    string
	LeaderID   string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return fmt.Sprintf("journal %s: not the leader, no leader known", e.Journal)
	}
	return fmt.Sprintf("journal %s: not the leader, the leader is %s at %s", e.Journal, e.LeaderID, e.LeaderAddr)
}

func (e *NotLeaderError) Is(target error) bool { return target == raft.ErrNotLeader }

// Config configures one member of one journal.
type Config struct {
	Journal string // the journal's id
	ID      string // this member's id (its log node's id)
	Dir     string // its Raft log (raft.db) and snapshots
	Mux     *Mux   // the log node's Raft listener

	// Bootstrap, when the member has no Raft state yet, starts the journal with Voters
	// (this member included). Every initial member may bootstrap with the same voters.
	Bootstrap bool
	Voters    []raft.Server

	NoSync bool // tests and benchmarks only: the log is not fsynced

	HeartbeatTimeout   time.Duration // default 500 ms
	ElectionTimeout    time.Duration // default 500 ms
	LeaderLeaseTimeout time.Duration // default 500 ms
	CommitTimeout      time.Duration // default 5 ms: how soon followers learn a commit
	SnapshotThreshold  uint64        // default 8192 entries
	SnapshotInterval   time.Duration // default 30 s
	TrailingLogs       uint64        // default 4096 entries kept behind a snapshot
	ApplyTimeout       time.Duration // default 10 s: an append's wait to enter the log

	MaxRetainedBytes  int64 // default 256 MiB: appends are refused (ErrJournalFull) at this
	MaxEntryBytes     int   // default 8 MiB per append
	MaxInflight       int   // default 256 appends in flight at once
	MaxProducerStates int   // default DefaultMaxProducerStates; the same on every member

	LogOutput io.Writer // Raft's log (default os.Stderr)
	LogLevel  string    // default "warn"
}

func (c *Config) defaults() error {
	if err := checkJournalID(c.Journal); err != nil {
		return err
	}
	if c.ID == "" {
		return fmt.Errorf("journal %s: member id is empty", c.Journal)
	}
	if c.Dir == "" {
		return fmt.Errorf("journal %s: member %s: no data dir", c.Journal, c.ID)
	}
	if c.Mux == nil {
		return fmt.Errorf("journal %s: member %s: no raft mux", c.Journal, c.ID)
	}
	dur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	dur(&c.HeartbeatTimeout, 500*time.Millisecond)
	dur(&c.ElectionTimeout, 500*time.Millisecond)
	dur(&c.LeaderLeaseTimeout, 500*time.Millisecond)
	dur(&c.CommitTimeout, 5*time.Millisecond)
	dur(&c.SnapshotInterval, 30*time.Second)
	dur(&c.ApplyTimeout, 10*time.Second)
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 4096
	}
	if c.MaxRetainedBytes <= 0 {
		c.MaxRetainedBytes = 256 << 20
	}
	if c.MaxEntryBytes <= 0 {
		c.MaxEntryBytes = 8 << 20
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = 256
	}
	if c.LogOutput == nil {
		c.LogOutput = os.Stderr
	}
	if c.LogLevel == "" {
		c.LogLevel = "warn"
	}
	return nil
}

// Member is one member of a journal: its Raft node and its copy of the state machine.
type Member struct {
	cfg   Config
	fsm   *fsm
	raft  *raft.Raft
	store *raftlog.Store
	trans *raft.NetworkTransport
	sem   chan struct{}
	done  chan struct{}
	once  sync.Once
	off   *offloader // offload.go; nil: not configured
}

// Open starts a member.
func Open(cfg Config) (*Member, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal %s: data dir: %w", cfg.Journal, err)
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "journal-raft", Level: hclog.LevelFromString(cfg.LogLevel), JSONFormat: true,
		Output: cfg.LogOutput}).With("journal", cfg.Journal, "member", cfg.ID)
	m := &Member{cfg: cfg, fsm: newFSM(cfg.MaxProducerStates), sem: make(chan struct{}, cfg.MaxInflight), done: make(chan struct{})}
	var err error
	if m.store, err = raftlog.Open(filepath.Join(cfg.Dir, "raft.db"), raftlog.Options{NoSync: cfg.NoSync}); err != nil {
		return nil, err
	}
	fail := func(err error) (*Member, error) {
		if m.trans != nil {
			m.trans.Close()
		}
		m.store.Close()
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		return fail(fmt.Errorf("journal %s: snapshot store: %w", cfg.Journal, err))
	}
	layer, err := cfg.Mux.Layer(cfg.Journal)
	if err != nil {
		return fail(err)
	}
	m.trans = raft.NewNetworkTransportWithLogger(layer, 3, 10*time.Second, hlog)
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	if err := raft.ValidateConfig(rc); err != nil {
		return fail(fmt.Errorf("journal %s: raft config: %w", cfg.Journal, err))
	}
	logs, err := raft.NewLogCache(512, m.store)
	if err != nil {
		return fail(err)
	}
	if cfg.Bootstrap {
		has, err := raft.HasExistingState(logs, m.store, snaps)
		if err != nil {
			return fail(fmt.Errorf("journal %s: raft state: %w", cfg.Journal, err))
		}
		if !has {
			if err := raft.BootstrapCluster(rc, logs, m.store, snaps, m.trans, raft.Configuration{Servers: cfg.Voters}); err != nil {
				return fail(fmt.Errorf("journal %s: bootstrap: %w", cfg.Journal, err))
			}
		}
	}
	if m.raft, err = raft.NewRaft(rc, m.fsm, logs, m.store, snaps, m.trans); err != nil {
		return fail(fmt.Errorf("journal %s: raft: %w", cfg.Journal, err))
	}
	return m, nil
}

// Close shuts the member down; its log stays for a restart.
func (m *Member) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		err = m.raft.Shutdown().Error()
		m.trans.Close()
		if cerr := m.store.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// Journal is the member's journal id.
func (m *Member) Journal() string { return m.cfg.Journal }

// ID is the member's id.
func (m *Member) ID() string { return m.cfg.ID }

// Addr is the member's Raft address.
func (m *Member) Addr() raft.ServerAddress { return m.cfg.Mux.MemberAddr(m.cfg.Journal) }

// IsLeader reports whether the member leads its journal.
func (m *Member) IsLeader() bool { return m.raft.State() == raft.Leader }

// Leader is the leader this member knows of (empty ids while there is none).
func (m *Member) Leader() (id string, addr raft.ServerAddress) {
	a, i := m.raft.LeaderWithID()
	return string(i), a
}

// LeaderCh is raft's leadership notification channel (true: became leader).
func (m *Member) LeaderCh() <-chan bool { return m.raft.LeaderCh() }

// Voters is the journal's current membership as this member knows it.
func (m *Member) Voters() ([]raft.Server, error) {
	f := m.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

// AddVoter adds a member (on the leader; raft catches it up from a snapshot and the log).
func (m *Member) AddVoter(id string, addr raft.ServerAddress) error {
	if err := m.raft.AddVoter(raft.ServerID(id), addr, 0, m.cfg.ApplyTimeout).Error(); err != nil {
		return m.leaderErr(fmt.Errorf("journal %s: add voter %s: %w", m.cfg.Journal, id, err))
	}
	return nil
}

// RemoveServer removes a member (on the leader).
func (m *Member) RemoveServer(id string) error {
	if err := m.raft.RemoveServer(raft.ServerID(id), 0, m.cfg.ApplyTimeout).Error(); err != nil {
		return m.leaderErr(fmt.Errorf("journal %s: remove %s: %w", m.cfg.Journal, id, err))
	}
	return nil
}

// TransferLeadership hands the leadership of the journal (on its leader) to member id at
// addr: raft replicates to it until it has the leader's log, then asks it to start an
// election at once. While the transfer runs (at most the election timeout) appends are
// refused with a NotLeaderError naming no leader, so the node retries them; nothing is
// written.
func (m *Member) TransferLeadership(id string, addr raft.ServerAddress) error {
	if err := m.raft.LeadershipTransferToServer(raft.ServerID(id), addr).Error(); err != nil {
		return m.leaderErr(fmt.Errorf("journal %s: hand leadership to %s: %w", m.cfg.Journal, id, err))
	}
	return nil
}

func (m *Member) leaderErr(err error) error {
	if errors.Is(err, raft.ErrNotLeader) {
		id, addr := m.Leader()
		return &NotLeaderError{Journal: m.cfg.Journal, LeaderID: id, LeaderAddr: string(addr)}
	}
	return err
}

// Append proposes a on the leader and waits for its commit on a majority of the members
// and its application here. A refusal of the state machine (duplicate excepted) is the
// returned error; a duplicate returns the original offsets with Duplicate set.
func (m *Member) Append(ctx context.Context, a Append) (Result, error) {
	if len(a.Batches) == 0 {
		return Result{}, fmt.Errorf("%w: %s: no batches", ErrBadBatches, a.Partition)
	}
	if len(a.Batches) > m.cfg.MaxEntryBytes {
		return Result{}, fmt.Errorf("%w: %s: %d bytes of batches, at most %d", ErrTooLarge, a.Partition, len(a.Batches), m.cfg.MaxEntryBytes)
	}
	if a.ClockMs == 0 {
		a.ClockMs = time.Now().UnixMilli()
	}
	return m.propose(ctx, AppendEntry(make([]byte, 0, appendHeader+len(a.Batches)), a), true)
}

// Assign proposes an Assign entry (a quorum stream's partitions placed in the journal).
func (m *Member) Assign(ctx context.Context, a Assign) (Result, error) {
	if a.ClockMs == 0 {
		a.ClockMs = time.Now().UnixMilli()
	}
	b := AssignEntry(nil, a)
	if _, err := DecodeAssign(b); err != nil {
		return Result{}, err
	}
	return m.propose(ctx, b, false)
}

// Seal proposes a Seal entry (on the leader): the partition refuses appends with
// ErrMoved (sealed) or takes them again.
func (m *Member) Seal(ctx context.Context, e Seal) (Result, error) {
	if e.ClockMs == 0 {
		e.ClockMs = time.Now().UnixMilli()
	}
	return m.propose(ctx, SealEntry(nil, e), false)
}

// Adopt proposes an Adopt entry (on the leader): the partition starts at a.Start with
// the carried producer states (State.ApplyAdopt).
func (m *Member) Adopt(ctx context.Context, a Adopt) (Result, error) {
	if a.ClockMs == 0 {
		a.ClockMs = time.Now().UnixMilli()
	}
	b, err := AdoptEntry(nil, a)
	if err != nil {
		return Result{}, err
	}
	return m.propose(ctx, b, false)
}

// MoveState is what a move needs to know of a partition on this member.
type MoveState struct {
	Sealed   bool
	Next     int64 // its next offset (end)
	Retained int64 // bytes of batches not offloaded
}

// MoveState reads the partition's move state.
func (m *Member) MoveState(p Partition) MoveState {
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	pt := m.fsm.st.parts[p]
	if pt == nil {
		return MoveState{}
	}
	return MoveState{Sealed: pt.sealed, Next: pt.next, Retained: pt.bytes}
}

// ProducersOf is the partition's producer states to carry in a move (State.ProducersOf).
func (m *Member) ProducersOf(p Partition) []meta.ProducerCarry {
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	return m.fsm.st.ProducersOf(p)
}

// Has reports whether the partition is in the journal on this member.
func (m *Member) Has(p Partition) bool {
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	return m.fsm.st.Has(p)
}

// TrimTo proposes a Trim entry (after its segment is committed to the offset index).
func (m *Member) TrimTo(ctx context.Context, t Trim) (Result, error) {
	if t.ClockMs == 0 {
		t.ClockMs = time.Now().UnixMilli()
	}
	b := TrimEntry(nil, t)
	if _, err := DecodeTrim(b); err != nil {
		return Result{}, err
	}
	return m.propose(ctx, b, false)
}

func (m *Member) propose(ctx context.Context, data []byte, bounded bool) (Result, error) {
	if m.raft.State() != raft.Leader {
		return Result{}, m.leaderErr(raft.ErrNotLeader)
	}
	if bounded && m.fsm.retained() >= m.cfg.MaxRetainedBytes {
		return Result{}, fmt.Errorf("%w: journal %s holds %d bytes not offloaded, at most %d", ErrJournalFull, m.cfg.Journal, m.fsm.retained(), m.cfg.MaxRetainedBytes)
	}
	select {
	case m.sem <- struct{}{}:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-m.done:
		return Result{}, ErrClosed
	}
	defer func() { <-m.sem }()
	timeout := m.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	f := m.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader):
			return Result{}, m.leaderErr(err)
		case errors.Is(err, raft.ErrLeadershipTransferInProgress): // refused before the log: retry once the next leader is known
			return Result{}, &NotLeaderError{Journal: m.cfg.Journal}
		case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown):
			return Result{}, fmt.Errorf("%w: journal %s: %v", ErrCommitUnknown, m.cfg.Journal, err)
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return Result{}, fmt.Errorf("journal %s: %w", m.cfg.Journal, err) // never entered the log
		}
		return Result{}, fmt.Errorf("%w: journal %s: %v", ErrCommitUnknown, m.cfg.Journal, err)
	}
	r, _ := f.Response().(Result)
	r.Index = f.Index()
	return r, r.Err
}

// Read serves the partition's committed batches from offset on (State.Read) from this
// member's state, leader or follower.
func (m *Member) Read(p Partition, offset int64, maxBytes int) (ReadResult, error) {
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	return m.fsm.st.Read(p, offset, maxBytes)
}

// Next is the partition's high watermark on this member.
func (m *Member) Next(p Partition) int64 {
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	return m.fsm.st.Next(p)
}

// Segments lists the partition's offloaded segments on this member.
func (m *Member) Segments(p Partition) []SegmentRef {
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	return m.fsm.st.Segments(p)
}

// Applied is the Raft index this member has applied: a consistency token of a journal
// commit is its Result.Index, and a member at or past it serves that commit.
func (m *Member) Applied() uint64 {
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	return m.fsm.applied
}

// WaitApplied waits until the member applied index (read-your-writes through any member).
func (m *Member) WaitApplied(ctx context.Context, index uint64) error {
	return m.wait(ctx, func() bool { return m.fsm.applied >= index })
}

// WaitOffset waits until the partition's high watermark passes offset (long-poll fetch).
func (m *Member) WaitOffset(ctx context.Context, p Partition, offset int64) error {
	return m.wait(ctx, func() bool { return m.fsm.st.Next(p) > offset })
}

func (m *Member) wait(ctx context.Context, ok func() bool) error {
	for {
		m.fsm.mu.RLock()
		if ok() {
			m.fsm.mu.RUnlock()
			return nil
		}
		ch := m.fsm.changed
		m.fsm.mu.RUnlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-m.done:
			return ErrClosed
		}
	}
}

// Stats is a member's counters.
type Stats struct {
	Applied   uint64
	Retained  int64
	Producers int
}

// Stats reads the member's counters.
func (m *Member) Stats() Stats {
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	return Stats{Applied: m.fsm.applied, Retained: m.fsm.st.Retained(), Producers: m.fsm.st.Producers()}
}

// Snapshot takes a Raft snapshot now (the log before it is compacted).
func (m *Member) Snapshot() error { return m.raft.Snapshot().Error() }

// ---- raft.FSM ----

type fsm struct {
	mu           sync.RWMutex
	st           *State
	applied      uint64
	changed      chan struct{} // closed and replaced on every applied batch
	maxProducers int
}

var _ raft.BatchingFSM = (*fsm)(nil)

func newFSM(maxProducers int) *fsm {
	return &fsm{st: NewState(maxProducers), changed: make(chan struct{}), maxProducers: maxProducers}
}

func (f *fsm) retained() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Retained()
}

func (f *fsm) applyOne(l *raft.Log) any {
	if l.Index > f.applied {
		f.applied = l.Index
	}
	if l.Type != raft.LogCommand {
		return nil
	}
	kind, err := EntryKind(l.Data)
	if err != nil {
		return Result{Err: err}
	}
	switch kind {
	case KindAppend:
		a, err := DecodeAppend(l.Data)
		if err != nil {
			return Result{Err: err}
		}
		return f.st.ApplyAppend(a)
	case KindAssign:
		a, err := DecodeAssign(l.Data)
		if err != nil {
			return Result{Err: err}
		}
		return f.st.ApplyAssign(a)
	case KindSeal:
		e, err := DecodeSeal(l.Data)
		if err != nil {
			return Result{Err: err}
		}
		return f.st.ApplySeal(e)
	case KindAdopt:
		a, err := DecodeAdopt(l.Data)
		if err != nil {
			return Result{Err: err}
		}
		return f.st.ApplyAdopt(a)
	default:
		t, err := DecodeTrim(l.Data)
		if err != nil {
			return Result{Err: err}
		}
		return f.st.ApplyTrim(t)
	}
}

func (f *fsm) broadcast() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fsm) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.applyOne(l)
	f.broadcast()
	return r
}

func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	for i, l := range logs {
		out[i] = f.applyOne(l)
	}
	f.broadcast()
	return out
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &fsmSnap{st: f.st.clone(), applied: f.applied}, nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("journal: read snapshot: %w", err)
	}
	if len(b) < 8 {
		return fmt.Errorf("%w: %d bytes, no applied index", ErrBadSnapshot, len(b))
	}
	applied := binary.BigEndian.Uint64(b)
	st, err := ReadSnapshot(b[8:], f.maxProducers)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.st = st
	f.applied = applied
	f.broadcast()
	f.mu.Unlock()
	return nil
}

// fsmSnap is a Raft snapshot: the applied index (u64, big-endian), then the state
// (State.WriteSnapshot).
type fsmSnap struct {
	st      *State
	applied uint64
}

func (s *fsmSnap) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(binary.BigEndian.AppendUint64(nil, s.applied)); err != nil {
		sink.Cancel()
		return err
	}
	if err := s.st.WriteSnapshot(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnap) Release() {}
