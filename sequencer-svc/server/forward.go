package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// Routing: any voter accepts every call.
//
// Writes: routeWrite runs the write here when this node leads; otherwise it forwards the
// request, unchanged, to the leader's RPC address (registered in the state machine) over a
// pooled gRPC connection and relays the answer. The leader runs the whole operation,
// clock guard included. A forwarded request carries metagrpc.ForwardedHeader and is never
// forwarded again: a receiver that does not lead answers NotLeader with its hint, and the
// forwarding voter retries once with the new leader, else answers NotLeader. NotLeader
// always means nothing was applied: it is answered only when the leader said so, or when
// no connection to a leader was ready (nothing was sent). Once a request was sent, a
// broken connection or a deadline is meta.ErrUnavailable (outcome unknown) and is never
// retried here.
//
// Reads: readLocal decides whether this node's state may answer. The leader answers once it
// has applied an entry of its own term (a Raft barrier after each election). A follower is
// caught up when its applied index reached the leader's read index, asked of the leader at
// read time (one ReadIndex call serves every read that arrived before it was sent); it
// waits up to Config.ReadWait for its state to get there, then forwards the read to the
// leader instead. Reads therefore see every write acknowledged before they started, on any
// voter.

// routing is a Node's forwarding state; its zero value is ready to use.
type routing struct {
	peers peerPool

	// readyTerm is the term in which this node, leading, applied a barrier: its state
	// holds every entry committed before its leadership.
	readyTerm atomic.Uint64

	appliedMu sync.Mutex
	appliedCh chan struct{} // closed (and cleared) when the state machine applies a batch

	riMu      sync.Mutex
	riWaiting []chan readIndexAns
	riRunning bool

	forwarded atomic.Int64 // calls sent to a leader
}

type readIndexAns struct {
	idx uint64
	err error
}

// appliedChan returns a channel closed at the next applied batch or restore.
func (r *routing) appliedChan() <-chan struct{} {
	r.appliedMu.Lock()
	defer r.appliedMu.Unlock()
	if r.appliedCh == nil {
		r.appliedCh = make(chan struct{})
	}
	return r.appliedCh
}

func (r *routing) notifyApplied() {
	r.appliedMu.Lock()
	if r.appliedCh != nil {
		close(r.appliedCh)
		r.appliedCh = nil
	}
	r.appliedMu.Unlock()
}

// notifyingFSM is the state machine as Raft sees it: every applied batch and restore
// wakes the reads waiting for the applied index (waitApplied).
type notifyingFSM struct {
	*fsm.FSM
	r *routing
}

var _ raft.BatchingFSM = notifyingFSM{}

func (w notifyingFSM) Apply(l *raft.Log) any {
	res := w.FSM.Apply(l)
	w.r.notifyApplied()
	return res
}

func (w notifyingFSM) ApplyBatch(logs []*raft.Log) []any {
	res := w.FSM.ApplyBatch(logs)
	w.r.notifyApplied()
	return res
}

func (w notifyingFSM) Restore(rc io.ReadCloser) error {
	err := w.FSM.Restore(rc)
	w.r.notifyApplied()
	return err
}

// peerPool holds one gRPC connection per voter RPC address.
type peerPool struct {
	creds credentials.TransportCredentials // nil: plaintext

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

func (p *peerPool) conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("server: forward to %s: sequencer closed: %w", addr, meta.ErrUnavailable)
	}
	if c := p.conns[addr]; c != nil {
		return c, nil
	}
	creds := p.creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second,
		}, MinConnectTimeout: time.Second}))
	if err != nil {
		return nil, fmt.Errorf("server: forward to %s: %w", addr, err)
	}
	if p.conns == nil {
		p.conns = map[string]*grpc.ClientConn{}
	}
	p.conns[addr] = c
	return c, nil
}

func (p *peerPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for _, c := range p.conns {
		errs = append(errs, c.Close())
	}
	p.conns = nil
	return errors.Join(errs...)
}

// rpcCtxKey marks the context of a call that arrived through this node's gRPC service:
// only there do ForwardedHeader and LeaderHeader apply (an in-process client may be
// called from another gRPC server's handler, whose metadata is not ours).
type rpcCtxKey struct{}

func viaRPC(ctx context.Context) context.Context { return context.WithValue(ctx, rpcCtxKey{}, true) }

func isRPC(ctx context.Context) bool { return ctx.Value(rpcCtxKey{}) != nil }

// forwardedFrom returns the id of the voter that forwarded the request in ctx, or "".
func forwardedFrom(ctx context.Context) string {
	if !isRPC(ctx) {
		return ""
	}
	if v := metadata.ValueFromIncomingContext(ctx, metagrpc.ForwardedHeader); len(v) > 0 {
		return v[0]
	}
	return ""
}

// checkReady marks this node ready to serve reads once it leads and a barrier of its term
// has been applied (every entry committed before its election is then in its state).
func (n *Node) checkReady() {
	if n.raft.State() != raft.Leader {
		return
	}
	term := n.raft.CurrentTerm()
	if n.rt.readyTerm.Load() == term {
		return
	}
	// Bounded: a future queued for the state machine when Raft shuts down is never
	// answered, and Close waits for this goroutine.
	f := n.raft.Barrier(n.cfg.ApplyTimeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	wait := time.NewTimer(n.cfg.ApplyTimeout)
	defer wait.Stop()
	select {
	case err := <-done:
		if err != nil {
			n.log.Debug("barrier after election", "err", err)
			return
		}
		n.setReady(term)
	case <-wait.C:
	case <-n.stop:
	}
}

// setReady records that a barrier of term was applied while this node led in it.
func (n *Node) setReady(term uint64) {
	if n.raft.State() == raft.Leader && n.raft.CurrentTerm() == term {
		n.rt.readyTerm.Store(term)
	}
}

// leaderReady reports whether this node leads and has applied its term's barrier.
func (n *Node) leaderReady() bool {
	return n.raft.State() == raft.Leader && n.rt.readyTerm.Load() == n.raft.CurrentTerm()
}

// waitReady waits (up to Config.LeaderWait) until leaderReady; NotLeader when this node
// stops leading.
func (n *Node) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(n.cfg.LeaderWait)
	for !n.leaderReady() {
		if n.raft.State() != raft.Leader {
			return n.notLeader()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server: leader has not applied an entry of its term within %s: %w", n.cfg.LeaderWait, meta.ErrUnavailable)
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", meta.ErrUnavailable, ctx.Err())
	case <-t.C:
		return nil
	}
}

// leaderAddr waits (up to Config.LeaderWait, within ctx) until this node leads (self) or
// knows a leader whose RPC address is registered and is not avoid.
func (n *Node) leaderAddr(ctx context.Context, avoid string) (addr string, self bool) {
	deadline := time.Now().Add(n.cfg.LeaderWait)
	for {
		if n.raft.State() == raft.Leader {
			return "", true
		}
		if _, id := n.raft.LeaderWithID(); id != "" && string(id) != n.cfg.ID {
			if a := n.fsm.NodeAddr(string(id)); a != "" && a != avoid && a != n.RPCAddr() {
				return a, false
			}
		}
		if time.Now().After(deadline) || sleepCtx(ctx, 5*time.Millisecond) != nil {
			return "", false
		}
	}
}

// rpcFn is a Sequencer client method as a method expression (metapb.SequencerClient.X).
type rpcFn[Req, Resp any] func(metapb.SequencerClient, context.Context, Req, ...grpc.CallOption) (Resp, error)

// ccFn is an RPC of any of the sequencer's services, called over a connection.
type ccFn[Req, Resp any] func(grpc.ClientConnInterface, context.Context, Req) (Resp, error)

func (f rpcFn[Req, Resp]) cc() ccFn[Req, Resp] {
	return func(cc grpc.ClientConnInterface, ctx context.Context, req Req) (Resp, error) {
		return f(metapb.NewSequencerClient(cc), ctx, req)
	}
}

// forwardCall sends req to the voter at addr, marked as forwarded. An error unwrapping to
// *meta.NotLeaderError means nothing was applied; after sending, a transport failure is
// meta.ErrUnavailable (metagrpc.FromStatus).
func forwardCall[Req, Resp any](ctx context.Context, n *Node, addr string, req Req, call ccFn[Req, Resp]) (Resp, error) {
	var zero Resp
	conn, err := n.rt.peers.conn(addr)
	if err != nil {
		return zero, err
	}
	if !metagrpc.Ready(ctx, conn, min(n.cfg.LeaderWait, time.Second)) {
		if err := ctxErr(ctx); err != nil {
			return zero, err
		}
		return zero, fmt.Errorf("server: forward to leader %s: not connected, nothing sent: %w", addr, &meta.NotLeaderError{Leader: addr})
	}
	// A fresh outgoing context: nothing of the caller's metadata travels on.
	fctx := metadata.NewOutgoingContext(ctx, metadata.Pairs(metagrpc.ForwardedHeader, n.cfg.ID))
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(fctx, n.cfg.ApplyTimeout+time.Second)
		defer cancel()
	}
	n.rt.forwarded.Add(1)
	resp, err := call(conn, fctx, req)
	if err != nil {
		return zero, metagrpc.FromStatus(err)
	}
	return resp, nil
}

// routeWrite runs a write (or any call the leader must answer) on the leader: local when
// this node leads, else forwarded (see the routing comment above). A request forwarded by
// another voter runs here or answers NotLeader.
func routeWrite[Req, Resp any](ctx context.Context, n *Node, req Req, local func(context.Context, Req) (Resp, error), remote rpcFn[Req, Resp]) (Resp, error) {
	return routeWriteCC(ctx, n, req, local, remote.cc())
}

// routeWriteCC is routeWrite of an RPC of any service.
func routeWriteCC[Req, Resp any](ctx context.Context, n *Node, req Req, local func(context.Context, Req) (Resp, error), remote ccFn[Req, Resp]) (Resp, error) {
	var zero Resp
	if forwardedFrom(ctx) != "" {
		return local(ctx, req)
	}
	var avoid, hint string
	for forwards, tries := 0, 0; tries < 4; tries++ {
		if n.raft.State() == raft.Leader {
			resp, err := local(ctx, req)
			if !errors.Is(err, meta.ErrNotLeader) {
				return resp, err
			}
			// Leadership ended before the proposal was submitted: nothing was applied.
		}
		if forwards == 2 {
			break
		}
		addr := hint
		if addr == "" || addr == avoid || addr == n.RPCAddr() {
			var self bool
			if addr, self = n.leaderAddr(ctx, avoid); self {
				continue
			}
			if addr == "" {
				break
			}
		}
		forwards++
		resp, err := forwardCall(ctx, n, addr, req, remote)
		var nl *meta.NotLeaderError
		if err == nil || !errors.As(err, &nl) {
			if err == nil && isRPC(ctx) {
				// Tell metagrpc clients where the leader is (they may go there directly).
				_ = grpc.SetHeader(ctx, metadata.Pairs(metagrpc.LeaderHeader, addr))
			}
			return resp, err
		}
		// A stale leader (or none reachable): nothing was applied; retry once with the
		// leader it names, or the next one this node learns of.
		avoid, hint = addr, nl.Leader
	}
	if err := ctxErr(ctx); err != nil {
		return zero, err
	}
	if hint != "" && hint != n.RPCAddr() {
		return zero, &meta.NotLeaderError{Leader: hint}
	}
	return zero, n.notLeader()
}

// routeRead answers a read from this node's state when it may (readLocal), else from the
// leader's.
func routeRead[Req, Resp any](ctx context.Context, n *Node, req Req, local func(context.Context, Req) (Resp, error), remote rpcFn[Req, Resp]) (Resp, error) {
	return routeReadCC(ctx, n, req, local, remote.cc())
}

// routeReadCC is routeRead of an RPC of any service.
func routeReadCC[Req, Resp any](ctx context.Context, n *Node, req Req, local func(context.Context, Req) (Resp, error), remote ccFn[Req, Resp]) (Resp, error) {
	var zero Resp
	ok, err := n.readLocal(ctx)
	if err != nil {
		return zero, err
	}
	if ok {
		return local(ctx, req)
	}
	return routeWriteCC(ctx, n, req, func(ctx context.Context, req Req) (Resp, error) {
		if err := n.waitReady(ctx); err != nil {
			return zero, err
		}
		return local(ctx, req)
	}, remote)
}

// readLocal reports whether this node's state may answer a read now: it leads and is
// ready, or it follows and its applied index reached the leader's read index within
// Config.ReadWait. false without an error: forward the read to the leader.
func (n *Node) readLocal(ctx context.Context) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if n.raft.State() == raft.Leader {
		err := n.waitReady(ctx)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, meta.ErrNotLeader) {
			return false, err
		}
	}
	if forwardedFrom(ctx) != "" {
		return false, n.notLeader()
	}
	idx, err := n.readIndex(ctx)
	if err != nil {
		return false, err
	}
	return n.waitApplied(ctx, idx, n.cfg.ReadWait), nil
}

// waitApplied waits up to d for the state machine to apply index idx.
func (n *Node) waitApplied(ctx context.Context, idx uint64, d time.Duration) bool {
	var t *time.Timer
	for {
		ch := n.rt.appliedChan()
		if n.fsm.AppliedIndex() >= idx {
			return true
		}
		if t == nil {
			if d <= 0 {
				return false
			}
			t = time.NewTimer(d)
			defer t.Stop()
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// readIndex returns the leader's read index, asked after this call started: calls that
// arrive while one request is in flight share the next one.
func (n *Node) readIndex(ctx context.Context) (uint64, error) {
	ch := make(chan readIndexAns, 1)
	r := &n.rt
	r.riMu.Lock()
	r.riWaiting = append(r.riWaiting, ch)
	if !r.riRunning {
		r.riRunning = true
		go n.runReadIndex()
	}
	r.riMu.Unlock()
	select {
	case a := <-ch:
		return a.idx, a.err
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: read index: %w", meta.ErrUnavailable, ctx.Err())
	}
}

func (n *Node) runReadIndex() {
	r := &n.rt
	for {
		r.riMu.Lock()
		batch := r.riWaiting
		r.riWaiting = nil
		if len(batch) == 0 {
			r.riRunning = false
			r.riMu.Unlock()
			return
		}
		r.riMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.LeaderWait+n.cfg.ApplyTimeout)
		resp, err := routeWrite(ctx, n, &metapb.ReadIndexRequest{}, n.localReadIndex, metapb.SequencerClient.ReadIndex)
		cancel()
		a := readIndexAns{idx: resp.GetIndex(), err: err}
		for _, ch := range batch {
			ch <- a
		}
	}
}

// localReadIndex answers ReadIndex on the leader: its applied index, once it has applied
// an entry of its own term. Every write it (or an earlier leader) acknowledged is at or
// below it.
func (n *Node) localReadIndex(ctx context.Context, _ *metapb.ReadIndexRequest) (*metapb.ReadIndexResponse, error) {
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	return &metapb.ReadIndexResponse{Index: n.fsm.AppliedIndex()}, nil
}

// ReadIndex returns the leader's read index (routed to the leader like a write): a read
// served by a voter whose AppliedIndex is at least this sees every write acknowledged
// before ReadIndex was called.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	resp, err := routeWrite(ctx, n, &metapb.ReadIndexRequest{}, n.localReadIndex, metapb.SequencerClient.ReadIndex)
	return resp.GetIndex(), err
}

// catchUp is the best-effort barrier of a Watch from now (fromIndex 0) on a follower: it
// waits (up to Config.LeaderWait) until this node's state reached the leader's read index,
// so "now" includes every write acknowledged before the watch started. Without a leader
// the watch starts from this node's state as it is.
func (n *Node) catchUp(ctx context.Context) {
	if n.raft.State() == raft.Leader {
		_ = n.waitReady(ctx)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.LeaderWait)
	defer cancel()
	if idx, err := n.readIndex(ctx); err == nil {
		n.waitApplied(ctx, idx, n.cfg.LeaderWait)
	}
}
