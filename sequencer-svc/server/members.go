package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// Membership: AddVoter, RemoveServer and Members (the admin RPCs), and the join a node
// started with Config.Join performs.

// Member is one server of the Raft group.
type Member struct {
	ID       string
	RaftAddr string
	RPCAddr  string // registered when the server led; "" if it never has
	Voter    bool
	Leader   bool
}

// AddVoter adds server id at raftAddr to the group as a voter, or (nonvoter) as a non-voter
// that is replicated to but counts in no quorum. On a follower it answers NotLeader (the
// gRPC service and LocalClient forward it). A server already in the group takes raftAddr;
// nonvoter never demotes a voter; repeating a call changes nothing more. It returns once
// the configuration change is committed.
func (n *Node) AddVoter(ctx context.Context, id, raftAddr string, nonvoter bool) error {
	if id == "" {
		return fmt.Errorf("add voter: %w: empty id", meta.ErrInvalidArgument)
	}
	if _, _, err := net.SplitHostPort(raftAddr); err != nil {
		return fmt.Errorf("add voter %s: %w: raft addr %q: %v", id, meta.ErrInvalidArgument, raftAddr, err)
	}
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	timeout := n.applyTimeout(ctx)
	var f raft.IndexFuture
	if nonvoter {
		f = n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeout)
	} else {
		f = n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeout)
	}
	if err := n.await(ctx, f, timeout); err != nil {
		return fmt.Errorf("add voter %s at %s: %w", id, raftAddr, err)
	}
	n.log.Info("added server", "server", id, "raft", raftAddr, "nonvoter", nonvoter)
	return nil
}

// RemoveServer removes server id from the group (NotLeader on a follower, as AddVoter).
// An id not in the configuration is nothing to do. Removing the leader makes it step down
// once the change is committed.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("remove server: %w: empty id", meta.ErrInvalidArgument)
	}
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return fmt.Errorf("remove server %s: %w: %v", id, meta.ErrUnavailable, err)
	}
	found := false
	for _, s := range cf.Configuration().Servers {
		found = found || string(s.ID) == id
	}
	if !found {
		return nil
	}
	timeout := n.applyTimeout(ctx)
	if err := n.await(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, timeout), timeout); err != nil {
		return fmt.Errorf("remove server %s: %w", id, err)
	}
	n.log.Info("removed server", "server", id)
	return nil
}

// Members lists the group's servers as this node's latest configuration has it.
func (n *Node) Members(ctx context.Context) ([]Member, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, fmt.Errorf("members: %w: %v", meta.ErrUnavailable, err)
	}
	_, leader := n.raft.LeaderWithID()
	var out []Member
	for _, s := range cf.Configuration().Servers {
		out = append(out, Member{ID: string(s.ID), RaftAddr: string(s.Address), RPCAddr: n.fsm.NodeAddr(string(s.ID)),
			Voter: s.Suffrage == raft.Voter, Leader: s.ID == leader})
	}
	return out, nil
}

// isVoter reports whether this node's latest configuration lists it as a voter.
func (n *Node) isVoter() bool {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == n.cfg.ID {
			return s.Suffrage == raft.Voter
		}
	}
	return false
}

// applyTimeout is Config.ApplyTimeout, or less when ctx ends sooner.
func (n *Node) applyTimeout(ctx context.Context) time.Duration {
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	return timeout
}

// await waits for a submitted Raft future within ctx and timeout, mapping Raft's errors
// like propose does: NotLeader when nothing was appended, ErrUnavailable when the outcome
// is unknown.
func (n *Node) await(ctx context.Context, f raft.Future, timeout time.Duration) error {
	done := make(chan struct{})
	go func() { _ = f.Error(); close(done) }()
	wait := time.NewTimer(timeout)
	defer wait.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("%w: submitted, outcome unknown: %w", meta.ErrUnavailable, ctx.Err())
	case <-wait.C:
		return fmt.Errorf("%w: submitted, not committed within %s, outcome unknown", meta.ErrUnavailable, timeout)
	}
	err := f.Error()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return n.notLeader()
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: not enqueued within %s: %v", meta.ErrUnavailable, timeout, err)
	default:
		return fmt.Errorf("%w: outcome unknown: %v", meta.ErrUnavailable, err)
	}
}

// join makes this node a voter of the group reached at Config.Join (RPC addresses of any
// of its voters): added as a non-voter, it waits until its state reached the leader's
// read index (a snapshot install and then the log), then asks to be promoted, so the
// group keeps its fault tolerance while the new server catches up. A node its own
// configuration already lists as a voter does nothing.
func (n *Node) join(ctx context.Context) error {
	if n.isVoter() {
		n.log.Info("already a voter: not joining")
		return nil
	}
	var opts []metagrpc.Option
	if n.cfg.TLS != nil {
		opts = append(opts, metagrpc.WithTransportCredentials(n.cfg.TLS.ClientCredentials()))
	}
	c, err := metagrpc.Dial(ctx, n.cfg.Join, opts...)
	if err != nil {
		return fmt.Errorf("server: join %v: %w", n.cfg.Join, err)
	}
	defer c.Close()
	adm := c.(metagrpc.Admin)
	self := n.RaftAddr()
	retry := func(what string, fn func() error) error {
		for {
			err := fn()
			if err == nil {
				return nil
			}
			if errors.Is(err, meta.ErrInvalidArgument) {
				return fmt.Errorf("server: join: %s: %w", what, err)
			}
			n.log.Warn("join: retrying", "step", what, "err", err)
			if sleepCtx(ctx, 200*time.Millisecond) != nil {
				return fmt.Errorf("server: join: %s: %w", what, err)
			}
		}
	}
	if err := retry("add as non-voter", func() error { return adm.AddNonvoter(ctx, n.cfg.ID, self) }); err != nil {
		return err
	}
	n.log.Info("join: added as non-voter; catching up", "raft", self)
	start := time.Now()
	for {
		var idx uint64
		if err := retry("read index", func() (err error) { idx, err = adm.ReadIndex(ctx); return err }); err != nil {
			return err
		}
		if n.waitApplied(ctx, idx, time.Second) {
			break
		}
		if err := ctxErr(ctx); err != nil {
			return fmt.Errorf("server: join: catching up to index %d (applied %d): %w", idx, n.AppliedIndex(), err)
		}
	}
	n.log.Info("join: caught up; promoting", "applied", n.AppliedIndex(), "took", time.Since(start))
	if err := retry("promote to voter", func() error { return adm.AddVoter(ctx, n.cfg.ID, self) }); err != nil {
		return err
	}
	n.log.Info("joined as voter")
	return nil
}
