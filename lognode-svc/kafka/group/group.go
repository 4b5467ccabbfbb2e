package group

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"sync"

	"github.com/loamhq/loam/shared/meta"
)

// Group states. Classic groups use the first five (Kafka's names); KIP-848 groups answer
// Empty, Assigning, Reconciling or Stable.
type state int8

const (
	stEmpty state = iota
	stPreparingRebalance
	stCompletingRebalance
	stStable
	stDead
	stReconciling // KIP-848: some member has not reached its target yet
)

func (s state) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Reconciling"}[s]
}

// Group kinds: a group id is classic or KIP-848 ("consumer") while it has members.
type kind int8

const (
	kindClassic kind = iota
	kindConsumer
)

func (k kind) String() string {
	if k == kindConsumer {
		return "consumer"
	}
	return "classic"
}

// group is one group's state; every field is guarded by mu.
type group struct {
	c      *Coordinator
	ns, id string

	mu     sync.Mutex
	dead   bool // dropped: callers look the group up again
	loaded bool // claimed from the sequencer: generation and epoch are current
	kind   kind

	generation int32  // the sequencer's generation (classic generation, KIP-848 group epoch)
	epoch      uint64 // the sequencer's fencing epoch of generation

	state state
	timer *time.Timer

	// classic
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	pending      map[string]time.Time // member ids handed out by MEMBER_ID_REQUIRED → expiry
	static       map[string]string    // group.instance.id → member id
	rebalanceBy  time.Time            // PreparingRebalance: complete the join by then
	notBefore    time.Time            // PreparingRebalance of an empty group: not before then

	// KIP-848
	cg *consumerGroup
}

// member is a classic group member.
type member struct {
	id, instanceID     string
	clientID, host     string
	protocolType       string
	protocols          []kmsg.JoinGroupRequestProtocol
	session, rebalance time.Duration
	assignment         []byte
	join               chan *kmsg.JoinGroupResponse // set while the member waits in JoinGroup
	joinVersion        int16
	sync               chan *kmsg.SyncGroupResponse // set while the member waits in SyncGroup
	expires            time.Time
}

func newGroup(c *Coordinator, ns, id string) *group {
	return &group{c: c, ns: ns, id: id, members: map[string]*member{}, pending: map[string]time.Time{}, static: map[string]string{}}
}

func (g *group) now() time.Time { return g.c.cfg.Now() }

// idle: no members, nothing waiting; the group's whole state is in the sequencer.
func (g *group) idle() bool {
	return len(g.members) == 0 && len(g.pending) == 0 && (g.cg == nil || len(g.cg.members) == 0)
}

// load claims the group from the sequencer unless this node already holds it.
func (g *group) load(ctx context.Context) int16 {
	if g.loaded {
		return 0
	}
	// A claim keeps the protocol type the sequencer has; advances record the members'.
	gen, err := g.c.cfg.Meta.AdvanceKafkaGroup(ctx, g.ns, g.id, 0, "")
	if err != nil {
		code, _ := metaCode(err)
		if code == kerr.RequestTimedOut.Code || code == kerr.UnknownServerError.Code {
			code = kerr.CoordinatorNotAvailable.Code
		}
		g.c.log.Warn("kafka group: claim", "ns", g.ns, "group", g.id, "err", err)
		return code
	}
	g.loaded, g.generation, g.epoch = true, gen.Generation, gen.Epoch
	g.c.rebalances.Inc()
	return 0
}

// advance moves the group to its next generation in the sequencer. A refusal because
// another coordinator claimed the group drops it (NOT_COORDINATOR answered to waiters);
// the caller must then return at once.
func (g *group) advance(ctx context.Context) int16 {
	gen, err := g.c.cfg.Meta.AdvanceKafkaGroup(ctx, g.ns, g.id, g.epoch, g.storedProtocolType())
	if err != nil {
		code, lost := metaCode(err)
		g.c.log.Warn("kafka group: advance generation", "ns", g.ns, "group", g.id, "epoch", g.epoch, "err", err)
		if lost {
			g.lose()
			return code
		}
		// The outcome is unknown: claim again at the next request.
		g.loaded = false
		return kerr.CoordinatorNotAvailable.Code
	}
	g.generation, g.epoch = gen.Generation, gen.Epoch
	g.c.rebalances.Inc()
	return 0
}

// storedProtocolType is the protocol type the sequencer keeps with the generation: the
// classic members' ("consumer", "connect", …), "consumer" for KIP-848 groups, none for a
// group without members (the stored one stays).
func (g *group) storedProtocolType() string {
	switch {
	case g.kind == kindConsumer:
		return "consumer"
	case len(g.members) > 0:
		return g.protocolType
	}
	return ""
}

// lose drops a group the sequencer says another coordinator holds.
func (g *group) lose() {
	g.c.fenced.Inc()
	g.drop(kerr.NotCoordinator.Code)
	go g.c.forget(g)
}

// drop ends the group here: waiters get code, timers stop, callers look it up again.
func (g *group) drop(code int16) {
	if g.dead {
		return
	}
	g.dead = true
	if g.timer != nil {
		g.timer.Stop()
	}
	for _, m := range g.members {
		g.answerJoinErr(m, code)
		g.answerSyncErr(m, code)
	}
}

func (g *group) metaCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), g.c.cfg.MetaTimeout)
}

// ---- timers ----

// schedule arms the group's one timer for the earliest deadline: a session, a pending
// member id, the rebalance timeout or the initial delay.
func (g *group) schedule() {
	if g.dead {
		return
	}
	var next time.Time
	at := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, m := range g.members {
		if m.join == nil {
			at(m.expires)
		}
	}
	for _, t := range g.pending {
		at(t)
	}
	if g.state == stPreparingRebalance {
		at(g.rebalanceBy)
		if g.notBefore.After(g.now()) {
			at(g.notBefore)
		}
	}
	if g.cg != nil {
		g.cg.deadlines(at)
	}
	if next.IsZero() {
		return
	}
	d := max(next.Sub(g.now()), time.Millisecond)
	if g.timer == nil {
		g.timer = time.AfterFunc(d, g.tick)
	} else {
		g.timer.Reset(d)
	}
}

// tick expires sessions and pending ids, and completes a rebalance that is due.
func (g *group) tick() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dead {
		return
	}
	now := g.now()
	for id, t := range g.pending {
		if !t.After(now) {
			delete(g.pending, id)
		}
	}
	removed := false
	for _, m := range g.members {
		if m.join == nil && !m.expires.After(now) {
			g.c.log.Info("kafka group: session expired", "ns", g.ns, "group", g.id, "member", m.id)
			g.remove(m, kerr.UnknownMemberID.Code)
			removed = true
		}
	}
	if removed && (g.state == stStable || g.state == stCompletingRebalance) {
		g.prepareRebalance()
	}
	if g.cg != nil {
		ctx, cancel := g.metaCtx()
		g.expireConsumers(ctx, now)
		cancel()
		if g.dead {
			return
		}
	}
	if g.state == stPreparingRebalance {
		ctx, cancel := g.metaCtx()
		g.maybeCompleteJoin(ctx, !g.rebalanceBy.After(now))
		cancel()
	}
	g.schedule()
}

// ---- classic state machine ----

// remove takes m out of the group, answering its waiters code.
func (g *group) remove(m *member, code int16) {
	g.answerJoinErr(m, code)
	g.answerSyncErr(m, code)
	delete(g.members, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
}

func (g *group) answerJoinErr(m *member, code int16) {
	if m.join == nil {
		return
	}
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version, r.ErrorCode, r.Generation, r.MemberID = m.joinVersion, code, -1, m.id
	m.join <- r
	m.join = nil
}

func (g *group) answerSyncErr(m *member, code int16) {
	if m.sync == nil {
		return
	}
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = code
	m.sync <- r
	m.sync = nil
}

// prepareRebalance moves the group to PreparingRebalance: syncs waiting are told
// REBALANCE_IN_PROGRESS, members have the largest rebalance timeout to join again.
func (g *group) prepareRebalance() {
	if g.state == stCompletingRebalance {
		for _, m := range g.members {
			g.answerSyncErr(m, kerr.RebalanceInProgress.Code)
		}
	}
	now := g.now()
	if g.state == stEmpty {
		g.notBefore = now.Add(g.c.cfg.InitialRebalanceDelay)
	} else if g.state != stPreparingRebalance {
		g.notBefore = time.Time{}
	}
	if g.state != stPreparingRebalance {
		var to time.Duration
		for _, m := range g.members {
			to = max(to, m.rebalance)
		}
		g.rebalanceBy = now.Add(to)
		g.state = stPreparingRebalance
	}
}

// maybeCompleteJoin completes the join once every member joined and no member id is
// pending, or (timedOut) drops the members that did not join and completes it anyway.
func (g *group) maybeCompleteJoin(ctx context.Context, timedOut bool) {
	if g.state != stPreparingRebalance {
		return
	}
	all := len(g.pending) == 0
	for _, m := range g.members {
		all = all && m.join != nil
	}
	if !timedOut && (!all || g.now().Before(g.notBefore)) {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			g.c.log.Info("kafka group: member did not rejoin in time", "ns", g.ns, "group", g.id, "member", m.id)
			g.remove(m, kerr.UnknownMemberID.Code)
		}
	}
	clear(g.pending)
	if code := g.advance(ctx); code != 0 {
		if !g.dead {
			for _, m := range g.members {
				g.answerJoinErr(m, code)
			}
		}
		return
	}
	if len(g.members) == 0 {
		g.state, g.protocol, g.leader = stEmpty, "", ""
		return
	}
	g.protocol = g.selectProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = ""
		for _, id := range slices.Sorted(mapsKeys(g.members)) {
			g.leader = id
			break
		}
	}
	g.state = stCompletingRebalance
	now := g.now()
	for _, m := range g.members {
		m.assignment = nil
		m.expires = now.Add(m.session)
		r := g.joinResponse(m, m.joinVersion)
		m.join <- r
		m.join = nil
	}
}

// joinResponse is the answer of a completed join for m; the leader gets the members.
func (g *group) joinResponse(m *member, version int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation, r.ProtocolType, r.Protocol = g.generation, strp(g.protocolType), strp(g.protocol)
	r.LeaderID, r.MemberID = g.leader, m.id
	if m.id == g.leader {
		for _, id := range slices.Sorted(mapsKeys(g.members)) {
			o := g.members[id]
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID, jm.ProtocolMetadata = o.id, o.metadata(g.protocol)
			if o.instanceID != "" {
				jm.InstanceID = strp(o.instanceID)
			}
			r.Members = append(r.Members, jm)
		}
	}
	return r
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) supports(protocol string) bool {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol every member supports that most members list first
// among those (ties: the earliest in the leader's, then any member's, preference).
func (g *group) selectProtocol() string {
	ids := slices.Sorted(mapsKeys(g.members))
	var cands []string
	for _, p := range g.members[ids[0]].protocols {
		ok := true
		for _, id := range ids {
			ok = ok && g.members[id].supports(p.Name)
		}
		if ok {
			cands = append(cands, p.Name)
		}
	}
	votes := map[string]int{}
	for _, id := range ids {
		for _, p := range g.members[id].protocols {
			if slices.Contains(cands, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, p := range cands {
		if best == "" || votes[p] > votes[best] {
			best = p
		}
	}
	return best
}

// compatible: a joining member of protocolType listing protocols can join the group's
// members (same type, at least one protocol every member lists).
func (g *group) compatible(protocolType string, protocols []kmsg.JoinGroupRequestProtocol, self string) bool {
	if len(g.members) == 0 || (len(g.members) == 1 && g.members[self] != nil) {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		ok := true
		for id, m := range g.members {
			if id != self {
				ok = ok && m.supports(p.Name)
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// commitOffsets commits offs under the group's generation: NONE, or a code for all of
// them (the group dropped when another coordinator holds it).
func (g *group) commitOffsets(ctx context.Context, offs []meta.KafkaOffset) int16 {
	err := g.c.cfg.Meta.CommitKafkaOffsets(ctx, meta.KafkaOffsetCommit{Namespace: g.ns, Group: g.id, Generation: g.generation,
		Epoch: g.epoch, Offsets: offs})
	code, lost := metaCode(err)
	if lost {
		g.c.log.Warn("kafka group: commit refused, another coordinator holds the group", "ns", g.ns, "group", g.id, "err", err)
		g.lose()
	} else if err != nil {
		g.c.log.Warn("kafka group: commit offsets", "ns", g.ns, "group", g.id, "err", err)
	}
	return code
}
