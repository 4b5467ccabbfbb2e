package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/sequencer-svc/raftlog"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Node is one sequencer voter: a hashicorp/raft node over the fsm state machine, the watch
// hub, and (unless disabled) the gRPC server. Its methods are the meta.Client operations;
// NewLocalClient and the gRPC service both call them.
type Node struct {
	cfg   Config
	log   *slog.Logger
	fsm   *fsm.FSM
	store *raftlog.Store
	snaps raft.SnapshotStore
	trans *raft.NetworkTransport
	raft  *raft.Raft
	hub   *hub

	rpc    *grpc.Server
	rpcLis net.Listener
	rt     routing // forwarding to the leader and read consistency (forward.go)

	clk clockBook // clock reports and hand-over state (clock.go)

	quotas quotaBuckets // the leader's ingest token buckets (quota.go)
	// refuseClockReports (tests): the Clock service refuses every report.
	refuseClockReports atomic.Bool

	commitCh   chan *commitReq // CommitWals for the committer (committer.go)
	commitGate chan struct{}   // tests: the committer waits on it before each proposal

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Start opens the data dir, starts Raft (bootstrapping a new group when cfg.Bootstrap) and
// the gRPC server, and returns the running node. With Bootstrap and no Peers (a single
// voter) it also waits, within ctx, until the node leads.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fillRuntime()
	n := &Node{cfg: cfg, log: cfg.Logger.With("component", "sequencer", "id", cfg.ID), stop: make(chan struct{}),
		commitCh: make(chan *commitReq, commitQueueLength)}
	if cfg.TLS != nil {
		n.rt.peers.creds = cfg.TLS.ClientCredentials()
	}
	if err := n.open(); err != nil {
		n.Close()
		return nil, err
	}
	if len(cfg.Join) > 0 {
		if err := n.join(ctx); err != nil {
			n.Close()
			return nil, err
		}
	}
	if cfg.Bootstrap && len(cfg.Peers) == 0 {
		if err := n.WaitLeader(ctx); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

func (n *Node) open() error {
	cfg := n.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("server: data dir: %w", err)
	}
	var hubRef *hub
	// The state database is not fsynced on every apply (fsm.Options.LazySync): the Raft log
	// is, and a state file a machine crash may have damaged is discarded at open and
	// rebuilt below from the newest snapshot and the log after it.
	f, err := fsm.Open(filepath.Join(cfg.DataDir, "state.db"), fsm.Options{
		NoSync: cfg.NoSync, LazySync: true,
		Publish: func(evs []meta.Event) {
			if hubRef != nil { // nil while the node restores a snapshot before Raft starts
				hubRef.publish(evs)
			}
		},
	})
	if err != nil {
		return err
	}
	n.fsm = f
	if why := f.Discarded(); why != nil {
		n.log.Warn("state database discarded: rebuilding it from the newest snapshot and the Raft log", "why", why.Error())
	}
	if n.store, err = raftlog.Open(filepath.Join(cfg.DataDir, "raft.db"), raftlog.Options{NoSync: cfg.NoSync}); err != nil {
		return err
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Info, JSONFormat: true, Output: cfg.RaftLogOutput})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, hlog)
	if err != nil {
		return fmt.Errorf("server: snapshot store: %w", err)
	}
	n.snaps = snaps
	// The state database survives restarts, so Raft does not restore its snapshot on
	// start; only a database behind the newest snapshot (lost or older) is restored here.
	if err := n.restoreIfBehind(snaps); err != nil {
		return err
	}
	hubRef = newHub(cfg.WatchRing, cfg.WatchRingEntries, cfg.WatchBuffer, f.LastEventIndex())
	n.hub = hubRef

	var advertise net.Addr
	if cfg.RaftAdvertise != "" {
		if advertise, err = net.ResolveTCPAddr("tcp", cfg.RaftAdvertise); err != nil {
			return fmt.Errorf("server: raft advertise %q: %w", cfg.RaftAdvertise, err)
		}
	}
	if cfg.TLS != nil {
		n.trans, err = newTLSTransport(cfg.RaftAddr, advertise, cfg.TLS, hlog)
	} else {
		n.trans, err = raft.NewTCPTransportWithLogger(cfg.RaftAddr, advertise, 3, 10*time.Second, hlog)
	}
	if err != nil {
		return fmt.Errorf("server: raft transport %s: %w", cfg.RaftAddr, err)
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.NoSnapshotRestoreOnStart = true
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	logs, err := raft.NewLogCache(1024, n.store)
	if err != nil {
		return fmt.Errorf("server: log cache: %w", err)
	}
	if cfg.Bootstrap {
		has, err := raft.HasExistingState(logs, n.store, snaps)
		if err != nil {
			return fmt.Errorf("server: raft state: %w", err)
		}
		if !has {
			servers := []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: n.trans.LocalAddr()}}
			for _, p := range cfg.Peers {
				servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
			}
			if err := raft.BootstrapCluster(rc, logs, n.store, snaps, n.trans, raft.Configuration{Servers: servers}); err != nil {
				return fmt.Errorf("server: bootstrap: %w", err)
			}
			n.log.Info("bootstrapped raft group", "voters", len(servers))
		}
	}
	if n.raft, err = raft.NewRaft(rc, notifyingFSM{f, &n.rt}, logs, n.store, snaps, n.trans); err != nil {
		return fmt.Errorf("server: raft: %w", err)
	}

	if !cfg.DisableRPC {
		lis := cfg.RPCListener
		if lis == nil {
			if lis, err = net.Listen("tcp", cfg.RPCAddr); err != nil {
				return fmt.Errorf("server: rpc listen %s: %w", cfg.RPCAddr, err)
			}
		}
		n.rpcLis = lis
		n.cfg.RPCAddr = lis.Addr().String()
		sopts := []grpc.ServerOption{grpc.MaxRecvMsgSize(64 << 20),
			// metagrpc pings every 10 s to notice dead peers on idle Watch streams.
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
			grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second})}
		if cfg.TLS != nil {
			sopts = append(sopts, grpc.Creds(cfg.TLS.ServerCredentials()))
		}
		n.rpc = grpc.NewServer(sopts...)
		metapb.RegisterSequencerServer(n.rpc, &service{n: n})
		metapb.RegisterClockServer(n.rpc, &clockService{n: n})
		metapb.RegisterAuthServer(n.rpc, &authService{n: n})
		registerConsumers(n.rpc, n)
		registerKafkaGroups(n.rpc, n)
		registerNamespaceKeys(n.rpc, n)
		registerConsumerAdmin(n.rpc, n) // consumer_admin.go
		metapb.RegisterQuotasServer(n.rpc, &quotaService{n: n})
		metapb.RegisterEventLedgerServer(n.rpc, &eventLedgerService{n: n}) // cloudevents.go
		metapb.RegisterStreamSchemasServer(n.rpc, &schemaService{n: n})    // schemas.go
		registerPlacement(n.rpc, n)                                        // placement.go
		registerQuorumIndex(n.rpc, n)                                      // quorumindex.go
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := n.rpc.Serve(lis); err != nil {
				n.log.Error("rpc server stopped", "err", err)
			}
		}()
	}
	n.wg.Add(2)
	go n.watchLeadership()
	go n.runCommitter()
	if cfg.Placement.Nodes != nil {
		n.wg.Add(1)
		go n.runPlacement() // placement_controller.go
	}
	if !cfg.DisableRPC {
		n.wg.Add(1)
		go n.runClockReports()
	}
	n.log.Info("sequencer started", "rpc", n.cfg.RPCAddr, "raft", string(n.trans.LocalAddr()), "applied", f.AppliedIndex())
	return nil
}

func (n *Node) restoreIfBehind(snaps raft.SnapshotStore) error {
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("server: list snapshots: %w", err)
	}
	if len(list) == 0 || list[0].Index <= n.fsm.AppliedIndex() {
		return nil
	}
	_, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		return fmt.Errorf("server: open snapshot %s: %w", list[0].ID, err)
	}
	n.log.Warn("state behind the newest snapshot: restoring it", "applied", n.fsm.AppliedIndex(), "snapshot", list[0].Index)
	if err := n.fsm.Restore(rc); err != nil {
		return fmt.Errorf("server: restore snapshot %s: %w", list[0].ID, err)
	}
	return nil
}

// watchLeadership registers this node's RPC address in the state machine whenever it
// becomes leader and the registered one differs, so followers can hint at it.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	obs := make(chan raft.Observation, 8)
	o := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(o)
	defer n.raft.DeregisterObserver(o)
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		n.checkReady()
		if n.raft.State() == raft.Leader && !n.cfg.DisableRPC && n.fsm.NodeAddr(n.cfg.ID) != n.cfg.RPCAddr {
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
			if _, err := n.proposeUnstamped(ctx, fsm.RegisterNode(n.cfg.ID, n.cfg.RPCAddr)); err != nil {
				n.log.Warn("register rpc address", "err", err)
			}
			cancel()
		}
		select {
		case <-n.stop:
			return
		case <-obs:
		case <-check.C:
		}
	}
}

// WaitLeader blocks until this node leads and has applied every entry of the log (a
// Raft barrier: after a restart, entries past the state database are replayed only once a
// leader commits), or ctx ends.
func (n *Node) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if n.raft.State() == raft.Leader {
			timeout := n.cfg.ApplyTimeout
			if dl, ok := ctx.Deadline(); ok {
				timeout = min(timeout, time.Until(dl))
			}
			term := n.raft.CurrentTerm()
			err := n.raft.Barrier(timeout).Error()
			if err == nil {
				n.setReady(term)
				return nil
			}
			n.log.Debug("barrier", "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server: wait for leadership: %w: %w", meta.ErrUnavailable, ctx.Err())
		case <-t.C:
		}
	}
}

// IsLeader reports whether this node is the Raft leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// RPCAddr is the address the gRPC server listens on ("" when disabled).
func (n *Node) RPCAddr() string {
	if n.cfg.DisableRPC {
		return ""
	}
	return n.cfg.RPCAddr
}

// RaftAddr is the Raft transport's address.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// AppliedIndex is the index of the last Raft entry applied to the state.
func (n *Node) AppliedIndex() uint64 { return n.fsm.AppliedIndex() }

// Snapshot takes a Raft snapshot now (and truncates the log past TrailingLogs).
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("server: snapshot: %w", err)
	}
	return nil
}

// Close stops the gRPC server (in-flight calls finish within a few seconds), ends every
// watcher, shuts Raft down and closes the files. It is safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		if n.hub != nil {
			n.hub.close()
		}
		if n.rpc != nil {
			done := make(chan struct{})
			go func() { n.rpc.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				n.rpc.Stop()
			}
		}
		_ = n.rt.peers.close() // after the RPC server: forwarded calls have finished
		var errs []error
		if n.raft != nil {
			if err := n.raft.Shutdown().Error(); err != nil {
				errs = append(errs, err)
			}
		}
		if n.trans != nil {
			errs = append(errs, n.trans.Close())
		}
		n.wg.Wait()
		if n.store != nil {
			errs = append(errs, n.store.Close())
		}
		if n.fsm != nil {
			errs = append(errs, n.fsm.Close())
		}
		n.closeErr = errors.Join(errs...)
		n.log.Info("sequencer stopped", "err", n.closeErr)
	})
	return n.closeErr
}

// notLeader builds the ErrNotLeader answer with the leader's RPC address when known.
func (n *Node) notLeader() error {
	_, id := n.raft.LeaderWithID()
	var hint string
	if id != "" {
		hint = n.fsm.NodeAddr(string(id))
	}
	return &meta.NotLeaderError{Leader: hint}
}

// propose stamps cmd with the leader clock as the clock guard allows (clock.go),
// replicates it and returns its result.
func (n *Node) propose(ctx context.Context, cmd *metapb.Command) (*fsm.Result, error) {
	return n.proposeStamped(ctx, cmd, true)
}

// proposeUnstamped proposes a command that reads no time (RegisterNode) with stamp 0,
// which leaves the state machine's clock where it is.
func (n *Node) proposeUnstamped(ctx context.Context, cmd *metapb.Command) (*fsm.Result, error) {
	return n.proposeStamped(ctx, cmd, false)
}

func (n *Node) proposeStamped(ctx context.Context, cmd *metapb.Command, stamped bool) (*fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", meta.ErrUnavailable, err)
	}
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	cmd.StampMs = 0
	if stamped {
		s, err := n.stamp(ctx)
		if err != nil {
			return nil, err
		}
		cmd.StampMs = s
	}
	data, err := fsm.Encode(cmd)
	if err != nil {
		return nil, err
	}
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	fut := n.raft.Apply(data, timeout)
	done := make(chan struct{})
	go func() { _ = fut.Error(); close(done) }()
	wait := time.NewTimer(timeout)
	defer wait.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: proposal submitted, outcome unknown: %w", meta.ErrUnavailable, ctx.Err())
	case <-wait.C:
		return nil, fmt.Errorf("%w: proposal submitted, not applied within %s, outcome unknown", meta.ErrUnavailable, timeout)
	}
	if err := fut.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return nil, n.notLeader()
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return nil, fmt.Errorf("%w: proposal not enqueued within %s: %v", meta.ErrUnavailable, timeout, err)
		default: // ErrLeadershipLost, ErrRaftShutdown, ...: the outcome is unknown
			return nil, fmt.Errorf("%w: proposal outcome unknown: %v", meta.ErrUnavailable, err)
		}
	}
	res, ok := fut.Response().(*fsm.Result)
	if !ok || res == nil {
		return nil, fmt.Errorf("%w: proposal at index %d answered nothing", meta.ErrUnavailable, fut.Index())
	}
	return res, res.Err
}

func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", meta.ErrUnavailable, err)
	}
	return nil
}

// ---- the meta.Client operations ----

// CreateNamespace creates a namespace; creating an existing one succeeds.
func (n *Node) CreateNamespace(ctx context.Context, name string) error {
	if !fsm.ValidName(name) {
		return fmt.Errorf("create namespace %q: %w: want 1..%d characters of [a-zA-Z0-9._-]", name, meta.ErrInvalidArgument, meta.MaxNameLength)
	}
	_, err := n.propose(ctx, fsm.CreateNamespace(name))
	return err
}

// ListNamespaces lists namespaces by name.
func (n *Node) ListNamespaces(ctx context.Context) ([]string, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	return n.fsm.ListNamespaces()
}

// CreateStream creates a stream (defaults filled as fsm.NormalizeConfig says).
func (n *Node) CreateStream(ctx context.Context, c meta.StreamConfig) (meta.Stream, error) {
	c, err := fsm.NormalizeConfig(c)
	if err != nil {
		return meta.Stream{}, fmt.Errorf("create stream %s/%s: %w", c.Namespace, c.Name, err)
	}
	res, err := n.propose(ctx, fsm.CreateStream(c))
	if err != nil {
		return meta.Stream{}, err
	}
	return res.Stream, nil
}

// UpdateStream patches a stream.
func (n *Node) UpdateStream(ctx context.Context, ns, name string, p meta.StreamPatch) (meta.Stream, error) {
	// The state machine checks the patch too; a key attribute that is not UTF-8 is refused
	// here because a command cannot carry it.
	if p.KeyAttribute != nil && !meta.ValidKeyAttribute(*p.KeyAttribute) {
		return meta.Stream{}, fmt.Errorf("update stream %s/%s: %w: key_attribute of %d bytes: want empty or 1..%d bytes of valid UTF-8",
			ns, name, meta.ErrInvalidArgument, len(*p.KeyAttribute), meta.MaxKeyAttributeLength)
	}
	if p.LeaderZone != nil {
		if err := meta.CheckLeaderZone(meta.ClassQuorum, *p.LeaderZone); err != nil { // its form; the class is the state machine's check
			return meta.Stream{}, fmt.Errorf("update stream %s/%s: %w", ns, name, err)
		}
	}
	res, err := n.propose(ctx, fsm.UpdateStream(ns, name, p))
	if err != nil {
		return meta.Stream{}, err
	}
	return res.Stream, nil
}

// DeleteStream deletes a stream, its partitions and its index entries.
func (n *Node) DeleteStream(ctx context.Context, ns, name string) error {
	_, err := n.propose(ctx, fsm.DeleteStream(ns, name))
	return err
}

// GetStream reads a stream and its partitions from this node's state.
func (n *Node) GetStream(ctx context.Context, ns, name string) (meta.Stream, []meta.PartitionState, error) {
	if err := ctxErr(ctx); err != nil {
		return meta.Stream{}, nil, err
	}
	return n.fsm.GetStream(ns, name)
}

// ListStreams reads a namespace's streams from this node's state.
func (n *Node) ListStreams(ctx context.Context, ns string) ([]meta.Stream, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	return n.fsm.ListStreams(ns)
}

// CommitWal commits a WAL object (meta.Client.CommitWal). A command stamped more than
// meta.MaxClockAhead ahead of this leader's clock (or of the majority clock, when that is
// later: clock.go) is refused before it is proposed. Concurrent commits are proposed
// together (committer.go).
func (n *Node) CommitWal(ctx context.Context, c meta.CommitWal) (meta.CommitResult, error) {
	if err := fsm.CheckCommit(c); err != nil {
		return meta.CommitResult{}, err
	}
	now, ahead, err := n.checkAhead(ctx, c.StampMs, meta.MaxClockAhead)
	if err != nil {
		return meta.CommitResult{}, err
	}
	if ahead {
		return meta.CommitResult{}, fmt.Errorf("commit wal %s: stamped %d ms ahead of the leader: %w",
			c.Object, c.StampMs-now, meta.ErrClockAhead)
	}
	return n.submitCommit(ctx, c)
}

// Lookup reads index entries from this node's state (meta.Client.Lookup).
func (n *Node) Lookup(ctx context.Context, streamID uint64, partition int32, from int64, max int) ([]meta.IndexEntry, meta.PartitionState, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, meta.PartitionState{}, err
	}
	return n.fsm.Lookup(streamID, partition, from, max)
}

// Watch calls fn with every event applied after fromIndex (0: from now) until ctx ends
// (ctx.Err()), fn fails (its error), or the node closes (meta.ErrUnavailable). A fromIndex
// older than the replay ring, or a watcher too slow to keep up, gets an Event with Reset.
func (n *Node) Watch(ctx context.Context, fromIndex uint64, fn func(meta.Event) error) error {
	return n.watch(ctx, fromIndex, nil, fn)
}

// watch is Watch with onStart, called once with the index the stream starts after.
func (n *Node) watch(ctx context.Context, from uint64, onStart func(uint64) error, fn func(meta.Event) error) error {
	for {
		s, replay, start, reset := n.hub.subscribe(from)
		if onStart != nil {
			if err := onStart(start); err != nil {
				n.hub.unsubscribe(s)
				return err
			}
			onStart = nil
		}
		err := n.deliver(ctx, s, replay, start, reset, fn, &from)
		n.hub.unsubscribe(s)
		if err != nil {
			return err
		}
		if n.hub.isClosed() {
			return fmt.Errorf("watch: sequencer closed: %w", meta.ErrUnavailable)
		}
		// Dropped for being slow: tell the watcher to reset and go on from there.
		if err := fn(meta.Event{AppliedIndex: s.resetAt, Reset: true}); err != nil {
			return err
		}
		from = s.resetAt
	}
}

func (n *Node) deliver(ctx context.Context, s *sub, replay []meta.Event, start uint64, reset bool, fn func(meta.Event) error, from *uint64) error {
	if reset {
		if err := fn(meta.Event{AppliedIndex: start, Reset: true}); err != nil {
			return err
		}
		*from = start
	}
	for _, ev := range replay {
		if err := fn(ev); err != nil {
			return err
		}
		*from = ev.AppliedIndex
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-s.ch:
			if !ok {
				return nil
			}
			if !ev.Reset && ev.AppliedIndex <= *from {
				continue
			}
			if err := fn(ev); err != nil {
				return err
			}
			*from = ev.AppliedIndex
		}
	}
}
