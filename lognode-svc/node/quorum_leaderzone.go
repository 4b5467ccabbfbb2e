package node

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/loamhq/loam/lognode-svc/journal"
	"github.com/loamhq/loam/shared/meta"
)

// Leader zone hints (docs/quorum.md, "Leader zone"). A quorum stream may name the zone its
// journal's leader should be in (meta.StreamConfig.LeaderZone), usually its producers'
// zone: a produce taken there reaches the leader without crossing zones. The node whose
// member leads a journal, at each placement refresh:
//
//   - takes the zone hinted by most of the journal's partitions (partitions of streams
//     without a hint do not count); when two zones tie for the most, or none is hinted,
//     the leader stays where it is;
//   - when its own member is not in that zone and another member is, hands it the
//     leadership (Member.TransferLeadership; the member with the smallest node id when
//     several are), provided
//     – its member has led the journal for at least LeaderZoneHold (30 s), counted from
//     the first refresh that saw it lead and from its last transfer, so leadership moves
//     at most once per hold and never flaps between nodes,
//     – the journal's Raft configuration is the metastore's members (no membership change
//     under way), and
//     – the member handed the leadership applied, within leaderZoneCatchUp, what the
//     leader had applied (a member catching up is never given the leadership);
//   - when no member is in the zone, logs it once per journal and zone (placement cannot
//     follow a hint no journal member is in; the controller creates no journal for it).
//
// Memory: two entries per journal this node's members led (a time each), and one zone
// per journal warned about.

// defaultLeaderZoneHold is QuorumConfig.LeaderZoneHold's default.
const defaultLeaderZoneHold = 30 * time.Second

// leaderZoneCatchUp bounds how long the leader waits for the member it would hand the
// leadership to to apply what the leader has applied.
const leaderZoneCatchUp = 250 * time.Millisecond

// hintedZone is the zone hinted by most of journal jid's partitions in v: "" when none
// is hinted or two zones tie for the most.
func hintedZone(jid string, v *placementView) string {
	if len(v.zones) == 0 {
		return ""
	}
	votes := map[string]int{}
	for part, owner := range v.parts {
		if z := v.zones[part.Stream]; owner == jid && z != "" {
			votes[z]++
		}
	}
	best, n, tie := "", 0, false
	for z, c := range votes {
		switch {
		case c > n:
			best, n, tie = z, c, false
		case c == n:
			tie = true
		}
	}
	if tie {
		return ""
	}
	return best
}

// zoneTarget is the member of j in zone to hand the leadership to, from member self: ok
// false when self is in zone already, zone is "", or no other member is in it (then
// missing is true).
func zoneTarget(j meta.Journal, self, zone string) (target meta.JournalMember, ok, missing bool) {
	if zone == "" {
		return meta.JournalMember{}, false, false
	}
	var cands []meta.JournalMember
	for _, m := range j.Members {
		if m.Node == self && m.Zone == zone {
			return meta.JournalMember{}, false, false
		}
		if m.Node != self && m.Zone == zone {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		return meta.JournalMember{}, false, true
	}
	sort.Slice(cands, func(a, b int) bool { return cands[a].Node < cands[b].Node })
	return cands[0], true, false
}

// followZone hands the leadership of m's journal j (m leads it) to the member in the
// zone its partitions hint, under the rules of the file comment.
func (p *placement) followZone(ctx context.Context, m *journal.Member, j meta.Journal, v *placementView, now time.Time) error {
	since, ok := p.leading[j.ID]
	if !ok {
		since = now
		p.leading[j.ID] = now
	}
	zone := hintedZone(j.ID, v)
	target, ok, missing := zoneTarget(j, p.nodeID, zone)
	if missing && p.warned[j.ID] != zone {
		p.warned[j.ID] = zone
		p.q.log.Warn("quorum leader zone: no member of the journal is in the zone its streams hint; the leader stays", "journal", j.ID, "zone", zone)
	}
	if !missing {
		delete(p.warned, j.ID)
	}
	if !ok || now.Sub(since) < p.hold {
		return nil
	}
	voters, err := m.Voters()
	if err != nil {
		return fmt.Errorf("journal %s: configuration: %w", j.ID, err)
	}
	if len(voters) != len(j.Members) {
		return nil // a membership change is under way
	}
	for _, s := range voters {
		if !j.HasMember(string(s.ID)) {
			return nil
		}
	}
	addr := raft.ServerAddress(target.Addr + "/" + j.ID)
	cctx, cancel := context.WithTimeout(ctx, 2*leaderZoneCatchUp)
	defer cancel()
	if err := p.q.host.AwaitMember(cctx, target.Addr, j.ID, m.Applied(), leaderZoneCatchUp); err != nil {
		p.q.log.Info("quorum leader zone: the member in the hinted zone is not caught up; the leader stays for now", "journal", j.ID,
			"zone", zone, "member", target.Node, "err", err)
		p.leading[j.ID] = now // look again after a hold
		return nil
	}
	p.leading[j.ID] = now
	if err := m.TransferLeadership(target.Node, addr); err != nil {
		return fmt.Errorf("journal %s: hand leadership to %s in %s: %w", j.ID, target.Node, zone, err)
	}
	p.q.log.Info("quorum leader zone: journal leadership handed to the member in the hinted zone", "journal", j.ID, "zone", zone,
		"from", p.nodeID, "to", target.Node)
	return nil
}
