package server

import (
	"context"
	"fmt"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
)

// Group commit: concurrent CommitWals are proposed together as one CommitWalBatch entry,
// so one Raft log write and one state transaction (each with its fsyncs) serve them all.
// A commit waiting alone is proposed alone, as a plain CommitWal.

const (
	commitInFlight    = 1       // proposals of commits in flight at once
	maxCommitBatch    = 64      // commits in one entry
	maxCommitChunks   = 1 << 16 // chunks in one entry
	commitQueueLength = 1024
)

type commitReq struct {
	ctx  context.Context
	c    meta.CommitWal
	done chan commitAns // buffered: the committer never blocks on a requester
}

type commitAns struct {
	res meta.CommitResult
	err error
}

// submitCommit hands c to the committer and waits for its answer.
func (n *Node) submitCommit(ctx context.Context, c meta.CommitWal) (meta.CommitResult, error) {
	req := &commitReq{ctx: ctx, c: c, done: make(chan commitAns, 1)}
	select {
	case n.commitCh <- req:
	case <-ctx.Done():
		return meta.CommitResult{}, fmt.Errorf("%w: commit wal %s not proposed: %w", meta.ErrUnavailable, c.Object, ctx.Err())
	case <-n.stop:
		return meta.CommitResult{}, fmt.Errorf("commit wal %s: sequencer closed: %w", c.Object, meta.ErrUnavailable)
	}
	select {
	case ans := <-req.done:
		return ans.res, ans.err
	case <-ctx.Done():
		return meta.CommitResult{}, fmt.Errorf("%w: commit wal %s submitted, outcome unknown: %w", meta.ErrUnavailable, c.Object, ctx.Err())
	case <-n.stop:
		return meta.CommitResult{}, fmt.Errorf("commit wal %s: sequencer closed, outcome unknown: %w", c.Object, meta.ErrUnavailable)
	}
}

// runCommitter takes commits off the queue and proposes them, at most commitInFlight
// proposals at a time: while they are in flight, the commits that arrive queue up and go
// out together in the next one.
func (n *Node) runCommitter() {
	defer n.wg.Done()
	slots := make(chan struct{}, commitInFlight)
	for {
		var first *commitReq
		select {
		case first = <-n.commitCh:
		case <-n.stop:
			return
		}
		select {
		case slots <- struct{}{}:
		case <-n.stop:
			first.done <- commitAns{err: fmt.Errorf("commit wal %s: sequencer closed: %w", first.c.Object, meta.ErrUnavailable)}
			return
		}
		if n.commitGate != nil {
			<-n.commitGate
		}
		batch := []*commitReq{first}
		chunks := len(first.c.Chunks)
	drain:
		for len(batch) < maxCommitBatch {
			select {
			case r := <-n.commitCh:
				batch = append(batch, r)
				if chunks += len(r.c.Chunks); chunks >= maxCommitChunks {
					break drain
				}
			default:
				break drain
			}
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer func() { <-slots }()
			n.proposeCommits(batch)
		}()
	}
}

// proposeCommits proposes the commits whose callers still wait and answers each.
func (n *Node) proposeCommits(batch []*commitReq) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- commitAns{err: fmt.Errorf("%w: commit wal %s not proposed: %w", meta.ErrUnavailable, r.c.Object, err)}
			continue
		}
		live = append(live, r)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		r := live[0]
		res, err := n.propose(r.ctx, fsm.CommitWal(r.c))
		if err != nil {
			r.done <- commitAns{err: err}
			return
		}
		r.done <- commitAns{res: res.Commit}
		return
	}
	cs := make([]meta.CommitWal, len(live))
	for i, r := range live {
		cs[i] = r.c
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	res, err := n.propose(ctx, fsm.CommitWalBatch(cs))
	if err == nil && len(res.Commits) != len(live) {
		err = fmt.Errorf("%w: commit batch at index %d answered %d of %d commits", meta.ErrUnavailable, res.Index, len(res.Commits), len(live))
	}
	for i, r := range live {
		if err != nil {
			r.done <- commitAns{err: err}
			continue
		}
		sub := res.Commits[i]
		r.done <- commitAns{res: sub.Commit, err: sub.Err}
	}
}
