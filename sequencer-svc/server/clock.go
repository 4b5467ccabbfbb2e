package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The clock guard: no single clock may push the metastore clock forward.
//
// The state machine's clock is the largest command stamp ever applied and never moves
// back, so one stamp from a leader whose clock runs an hour fast would move it an hour
// forward for good: every commit of a healthy log node would be StaleCommit for an hour and
// leases would expire early. Stepping down afterwards is too late. So the leader stamps no
// command more than Config.MaxClockSkew ahead of a majority of voters' clocks.
//
// Readings. Every voter that does not lead reports its wall clock to the leader (the
// loam.meta.v1.Clock service) every Config.ClockReportInterval. The leader keeps each
// voter's newest report with the local monotonic time it arrived. The report was sent
// before it arrived, so that voter's clock now is at least the reported clock plus the
// time elapsed since arrival: a lower bound whatever the network delay, which a jump of
// the leader's own wall clock does not move. A report older than clockFreshIntervals
// report intervals counts as missing.
//
// Stamps. Before each proposal the leader takes the majority clock M: the q-th largest of
// its own clock and the lower bounds of the voters with fresh reports, q being a majority
// of the voters (2 of 3, 3 of 5). At least q voters' clocks are at or past M.
//   - Own clock at most MaxClockSkew ahead of M: the stamp is max(own clock, M). A
//     follower with a fast clock does not move M (it is one of the largest), so it does
//     not matter. A leader with a slow clock stamps M, the majority's time, so the
//     metastore clock keeps moving; being more than the skew behind M it hands leadership
//     over as well (below), in the background.
//   - The leader also checks its clock every report interval without waiting for a
//     proposal, so an outlier hands leadership over even while the group is idle.
//   - Own clock more than MaxClockSkew ahead of M: the leader proposes nothing. It hands
//     leadership to the voter whose clock is nearest M (hashicorp/raft's
//     LeadershipTransferToServer), waits for it to go (up to Config.LeaderWait), and
//     answers NotLeader: nothing was proposed, so the caller (or routeWrite, which then
//     forwards the request to the new leader) retries with a definite outcome.
//   - Fewer than q voters' clocks known (just elected, before the first reports; or the
//     reports cannot reach it): the leader cannot be sure, so it stamps nothing. It waits
//     up to Config.LeaderWait for reports, then hands leadership to any voter and answers
//     NotLeader. A leader that Raft can reach but reports cannot therefore does not keep
//     the group stalled: another voter leads.
//
// A re-elected outlier starts without fresh reports, waits for them (followers report
// within one interval of learning of a new leader), finds it is ahead again and hands
// leadership over again: it never stamps. With five voters a minority of fast clocks,
// the leader's included, cannot move M; a majority of fast clocks is the time.
//
// The commit and swap clock checks (meta.MaxClockAhead) compare against max(own clock, M),
// so a slow leader does not refuse healthy writers while it hands over; a stamp that
// looks ahead while some voters' clocks are still unknown waits for their reports before
// it is refused.
//
// Commands that do not read time (RegisterNode) are proposed unstamped (stamp 0 never
// moves the clock), so a new leader can register its RPC address, which followers need to
// send it their reports, before it has any.
//
// Bounds: the leader keeps one report per voter of the configuration (reports from other
// ids are refused), at most one leadership transfer runs at a time, and each voter sends
// one small RPC per interval.

// clockFreshIntervals: a report counts for this many report intervals (2 s at 250 ms).
const clockFreshIntervals = 8

// clockReport is a voter's newest report, as received.
type clockReport struct {
	wallUs int64     // the voter's clock when it sent the report
	at     time.Time // when it arrived (its monotonic reading is what counts)
}

// clockBook holds the reports this node received and its hand-over state.
type clockBook struct {
	mu      sync.Mutex
	reports map[raft.ServerID]clockReport
	changed chan struct{} // closed (and replaced) when a report arrives

	transferring atomic.Bool // a leadership transfer runs
	warned       atomic.Int64
}

// record stores a report of id, a voter of servers.
func (b *clockBook) record(id raft.ServerID, wallUs int64, at time.Time, servers []raft.Server) error {
	voter := false
	for _, s := range servers {
		voter = voter || (s.ID == id && s.Suffrage == raft.Voter)
	}
	if !voter {
		return fmt.Errorf("clock report from %q: not a voter of the configuration", id)
	}
	if wallUs <= 0 {
		return fmt.Errorf("clock report from %q: wall clock %d µs: want > 0", id, wallUs)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reports == nil {
		b.reports = make(map[raft.ServerID]clockReport)
	}
	for k := range b.reports { // drop servers that left the configuration
		if !slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == k }) {
			delete(b.reports, k)
		}
	}
	b.reports[id] = clockReport{wallUs: wallUs, at: at}
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return nil
}

// next returns a channel closed at the next report.
func (b *clockBook) next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

// voterClock is one voter's clock as the leader knows it now.
type voterClock struct {
	id    raft.ServerID
	addr  raft.ServerAddress
	ms    int64 // lower bound of its clock now (the leader's own: its clock)
	self  bool
	fresh bool
}

// clockVerdict is what the guard decides for a stamp now.
type clockVerdict struct {
	own      int64 // this node's clock (ms)
	majority int64 // M (ms), when sure
	sure     bool  // a majority of voters' clocks is known
	stamp    int64 // when ok
	ok       bool  // stamp may be proposed
	behind   bool  // ok, but own clock is more than the skew behind M
	target   voterClock
	voters   int
	known    int
}

// judge applies the guard to the voters' clocks (see above).
func judge(own int64, clocks []voterClock, skew int64) clockVerdict {
	v := clockVerdict{own: own, voters: len(clocks)}
	var known []int64
	for _, c := range clocks {
		if c.fresh {
			known = append(known, c.ms)
		}
	}
	v.known = len(known)
	q := len(clocks)/2 + 1
	if len(clocks) == 0 { // not in the configuration: nothing to compare with
		q = 1
		known = append(known, own)
	}
	if len(known) < q {
		v.target = nearest(clocks, 0, false)
		return v
	}
	slices.Sort(known)
	v.sure = true
	v.majority = known[len(known)-q]
	v.target = nearest(clocks, v.majority, true)
	if own > v.majority+skew {
		return v
	}
	v.ok, v.stamp = true, max(own, v.majority)
	v.behind = v.majority > own+skew
	return v
}

// nearest is the voter other than self (fresh, when byClock) whose clock is nearest ms.
func nearest(clocks []voterClock, ms int64, byClock bool) voterClock {
	var best voterClock
	var bestD int64 = -1
	for _, c := range clocks {
		if c.self || (byClock && !c.fresh) {
			continue
		}
		d := c.ms - ms
		if d < 0 {
			d = -d
		}
		if !byClock {
			d = 0
		}
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// clocks lists the voters' clocks as this node knows them now.
func (n *Node) clocks(own int64, now time.Time) []voterClock {
	fresh := clockFreshIntervals * n.cfg.ClockReportInterval
	cfg := n.raft.GetConfiguration()
	if cfg.Error() != nil {
		return nil
	}
	n.clk.mu.Lock()
	defer n.clk.mu.Unlock()
	var out []voterClock
	for _, s := range cfg.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		c := voterClock{id: s.ID, addr: s.Address}
		if string(s.ID) == n.cfg.ID {
			c.self, c.fresh, c.ms = true, true, own
		} else if r, ok := n.clk.reports[s.ID]; ok {
			age := now.Sub(r.at)
			c.fresh = age <= fresh
			c.ms = (r.wallUs + age.Microseconds()) / 1000
		}
		out = append(out, c)
	}
	return out
}

// verdict applies the guard now.
func (n *Node) verdict() clockVerdict {
	now := time.Now()
	own := n.cfg.Now().UnixMilli()
	return judge(own, n.clocks(own, now), n.cfg.MaxClockSkew.Milliseconds())
}

// checkAhead reports whether stampMs (a writer's own stamp) is more than ahead ahead of
// the clock it is checked against (meta.MaxClockAhead): max(this node's clock, the
// majority clock). Like stamp it waits for a majority of voters' clocks, and while the
// stamp looks ahead and some voters' clocks are still unknown, it waits (up to
// Config.LeaderWait) for their reports before it says so. It returns the reference clock.
func (n *Node) checkAhead(ctx context.Context, stampMs int64, ahead time.Duration) (refMs int64, isAhead bool, err error) {
	deadline := time.Now().Add(n.cfg.LeaderWait)
	for {
		next := n.clk.next()
		v, err := n.judgeNow(ctx)
		if err != nil {
			return 0, false, err
		}
		ref := max(v.own, v.majority)
		if stampMs <= ref+ahead.Milliseconds() {
			return ref, false, nil
		}
		if v.known >= v.voters || !time.Now().Before(deadline) {
			return ref, true, nil
		}
		t := time.NewTimer(min(time.Until(deadline), n.cfg.ClockReportInterval))
		select {
		case <-next:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, false, fmt.Errorf("%w: not proposed (waiting for voters' clock reports): %w", meta.ErrUnavailable, ctx.Err())
		}
		t.Stop()
	}
}

// stamp returns the stamp for a proposal now, or a NotLeader error (nothing proposed)
// when the guard refuses; see the comment at the top of this file.
func (n *Node) stamp(ctx context.Context) (int64, error) {
	v, err := n.judgeNow(ctx)
	if err != nil {
		return 0, err
	}
	if v.ok {
		if v.behind {
			n.handOver(v, fmt.Sprintf("clock %s behind a majority of voters", time.Duration(v.majority-v.own)*time.Millisecond))
		}
		return v.stamp, nil
	}
	ahead := time.Duration(v.own-v.majority) * time.Millisecond
	n.handOver(v, fmt.Sprintf("clock %s ahead of a majority of voters", ahead))
	n.waitNotLeading(ctx, time.Now().Add(n.cfg.LeaderWait))
	return 0, fmt.Errorf("server: this leader's clock is %s ahead of a majority of voters' clocks (allowed skew %s): not proposed, leadership handed over: %w",
		ahead, n.cfg.MaxClockSkew, n.notLeader())
}

// judgeNow returns the guard's verdict once a majority of voters' clocks is known,
// waiting up to Config.LeaderWait for reports; after that it hands leadership over and
// answers NotLeader (nothing proposed).
func (n *Node) judgeNow(ctx context.Context) (clockVerdict, error) {
	deadline := time.Now().Add(n.cfg.LeaderWait)
	for {
		next := n.clk.next()
		v := n.verdict()
		if v.sure {
			return v, nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			n.handOver(v, "no clock reports from a majority of voters")
			n.waitNotLeading(ctx, time.Now().Add(n.cfg.LeaderWait))
			return v, fmt.Errorf("server: clocks of %d of %d voters known within %s, a majority needed to stamp: not proposed: %w",
				v.known, v.voters, n.cfg.LeaderWait, n.notLeader())
		}
		t := time.NewTimer(min(wait, n.cfg.ClockReportInterval))
		select {
		case <-next:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return v, fmt.Errorf("%w: not proposed (waiting for voters' clock reports): %w", meta.ErrUnavailable, ctx.Err())
		case <-n.stop:
			t.Stop()
			return v, fmt.Errorf("server: sequencer closed, not proposed: %w", meta.ErrUnavailable)
		}
		t.Stop()
		if n.raft.State() != raft.Leader {
			return v, n.notLeader()
		}
	}
}

// handOver starts a leadership transfer (to v.target when known), unless one runs.
func (n *Node) handOver(v clockVerdict, why string) {
	if !n.clk.transferring.CompareAndSwap(false, true) {
		return
	}
	n.log.Warn("handing leadership over: "+why, "own_ms", v.own, "majority_ms", v.majority,
		"voters", v.voters, "clocks_known", v.known, "to", string(v.target.id), "max_skew", n.cfg.MaxClockSkew.String())
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		var fut raft.Future
		if v.target.id != "" {
			fut = n.raft.LeadershipTransferToServer(v.target.id, v.target.addr)
		} else {
			fut = n.raft.LeadershipTransfer()
		}
		if err := fut.Error(); err != nil {
			n.log.Warn("leadership transfer", "err", err)
		}
		// One transfer per election timeout at most.
		select {
		case <-time.After(n.cfg.ElectionTimeout):
		case <-n.stop:
		}
		n.clk.transferring.Store(false)
	}()
}

// waitNotLeading waits until this node no longer leads, deadline passes or ctx ends.
func (n *Node) waitNotLeading(ctx context.Context, deadline time.Time) {
	for n.raft.State() == raft.Leader && time.Now().Before(deadline) {
		if sleepCtx(ctx, 5*time.Millisecond) != nil {
			return
		}
	}
}

// runClockReports reports this node's clock to the leader every ClockReportInterval
// while it does not lead (while it leads, it checks its own clock as often and hands
// leadership over when it is the outlier), and warns (at most once a minute) when the leader's clock and
// its own differ by more than MaxClockSkew.
func (n *Node) runClockReports() {
	defer n.wg.Done()
	obs := make(chan raft.Observation, 4)
	o := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(o)
	defer n.raft.DeregisterObserver(o)
	t := time.NewTicker(n.cfg.ClockReportInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-obs:
		case <-t.C:
		}
		n.reportClock()
	}
}

func (n *Node) reportClock() {
	if n.raft.State() == raft.Leader {
		// Without waiting for a proposal: an outlier leader hands over once it knows.
		if v := n.verdict(); v.sure && (!v.ok || v.behind) {
			n.handOver(v, fmt.Sprintf("clock %s off a majority of voters", time.Duration(v.own-v.majority)*time.Millisecond))
		}
		return
	}
	_, id := n.raft.LeaderWithID()
	if id == "" || string(id) == n.cfg.ID {
		return
	}
	addr := n.fsm.NodeAddr(string(id))
	if addr == "" || addr == n.RPCAddr() {
		return
	}
	conn, err := n.rt.peers.conn(addr)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*n.cfg.ClockReportInterval)
	defer cancel()
	sent := time.Now()
	own := n.cfg.Now()
	rep, err := metapb.NewClockClient(conn).Report(ctx, &metapb.ClockReport{Id: n.cfg.ID, WallUs: own.UnixMicro()})
	if err != nil {
		n.log.Debug("clock report", "leader", string(id), "err", err)
		return
	}
	// The leader read its clock about half a round trip after ours.
	off := time.Duration(rep.GetWallUs()-own.UnixMicro())*time.Microsecond - time.Since(sent)/2
	if (off > n.cfg.MaxClockSkew || off < -n.cfg.MaxClockSkew) && time.Since(time.Unix(0, n.clk.warned.Load())) > time.Minute {
		n.clk.warned.Store(time.Now().UnixNano())
		n.log.Warn("the leader's clock and this voter's differ by more than the allowed skew",
			"leader", string(id), "leader_minus_own", off.String(), "max_skew", n.cfg.MaxClockSkew.String())
	}
}

// clockService serves loam.meta.v1.Clock.
type clockService struct {
	metapb.UnimplementedClockServer
	n *Node
}

func (s *clockService) Report(_ context.Context, r *metapb.ClockReport) (*metapb.ClockReply, error) {
	at := time.Now()
	if s.n.refuseClockReports.Load() {
		return nil, status.Error(codes.Unavailable, "clock reports refused (test)")
	}
	cfg := s.n.raft.GetConfiguration()
	if err := cfg.Error(); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if err := s.n.clk.record(raft.ServerID(r.GetId()), r.GetWallUs(), at, cfg.Configuration().Servers); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &metapb.ClockReply{WallUs: s.n.cfg.Now().UnixMicro(), Leader: s.n.IsLeader()}, nil
}
