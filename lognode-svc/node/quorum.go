package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/lognode-svc/journal"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/walfmt"
)

// JournalVoter is one member of the node's journal: its log node's id and the host:port
// of that node's journal Raft listener (its JournalAddr, or JournalAdvertise).
type JournalVoter struct {
	ID   string
	Addr string
}

// QuorumConfig is the quorum class of a node (docs/quorum.md). Its journal, a Raft group
// of the Voters' log nodes, holds every partition of every quorum stream: the node's
// member of it, when the node is one of the Voters, orders and acknowledges their
// produces on a majority fsync and serves their fetches.
type QuorumConfig struct {
	// Addr is the journal Raft listener's address (one port for every journal the node
	// hosts, and for produces other nodes forward to its leader); empty: the class is not
	// served and quorum streams are refused.
	Addr      string
	Advertise string // host:port other nodes reach Addr at (default: the listener's)
	Dir       string // the member's Raft log and snapshots (<Dir>/<journal>)
	Journal   string // the static journal's id (default "j0")
	// Voters are the static journal's members. Empty: placement mode, where the
	// sequencer's placement controller creates the journals and picks their members
	// (quorum_placement.go), and the node learns them from the metastore.
	Voters []JournalVoter
	NoSync bool // tests and benchmarks only: the log is not fsynced
	// Member tunes the member (timeouts, bounds); zero fields take journal's defaults.
	Member journal.Config
	// RetryFor bounds how long a produce is retried inside the node while its journal
	// elects a leader or the leader's node is unreachable (default 10 s, never past the
	// produce's own wait).
	RetryFor time.Duration

	// ---- Offload of sealed ranges to segments (journal/offload.go) ----

	// OffloadBytes seals a partition's range into a segment once the journal holds this
	// much of it (default 16 MiB); OffloadAge once its oldest batch waited this long
	// (default 30 s). The node's Bucket holds the segments; the sequencer's index (Meta,
	// a meta.QuorumIndexClient) references them.
	OffloadBytes int64
	OffloadAge   time.Duration
	// Offload tunes the rest (interval, parallelism, lease); zero fields take defaults.
	Offload   journal.OffloadConfig
	NoOffload bool // testing aid: nothing is offloaded (the journal fills up)

	// LeaderZoneHold is how long a member leads a journal, at least, before this node
	// hands its leadership to the zone its streams hint (quorum_leaderzone.go; default
	// 30 s): leadership moves at most once per hold.
	LeaderZoneHold time.Duration
}

// quorum is a node's quorum class: writer.Writer of its produces, reader.JournalSource
// of its fetches.
type quorum struct {
	cfg  QuorumConfig
	mux  *journal.Mux
	host *journal.Host
	keys *envelope.Catalog
	log  *slog.Logger
	pl   *placement // placement mode (no static voters); nil: the static journal

	draining context.Context // done once the node drains: open long-polls answer
	drain    context.CancelFunc
}

var (
	_ writer.Writer        = (*quorum)(nil)
	_ reader.JournalSource = (*quorum)(nil)
)

// startQuorum starts the journal host of cfg.Quorum (nil when Addr is empty).
func startQuorum(cfg *Config, keys *envelope.Catalog, reg prometheus.Registerer, log *slog.Logger) (*quorum, error) {
	qc := cfg.Quorum
	if qc.Addr == "" {
		return nil, nil
	}
	placed := len(qc.Voters) == 0 // placement mode: the sequencer places journals
	if qc.Journal == "" && !placed {
		qc.Journal = "j0"
	}
	if placed && qc.Dir == "" {
		return nil, errors.New("node: the quorum class without static voters (placement by the sequencer) needs a directory for its journal members' logs")
	}
	voters := make([]raft.Server, len(qc.Voters))
	member := false
	for i, v := range qc.Voters {
		if v.ID == "" || v.Addr == "" {
			return nil, fmt.Errorf("node: journal voter %d: %q at %q: want a node id and a host:port", i, v.ID, v.Addr)
		}
		voters[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(v.ID), Address: raft.ServerAddress(v.Addr + "/" + qc.Journal)}
		member = member || v.ID == cfg.NodeID
	}
	if member && qc.Dir == "" {
		return nil, errors.New("node: the quorum class needs a directory for its journal member's log")
	}
	var mux *journal.Mux
	var err error
	if id := cfg.PeerIdentity; id != nil {
		// The cluster identity: Raft and forwarded produces only between its nodes.
		if !id.HasCA() || !id.HasCertificate() {
			return nil, errors.New("node: the journal needs the cluster CA and a certificate it issued")
		}
		mux, err = journal.ListenMuxTLS(qc.Addr, qc.Advertise, id.ServerConfig(), id.PeerClientConfig())
	} else {
		mux, err = journal.ListenMux(qc.Addr, qc.Advertise)
	}
	if err != nil {
		return nil, err
	}
	mc := qc.Member
	mc.NoSync = qc.NoSync
	if mc.LogOutput == nil {
		mc.LogOutput = slog.NewLogLogger(log.Handler(), slog.LevelWarn).Writer()
	}
	dir := qc.Dir
	if dir == "" {
		dir = filepath.Join("/nonexistent", "journal") // no member here: never written
	}
	var offload *journal.OffloadConfig
	if idx, ok := cfg.Meta.(journal.OffloadIndex); ok && !qc.NoOffload {
		oc := qc.Offload
		oc.Bucket, oc.Index, oc.SegmentBytes, oc.MaxAge = cfg.Bucket, idx, qc.OffloadBytes, qc.OffloadAge
		if oc.Logger == nil {
			oc.Logger = log
		}
		offload = &oc
	} else if !qc.NoOffload {
		log.Warn("quorum class: the sequencer client cannot append segments; nothing is offloaded", "client", fmt.Sprintf("%T", cfg.Meta))
	}
	host, err := journal.NewHost(journal.HostConfig{NodeID: cfg.NodeID, Dir: dir, Mux: mux, Member: mc, Offload: offload, RetryFor: qc.RetryFor})
	if err != nil {
		mux.Close()
		return nil, err
	}
	switch {
	case placed:
	case member:
		if _, err := host.Start(qc.Journal, voters, true); err != nil {
			host.Close()
			mux.Close()
			return nil, err
		}
	default:
		host.Know(qc.Journal, voters)
	}
	log.Info("quorum class served", "journal", qc.Journal, "raft", mux.Addr(), "member", member, "voters", len(voters), "placement", placed)
	cfg.Quorum = qc
	q := &quorum{cfg: qc, mux: mux, host: host, keys: keys, log: log}
	q.draining, q.drain = context.WithCancel(context.Background())
	if placed {
		q.pl = startPlacement(q, cfg.NodeID, cfg.Meta) // quorum_placement.go
	}
	if reg != nil {
		if err := reg.Register(journalCollector{host}); err != nil {
			q.close()
			return nil, fmt.Errorf("node: journal metrics: %w", err)
		}
	}
	return q, nil
}

var (
	journalLeaderDesc   = prometheus.NewDesc("loam_journal_leader", "1 while this node's member leads the journal", []string{"journal"}, nil)
	journalAppliedDesc  = prometheus.NewDesc("loam_journal_applied_index", "the journal's Raft index this node's member applied", []string{"journal"}, nil)
	journalRetainedDesc = prometheus.NewDesc("loam_journal_retained_bytes", "bytes of committed batches this node's member holds (not offloaded)", []string{"journal"}, nil)
)

// journalCollector reports the gauges of every journal member the node hosts.
type journalCollector struct{ host *journal.Host }

func (c journalCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- journalLeaderDesc
	ch <- journalAppliedDesc
	ch <- journalRetainedDesc
}

func (c journalCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.host.Members() {
		leader := 0.0
		if m.IsLeader() {
			leader = 1
		}
		ch <- prometheus.MustNewConstMetric(journalLeaderDesc, prometheus.GaugeValue, leader, m.Journal())
		ch <- prometheus.MustNewConstMetric(journalAppliedDesc, prometheus.GaugeValue, float64(m.Applied()), m.Journal())
		ch <- prometheus.MustNewConstMetric(journalRetainedDesc, prometheus.GaugeValue, float64(m.Stats().Retained), m.Journal())
	}
}

func (q *quorum) close() {
	q.drain()
	if q.pl != nil {
		q.pl.stop()
	}
	q.host.Close()
	q.mux.Close()
}

// ---- produce (writer.Writer) ----

// quorumRefusal reports a produce refused with nothing written: by the journal (a
// producer's sequence or epoch, its batches, its size, the journal full) or before it
// (writer.ErrInvalidRequest: a request the class cannot take, such as one of a namespace
// with a key).
func quorumRefusal(err error) bool {
	for _, e := range []error{meta.ErrOutOfOrderSequence, meta.ErrProducerFenced, meta.ErrUnknownProducer, journal.ErrBadBatches,
		journal.ErrTooLarge, journal.ErrJournalFull, meta.ErrInvalidArgument, writer.ErrInvalidRequest} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Write appends each request to the journal, in parallel, and answers once each is
// committed on a majority of its members.
func (q *quorum) Write(ctx context.Context, reqs []writer.Request) ([]writer.Result, error) {
	out := make([]writer.Result, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = q.write(ctx, reqs[i])
		}()
	}
	wg.Wait()
	var first, fatal error
	refused := 0
	for i, err := range errs {
		switch {
		case err == nil:
		case quorumRefusal(err):
			refused++
			out[i] = writer.Result{BaseOffset: -1, Err: fmt.Errorf("%w: %w", writer.ErrCommitFailed, err)}
			if first == nil {
				first = out[i].Err
			}
		case fatal == nil || errors.Is(err, journal.ErrCommitUnknown):
			fatal = err
		}
	}
	switch {
	case fatal != nil && errors.Is(fatal, journal.ErrCommitUnknown):
		return nil, fmt.Errorf("%w: %v", writer.ErrCommitUnknown, fatal)
	case fatal != nil && errors.Is(fatal, context.Canceled), fatal != nil && errors.Is(fatal, context.DeadlineExceeded):
		return nil, fmt.Errorf("%w: %v", writer.ErrCommitUnknown, fatal)
	case fatal != nil:
		return nil, fmt.Errorf("%w: %w", writer.ErrCommitFailed, fatal)
	case refused == len(reqs):
		return out, first
	case refused > 0:
		return out, fmt.Errorf("%w: %d of %d requests refused, the others committed; first: %v", writer.ErrPartialCommit, refused, len(reqs), first)
	}
	return out, nil
}

func (q *quorum) write(ctx context.Context, r writer.Request) (writer.Result, error) {
	if r.Encoding != 0 && r.Encoding != walfmt.EncodingKafka {
		return writer.Result{}, fmt.Errorf("%w: %w: quorum streams hold kafka-encoded batches, not encoding %d", writer.ErrInvalidRequest, meta.ErrInvalidArgument, r.Encoding)
	}
	if r.Partition < 0 {
		return writer.Result{}, fmt.Errorf("%w: %w: partition %d", writer.ErrInvalidRequest, meta.ErrInvalidArgument, r.Partition)
	}
	if q.keys != nil {
		if _, keyed, err := q.keys.NamespaceOf(ctx, r.StreamID); err != nil {
			return writer.Result{}, err
		} else if keyed {
			// Journal logs would hold the batches in the clear.
			return writer.Result{}, fmt.Errorf("%w: %w: stream %d is in a namespace with a key: quorum streams are not served for such namespaces yet", writer.ErrInvalidRequest, meta.ErrInvalidArgument, r.StreamID)
		}
	}
	var jid string
	var res journal.Result
	a := journal.Append{Partition: journal.Partition{Stream: r.StreamID, Partition: uint32(r.Partition)}, Producer: r.Producer, Batches: r.Batches}
	// A partition moving to another journal is refused (journal.ErrMoved) from its seal
	// until the placement names the new journal: read it again and retry there.
	for deadline := time.Now().Add(movedRetryFor); ; {
		var err error
		if jid, err = q.journalOf(ctx, r.StreamID, r.Partition); err != nil {
			return writer.Result{}, err
		}
		res, err = q.host.Append(ctx, jid, a)
		if err == nil {
			break
		}
		if !errors.Is(err, journal.ErrMoved) {
			return writer.Result{}, err
		}
		if q.pl == nil || time.Now().After(deadline) {
			return writer.Result{}, fmt.Errorf("%w: %v", meta.ErrUnavailable, err)
		}
		q.pl.changed()
		select {
		case <-time.After(movedRetryWait):
		case <-ctx.Done():
			return writer.Result{}, fmt.Errorf("%w: %v", meta.ErrUnavailable, err)
		}
	}
	q.awaitLocal(ctx, jid, res.Index)
	return writer.Result{BaseOffset: res.Base, Token: res.Index, Duplicate: res.Duplicate}, nil
}

// How long a produce to a partition being moved retries (journal.ErrMoved), and how
// often.
const (
	movedRetryFor  = 10 * time.Second
	movedRetryWait = 50 * time.Millisecond
)

// localApplyWait bounds how long an acknowledgement waits for this node's member to apply
// the commit (followers learn a commit with the leader's next append or heartbeat).
const localApplyWait = time.Second

// awaitLocal waits, at most localApplyWait, for this node's member to apply index, so a
// fetch through the node that took a produce sees it (the commit is durable already).
func (q *quorum) awaitLocal(ctx context.Context, jid string, index uint64) {
	m := q.host.Member(jid)
	if m == nil || index == 0 || m.Applied() >= index {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, localApplyWait)
	defer cancel()
	_ = m.WaitApplied(wctx, index)
}

// Close has nothing buffered: each Write returns once committed.
func (q *quorum) Close(context.Context) error { return nil }

// ---- fetch (reader.JournalSource) ----

func (q *quorum) local(streamID uint64, partition int32) (*journal.Member, journal.Partition, bool) {
	p := journal.Partition{Stream: streamID, Partition: uint32(partition)}
	jid, ok := q.knownJournal(streamID, partition)
	if !ok || partition < 0 {
		return nil, p, false
	}
	m := q.host.Member(jid)
	if m == nil || !m.Has(p) {
		return nil, p, false
	}
	return m, p, true
}

// remote is the journal a node without a member of it reads the partition from: the
// static journal, or the one the placement names.
func (q *quorum) remote(streamID uint64, partition int32) (string, bool) {
	if partition < 0 {
		return "", false
	}
	jid, ok := q.knownJournal(streamID, partition)
	if !ok || q.host.Member(jid) != nil {
		return "", false
	}
	return jid, true
}

// FetchJournal serves a quorum partition from this node's member (leader or follower),
// or, on a node without a member, from a member's (journal.Host.ReadRemote). Below the
// journal's start the offsets are in segments: reader.ErrInSegments.
func (q *quorum) FetchJournal(ctx context.Context, streamID uint64, partition int32, offset int64, maxBytes int, maxWait time.Duration) (reader.Result, bool, error) {
	m, p, ok := q.local(streamID, partition)
	if !ok {
		if jid, ok := q.remote(streamID, partition); ok && q.host.HasRemote(ctx, jid, p) {
			return q.fetchRemote(ctx, jid, p, offset, maxBytes, maxWait)
		}
		return reader.Result{}, false, nil
	}
	for waited := false; ; waited = true {
		rr, err := m.Read(p, offset, maxBytes)
		if errors.Is(err, journal.ErrOffloaded) {
			return reader.Result{LogStart: rr.Start, HighWatermark: rr.HighWatermark}, true, reader.ErrInSegments
		}
		if errors.Is(err, meta.ErrOffsetOutOfRange) {
			return reader.Result{LogStart: rr.Start, HighWatermark: rr.HighWatermark},
				true, &reader.ErrOutOfRange{Offset: offset, LogStart: rr.Start, HighWatermark: rr.HighWatermark}
		}
		if err != nil {
			return reader.Result{}, true, err
		}
		if len(rr.Batches) > 0 || maxWait <= 0 || waited {
			return reader.Result{Batches: splitBatches(rr.Batches), NextOffset: rr.Next, HighWatermark: rr.HighWatermark, LogStart: rr.Start}, true, nil
		}
		wctx, cancel := context.WithTimeout(ctx, maxWait)
		stop := context.AfterFunc(q.draining, cancel) // the node drains: answer what there is
		err = m.WaitOffset(wctx, p, offset)
		stop()
		cancel()
		if ctx.Err() != nil {
			return reader.Result{}, true, ctx.Err()
		}
	}
}

// fetchRemote serves a fetch of a node without a member from a member's state.
func (q *quorum) fetchRemote(ctx context.Context, jid string, p journal.Partition, offset int64, maxBytes int, maxWait time.Duration) (reader.Result, bool, error) {
	if q.draining.Err() != nil {
		maxWait = 0
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(q.draining, cancel) // the node drains: answer what there is
	defer stop()
	rr, err := q.host.ReadRemote(rctx, jid, p, offset, maxBytes, maxWait)
	switch {
	case errors.Is(err, journal.ErrNotInJournal):
		return reader.Result{}, false, nil
	case errors.Is(err, journal.ErrOffloaded):
		return reader.Result{LogStart: rr.Start, HighWatermark: rr.HighWatermark}, true, reader.ErrInSegments
	case errors.Is(err, meta.ErrOffsetOutOfRange):
		return reader.Result{LogStart: rr.Start, HighWatermark: rr.HighWatermark},
			true, &reader.ErrOutOfRange{Offset: offset, LogStart: rr.Start, HighWatermark: rr.HighWatermark}
	case err != nil && ctx.Err() == nil && q.draining.Err() != nil:
		return reader.Result{NextOffset: offset, HighWatermark: offset}, true, nil
	case err != nil:
		return reader.Result{}, true, err
	}
	return reader.Result{Batches: splitBatches(rr.Batches), NextOffset: rr.Next, HighWatermark: rr.HighWatermark, LogStart: rr.Start}, true, nil
}

// AwaitJournalToken waits for this node's member (or, on a node without one, the member
// it reads from) to apply the journal commit index token.
//
// A member that does not hold the partition yet waits too: the token is a commit index of
// the partition's journal, and the entry that brought the partition into the journal
// precedes it, so once the member applied the token it holds the partition (a follower
// that had not applied that entry answered "not here" and the fetch read the index, empty).
func (q *quorum) AwaitJournalToken(ctx context.Context, streamID uint64, partition int32, token uint64, wait time.Duration) bool {
	p := journal.Partition{Stream: streamID, Partition: uint32(partition)}
	jid, ok := q.knownJournal(streamID, partition)
	if !ok || partition < 0 {
		return false
	}
	m := q.host.Member(jid)
	if m == nil {
		if q.host.HasRemote(ctx, jid, p) {
			_ = q.host.AwaitRemote(ctx, jid, token, wait)
			return true
		}
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_ = m.WaitApplied(wctx, token)
	return true
}

// splitBatches cuts concatenated, already validated batches into one slice per batch.
func splitBatches(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 12 {
		n := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
		if n < 12 || n > len(b) {
			break
		}
		out = append(out, b[:n:n])
		b = b[n:]
	}
	return out
}

// ---- stream placement ----

// quorumMeta is the metastore client of the node's APIs: creating, growing or deleting a
// quorum stream also places its partitions in the journal (Assign), so every member
// serves them, written or not.
type quorumMeta struct {
	meta.Client
	q *quorum
}

// quorumSchemaMeta is quorumMeta of a client that also stores arrow schemas (arrow
// streams are never of class quorum, so its methods pass through).
type quorumSchemaMeta struct {
	quorumMeta
	meta.SchemaClient
}

// wrapMeta is mc wrapped for q, keeping the optional interfaces the APIs look for.
func wrapMeta(mc meta.Client, q *quorum) meta.Client {
	qm := quorumMeta{Client: mc, q: q}
	if sc, ok := mc.(meta.SchemaClient); ok {
		return quorumSchemaMeta{quorumMeta: qm, SchemaClient: sc}
	}
	return qm
}

// assign places the stream's partitions 0..partitions-1 in journal jid (0: removes them).
func (m quorumMeta) assign(ctx context.Context, jid string, st meta.Stream, partitions int32) {
	if jid == "" {
		// Not placed yet (no journal): the journal's leader node places it once it is.
		return
	}
	res, err := m.q.host.Assign(ctx, jid, journal.Assign{Stream: st.ID, Partitions: uint32(max(partitions, 0))})
	if err != nil {
		// A produce places its partition too; until then fetches of it answer empty.
		m.q.log.Warn("quorum stream's partitions not placed in the journal", "stream", st.Name, "id", st.ID, "journal", jid, "err", err)
		return
	}
	m.q.awaitLocal(ctx, jid, res.Index)
}

// placedJournal is the journal of the stream's partition 0, read again from the metastore
// in placement mode (the stream was just created or grown).
func (m quorumMeta) placedJournal(ctx context.Context, st meta.Stream) string {
	if m.q.pl != nil {
		if err := m.q.pl.refresh(ctx); err != nil {
			m.q.log.Warn("quorum placement not read", "stream", st.Name, "err", err)
		}
	}
	jid, _ := m.q.knownJournal(st.ID, 0)
	return jid
}

func (m quorumMeta) CreateStream(ctx context.Context, cfg meta.StreamConfig) (meta.Stream, error) {
	st, err := m.Client.CreateStream(ctx, cfg)
	if err == nil && st.Class == meta.ClassQuorum {
		m.assign(ctx, m.placedJournal(ctx, st), st, st.Partitions)
	}
	return st, err
}

func (m quorumMeta) UpdateStream(ctx context.Context, ns, name string, patch meta.StreamPatch) (meta.Stream, error) {
	st, err := m.Client.UpdateStream(ctx, ns, name, patch)
	if err == nil && st.Class == meta.ClassQuorum {
		m.assign(ctx, m.placedJournal(ctx, st), st, st.Partitions)
	}
	return st, err
}

// GetStream shows a quorum stream's partitions with the journal's high watermarks (the
// sequencer's index ends at the last offloaded segment).
func (m quorumMeta) GetStream(ctx context.Context, ns, name string) (meta.Stream, []meta.PartitionState, error) {
	st, ps, err := m.Client.GetStream(ctx, ns, name)
	if err == nil && st.Class == meta.ClassQuorum {
		for i := range ps {
			if hw, ok := m.q.highWatermark(ctx, st.ID, ps[i].Partition, ps[i].HighWatermark); ok {
				ps[i].HighWatermark = max(ps[i].HighWatermark, hw)
			}
		}
	}
	return st, ps, err
}

// Lookup answers a quorum partition's bounds (n <= 0: what Kafka ListOffsets and the
// consumers' lag read) with the journal's high watermark; its entries are the index's.
func (m quorumMeta) Lookup(ctx context.Context, streamID uint64, partition int32, from int64, n int) ([]meta.IndexEntry, meta.PartitionState, error) {
	es, ps, err := m.Client.Lookup(ctx, streamID, partition, from, n)
	if err == nil && n <= 0 {
		if hw, ok := m.q.highWatermark(ctx, streamID, partition, ps.HighWatermark); ok {
			ps.HighWatermark = max(ps.HighWatermark, hw)
		}
	}
	return es, ps, err
}

// highWatermark is a quorum partition's high watermark in the journal (ok false: the
// partition is not in the journal, or no member answered). from is where a remote read
// asks (the sequencer's high watermark).
func (q *quorum) highWatermark(ctx context.Context, streamID uint64, partition int32, from int64) (int64, bool) {
	if m, p, ok := q.local(streamID, partition); ok {
		return m.Next(p), true
	}
	jid, ok := q.remote(streamID, partition)
	if !ok {
		return 0, false
	}
	p := journal.Partition{Stream: streamID, Partition: uint32(partition)}
	if !q.host.HasRemote(ctx, jid, p) {
		return 0, false
	}
	rr, err := q.host.ReadRemote(ctx, jid, p, from, 1, 0)
	if err == nil || errors.Is(err, journal.ErrOffloaded) || errors.Is(err, meta.ErrOffsetOutOfRange) {
		return rr.HighWatermark, true
	}
	return 0, false
}

func (m quorumMeta) DeleteStream(ctx context.Context, ns, name string) error {
	st, _, gerr := m.Client.GetStream(ctx, ns, name)
	var jid string
	if gerr == nil {
		jid, _ = m.q.knownJournal(st.ID, 0) // before the delete drops the assignment
	}
	err := m.Client.DeleteStream(ctx, ns, name)
	if err == nil && gerr == nil && st.Class == meta.ClassQuorum {
		m.assign(ctx, jid, st, 0)
	}
	return err
}

func (q *quorum) closeIfAny() {
	if q != nil {
		q.close()
	}
}

// drainIfAny makes open long-polls of quorum partitions answer now (Node.Close).
func (q *quorum) drainIfAny() {
	if q != nil {
		q.drain()
	}
}

// QuorumLeader reports whether one of this node's journal members leads its journal.
func (n *Node) QuorumLeader() bool {
	if n.quorum == nil {
		return false
	}
	for _, m := range n.quorum.host.Members() {
		if m.IsLeader() {
			return true
		}
	}
	return false
}
