package group

import (
	"context"
	"regexp"
	"slices"
	"time"
)

// consumerGroup is the KIP-848 state of a group (group.cg), guarded by the group's mu.
type consumerGroup struct {
	members     map[string]*cmember
	static      map[string]string     // group.instance.id → member id
	target      map[string]assignment // member → target assignment at targetEpoch
	targetEpoch int32
	assignor    string
	topics      map[string]topicMeta // subscribed topics, resolved
	ids         map[[16]byte]string  // topic id → name
	refreshed   time.Time
}

type topicMeta struct {
	id    [16]byte
	parts int32
}

// cmember is a KIP-848 member.
type cmember struct {
	id, instanceID, rack, clientID, host string
	epoch, prevEpoch                     int32
	subscribed                           []string
	regex                                string
	re                                   *regexp.Regexp
	matched                              map[string]bool // topics the regex matches
	rebalance                            time.Duration
	assignor                             string
	assigned                             assignment // what the member was told it owns
	revoking                             assignment // told to give up, not confirmed yet
	revokeBy                             time.Time
	expires                              time.Time
	sent                                 bool // the member knows assigned and epoch
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*cmember{}, static: map[string]string{}, target: map[string]assignment{},
		topics: map[string]topicMeta{}, ids: map[[16]byte]string{}}
}

func (cg *consumerGroup) memberIDs() []string { return sortedKeys(cg.members) }

func (cg *consumerGroup) assignorName() string {
	if cg.assignor == "" {
		return "uniform"
	}
	return cg.assignor
}

// state is the group's KIP-848 state: Empty, Reconciling (some member is not at its
// target yet) or Stable.
func (cg *consumerGroup) state(g *group) state {
	if len(cg.members) == 0 {
		return stEmpty
	}
	for id, m := range cg.members {
		if m.epoch != g.generation || len(m.revoking) > 0 || !m.assigned.equal(cg.target[id]) {
			return stReconciling
		}
	}
	return stStable
}

func (cg *consumerGroup) deadlines(at func(time.Time)) {
	for _, m := range cg.members {
		at(m.expires)
		if len(m.revoking) > 0 {
			at(m.revokeBy)
		}
	}
}

func (cg *consumerGroup) remove(m *cmember) {
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != "" && cg.static[m.instanceID] == m.id {
		delete(cg.static, m.instanceID)
	}
}

// expireConsumers removes the KIP-848 members whose session ended or who did not revoke
// in time, and bumps the group epoch if any left.
func (g *group) expireConsumers(ctx context.Context, now time.Time) {
	cg := g.cg
	gone := false
	for _, m := range cg.members {
		if !m.expires.After(now) || (len(m.revoking) > 0 && !m.revokeBy.After(now)) {
			g.c.log.Info("kafka group: consumer member expired", "ns", g.ns, "group", g.id, "member", m.id,
				"unrevoked", len(m.revoking) > 0)
			cg.remove(m)
			gone = true
		}
	}
	if gone {
		g.bump(ctx)
	}
}

// free: no member but self holds (t, p) or still has to give it up.
func (cg *consumerGroup) free(t string, p int32, self string) bool {
	for id, o := range cg.members {
		if id != self && (o.assigned.has(t, p) || o.revoking.has(t, p)) {
			return false
		}
	}
	return true
}

// refresh looks the subscribed topics up again (partition counts, ids, regex matches);
// true when anything an assignment depends on changed.
func (g *group) refreshTopics(ctx context.Context) bool {
	cg := g.cg
	names := map[string]bool{}
	regex := false
	for _, m := range cg.members {
		for _, t := range m.subscribed {
			names[t] = true
		}
		regex = regex || m.re != nil
	}
	changed := false
	if regex {
		streams, err := g.c.cfg.Meta.ListStreams(ctx, g.ns)
		if err == nil {
			for _, m := range cg.members {
				if m.re == nil {
					continue
				}
				matched := map[string]bool{}
				for _, s := range streams {
					if _, internal := InternalStream(g.ns, s.Name); !internal && m.re.MatchString(s.Name) {
						matched[s.Name] = true
					}
				}
				// As on Kafka, a regex that matches an internal topic subscribes to it.
				if m.re.MatchString(OffsetsTopic) {
					matched[OffsetsTopic] = true
				}
				if !sameSet(matched, m.matched) {
					m.matched, changed = matched, true
				}
				for t := range matched {
					names[t] = true
				}
			}
		}
	}
	topics := map[string]topicMeta{}
	for _, t := range sortedKeys(names) {
		s, internal := InternalStream(g.ns, t)
		if !internal {
			var err error
			if s, _, err = g.c.cfg.Meta.GetStream(ctx, g.ns, t); err != nil {
				continue // not (yet) a topic: subscribed to nothing
			}
		}
		topics[t] = topicMeta{id: g.c.cfg.TopicID(g.ns, s), parts: s.Partitions}
	}
	if len(topics) != len(cg.topics) {
		changed = true
	}
	for t, tm := range topics {
		if cg.topics[t] != tm {
			changed = true
		}
		cg.ids[tm.id] = t
	}
	cg.topics = topics
	for id, t := range cg.ids {
		if _, ok := topics[t]; !ok || topics[t].id != id {
			delete(cg.ids, id)
		}
	}
	cg.refreshed = g.now()
	return changed
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// bump advances the group epoch in the sequencer and computes every member's target
// assignment for it.
func (g *group) bump(ctx context.Context) int16 {
	if code := g.advance(ctx); code != 0 {
		return code
	}
	cg := g.cg
	in := assignInput{members: cg.memberIDs(), subs: map[string]map[string]bool{}, parts: map[string]int32{}, prev: cg.target}
	for t, tm := range cg.topics {
		in.parts[t] = tm.parts
	}
	for id, m := range cg.members {
		s := map[string]bool{}
		for _, t := range m.subscribed {
			if _, ok := cg.topics[t]; ok {
				s[t] = true
			}
		}
		for t := range m.matched {
			if _, ok := cg.topics[t]; ok {
				s[t] = true
			}
		}
		in.subs[id] = s
	}
	if cg.assignorName() == "range" {
		cg.target = assignRange(in)
	} else {
		cg.target = assignUniform(in)
	}
	cg.targetEpoch = g.generation
	return 0
}

// reconcile moves m towards its target: first it gives up what the target no longer
// holds (keeping its epoch); once it confirmed that, it moves to the target epoch and
// takes the partitions of its target no other member still holds.
func (g *group) reconcile(m *cmember) {
	cg := g.cg
	target := cg.target[m.id]
	revoked := false
	for _, t := range sortedKeys(m.assigned) {
		for _, p := range slices.Clone(m.assigned[t]) {
			if !target.has(t, p) {
				m.assigned.del(t, p)
				m.revoking.add(t, p)
				revoked = true
			}
		}
	}
	if revoked {
		m.revokeBy, m.sent = g.now().Add(max(m.rebalance, time.Second)), false
	}
	if len(m.revoking) > 0 {
		return
	}
	if m.epoch != cg.targetEpoch {
		m.prevEpoch, m.epoch, m.sent = m.epoch, cg.targetEpoch, false
	}
	for _, t := range sortedKeys(target) {
		for _, p := range target[t] {
			if !m.assigned.has(t, p) && cg.free(t, p, m.id) {
				m.assigned.add(t, p)
				m.sent = false
			}
		}
	}
}
