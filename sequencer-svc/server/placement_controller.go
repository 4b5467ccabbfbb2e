package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// LiveNode is a live log node as the placement controller sees it: its id, zone and the
// host:port of its journal Raft listener ("" : the node serves no journal).
type LiveNode struct {
	ID          string
	Zone        string
	JournalAddr string
}

// NodeLister lists the live log nodes (the coordination store's node registry, which the
// log nodes heartbeat into).
type NodeLister func(ctx context.Context) ([]LiveNode, error)

// PlacementConfig configures the leader's placement controller of the quorum class.
type PlacementConfig struct {
	// Nodes lists the live log nodes; nil: no controller runs (journals can still be
	// recorded through the API).
	Nodes NodeLister
	// ReplaceAfter is how long a member's node must be missing from Nodes before the
	// controller replaces it (default 5 min). Keep it well above the registry's heartbeat
	// TTL: a restarting node comes back as the same member, with its log.
	ReplaceAfter time.Duration
	// Interval is how often the controller looks (default 2 s).
	Interval time.Duration
	// Size is the number of members of a journal it creates (default 3).
	Size int
}

func (c PlacementConfig) withDefaults() PlacementConfig {
	if c.ReplaceAfter <= 0 {
		c.ReplaceAfter = 5 * time.Minute
	}
	if c.Interval <= 0 {
		c.Interval = 2 * time.Second
	}
	if c.Size <= 0 {
		c.Size = 3
	}
	return c
}

// placementMeta is what the controller needs of the metastore (the Node itself, or a
// meta.Client in tests).
type placementMeta interface {
	ListJournals(ctx context.Context) (meta.Placement, error)
	CreateJournal(ctx context.Context, j meta.Journal) (meta.Journal, error)
	SetJournalMembers(ctx context.Context, id string, epoch uint64, members []meta.JournalMember) (meta.Journal, error)
}

// placementController creates the quorum class's journals and replaces members whose log
// node is gone. It runs on the sequencer leader only (it acts while leading and forgets
// what it saw when it stops leading).
//
//   - Creation: while at least Size live nodes with a journal address are in no journal,
//     it creates a journal of Size of them, one per zone where it can (three zones for
//     three members), and the state machine places in it the quorum streams' partitions
//     that no journal holds.
//   - Replacement: a member whose node has been missing from the live nodes for
//     ReplaceAfter (counted from when this controller last saw it live, or from when it
//     started leading) is replaced by a live node with a journal address that is not in
//     the journal: first one in a zone the journal's other members are not in, then the
//     one in the fewest journals, then by id. One member per journal and pass, and never
//     while no candidate exists. The metastore change (SetJournalMembers, fenced by the
//     epoch) is what the journal's Raft leader applies with AddVoter and RemoveServer.
//
// Memory: seen holds one time per node id that is live or a member (bounded by the
// registry's nodes plus MaxJournals x MaxJournalMembers).
type placementController struct {
	cfg    PlacementConfig
	meta   placementMeta
	now    func() time.Time
	log    *slog.Logger
	seen   map[string]time.Time
	leader time.Time // when this controller started acting (its clock for never-seen members)
}

func newPlacementController(cfg PlacementConfig, m placementMeta, now func() time.Time, log *slog.Logger) *placementController {
	if now == nil {
		now = time.Now
	}
	return &placementController{cfg: cfg.withDefaults(), meta: m, now: now, log: log, seen: map[string]time.Time{}}
}

// reset forgets what the controller saw (leadership lost).
func (c *placementController) reset() {
	clear(c.seen)
	c.leader = time.Time{}
}

// pass looks once: creates what journals it can and replaces at most one member per journal.
func (c *placementController) pass(ctx context.Context) error {
	now := c.now()
	if c.leader.IsZero() {
		c.leader = now
	}
	all, err := c.cfg.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("placement: live nodes: %w", err)
	}
	live := map[string]LiveNode{}
	for _, n := range all {
		if n.ID != "" && n.JournalAddr != "" {
			live[n.ID] = n
			c.seen[n.ID] = now
		}
	}
	p, err := c.meta.ListJournals(ctx)
	if err != nil {
		return fmt.Errorf("placement: journals: %w", err)
	}
	members := map[string]int{} // journals per node
	for _, j := range p.Journals {
		for _, m := range j.Members {
			members[m.Node]++
		}
	}
	// Forget nodes that are neither live nor members.
	for id := range c.seen {
		if _, ok := live[id]; !ok && members[id] == 0 {
			delete(c.seen, id)
		}
	}
	var errs []error
	for _, j := range p.Journals {
		if err := c.replace(ctx, j, live, members, now); err != nil {
			errs = append(errs, err)
		}
	}
	if len(p.Journals) < meta.MaxJournals {
		if err := c.create(ctx, p, live, members); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("placement: %w", errs[0])
	}
	return nil
}

func (c *placementController) replace(ctx context.Context, j meta.Journal, live map[string]LiveNode, members map[string]int, now time.Time) error {
	for i, m := range j.Members {
		if _, ok := live[m.Node]; ok {
			continue
		}
		since, ok := c.seen[m.Node]
		if !ok {
			since = c.leader
			c.seen[m.Node] = since
		}
		if now.Sub(since) < c.cfg.ReplaceAfter {
			continue
		}
		zones := map[string]bool{}
		for k, o := range j.Members {
			if k != i {
				zones[o.Zone] = true
			}
		}
		var cands []LiveNode
		for _, n := range live {
			if !j.HasMember(n.ID) {
				cands = append(cands, n)
			}
		}
		if len(cands) == 0 {
			c.log.Warn("journal member gone, no live log node to replace it with", "journal", j.ID, "member", m.Node, "gone_for", now.Sub(since).Round(time.Second))
			return nil
		}
		sort.Slice(cands, func(a, b int) bool {
			x, y := cands[a], cands[b]
			if nx, ny := zones[x.Zone], zones[y.Zone]; nx != ny {
				return !nx
			}
			if members[x.ID] != members[y.ID] {
				return members[x.ID] < members[y.ID]
			}
			return x.ID < y.ID
		})
		n := cands[0]
		next := slices.Clone(j.Members)
		next[i] = meta.JournalMember{Node: n.ID, Addr: n.JournalAddr, Zone: n.Zone}
		got, err := c.meta.SetJournalMembers(ctx, j.ID, j.Epoch, next)
		if err != nil {
			return fmt.Errorf("replace member %s of journal %s by %s: %w", m.Node, j.ID, n.ID, err)
		}
		members[n.ID]++
		c.log.Info("journal member replaced", "journal", j.ID, "gone", m.Node, "by", n.ID, "zone", n.Zone, "epoch", got.Epoch,
			"gone_for", now.Sub(since).Round(time.Second))
		return nil // one member per journal and pass
	}
	return nil
}

func (c *placementController) create(ctx context.Context, p meta.Placement, live map[string]LiveNode, members map[string]int) error {
	var free []LiveNode
	for _, n := range live {
		if members[n.ID] == 0 {
			free = append(free, n)
		}
	}
	if len(free) < c.cfg.Size {
		return nil
	}
	sort.Slice(free, func(a, b int) bool { return free[a].ID < free[b].ID })
	picked := pickZones(free, c.cfg.Size)
	ms := make([]meta.JournalMember, len(picked))
	for i, n := range picked {
		ms[i] = meta.JournalMember{Node: n.ID, Addr: n.JournalAddr, Zone: n.Zone}
	}
	j, err := c.meta.CreateJournal(ctx, meta.Journal{ID: nextJournalID(p.Journals), Members: ms})
	if err != nil {
		return fmt.Errorf("create a journal: %w", err)
	}
	for _, m := range ms {
		members[m.Node]++
	}
	c.log.Info("journal created", "journal", j.ID, "members", journalMemberNames(ms))
	return nil
}

// pickZones picks n of nodes (sorted by id): first one per zone not picked yet, in id
// order, then the rest in id order.
func pickZones(nodes []LiveNode, n int) []LiveNode {
	var out []LiveNode
	used := map[string]bool{}
	taken := map[string]bool{}
	for _, nd := range nodes {
		if len(out) == n {
			return out
		}
		if !used[nd.Zone] {
			used[nd.Zone], taken[nd.ID] = true, true
			out = append(out, nd)
		}
	}
	for _, nd := range nodes {
		if len(out) == n {
			break
		}
		if !taken[nd.ID] {
			taken[nd.ID] = true
			out = append(out, nd)
		}
	}
	return out
}

// nextJournalID is "j<N>" with N one past the largest N of the journals named so.
func nextJournalID(js []meta.Journal) string {
	next := 1
	for _, j := range js {
		if n, err := strconv.Atoi(strings.TrimPrefix(j.ID, "j")); err == nil && strings.HasPrefix(j.ID, "j") && n >= next {
			next = n + 1
		}
	}
	return "j" + strconv.Itoa(next)
}

func journalMemberNames(ms []meta.JournalMember) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = m.Node + "@" + m.Zone
	}
	return strings.Join(s, ",")
}

// runPlacement runs the controller while this node leads, every Interval, until the node
// stops.
func (n *Node) runPlacement() {
	defer n.wg.Done()
	c := newPlacementController(n.cfg.Placement, n, n.cfg.Now, n.log)
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	go func() { <-n.stop; cancelBase() }() // ends with the loop: both wait for n.stop
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if !n.leaderReady() {
			c.reset()
			continue
		}
		ctx, cancel := context.WithTimeout(base, c.cfg.Interval+n.cfg.ApplyTimeout)
		if err := c.pass(ctx); err != nil {
			n.log.Warn("placement controller", "err", err)
		}
		cancel()
	}
}
