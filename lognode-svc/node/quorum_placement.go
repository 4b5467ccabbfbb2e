package node

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/loamhq/loam/lognode-svc/journal"
	"github.com/loamhq/loam/shared/meta"
)

// Placement mode of the quorum class (docs/quorum.md, "Placement"): with no static
// voters, the sequencer's placement controller records the journals, their members and
// the journal of every partition of a quorum stream; the node reads them from the
// metastore (ListJournals) at start, whenever the watch stream reports a change
// (Event.JournalsChanged, StreamsChanged, Reset) and every placementRefresh, and then:
//
//   - starts its member of every journal that lists it (bootstrapping with the members of
//     epoch 1 when the journal is new; a member added later starts empty and is caught
//     up by the leader), and stops its member of a journal that no longer lists it (its
//     log stays on disk);
//   - on every journal its member leads, applies the metastore's membership to Raft
//     (RemoveServer of the members that left, then AddVoter of those that joined, so a
//     replacement of a lost member never needs the lost one's vote) and places the
//     journal's streams in its state (Assign entries), so every member serves them;
//   - sends a partition's produces and fetches to the journal that holds it.
//
// Memory: the view holds every journal and one assignment per partition of a quorum
// stream (about 60 bytes each), and the node one epoch per journal.

// placementRefresh is how often the node reads the placement without a watch event.
const placementRefresh = 2 * time.Second

// placementReread is how soon a produce to a partition the view does not place may read
// the placement again.
const placementReread = 100 * time.Millisecond

// placementCallTimeout bounds one refresh's metastore call and Raft changes.
const placementCallTimeout = 10 * time.Second

// placementView is one reading of the metastore's placement.
type placementView struct {
	journals map[string]meta.Journal
	parts    map[journal.Partition]string
	moves    map[journal.Partition]meta.JournalMove
	zones    map[uint64]string // leader zone hints by stream id
}

type placement struct {
	q      *quorum
	nodeID string
	meta   meta.Client
	view   atomic.Pointer[placementView]
	readAt atomic.Int64 // when the view was last read (unix nanoseconds)
	mu     sync.Mutex   // one refresh at a time
	// epochs is the highest epoch of each journal this node acted on (under mu): a
	// reading with an older one is stale and is not acted on, so a membership change is
	// never undone by a late answer.
	epochs map[string]uint64
	// leading is when this node's member was first seen leading each journal, or last
	// handed its leadership on (under mu); warned the zone hint last reported as having no
	// member (quorum_leaderzone.go).
	leading map[string]time.Time
	warned  map[string]string
	hold    time.Duration // QuorumConfig.LeaderZoneHold
	kick    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func startPlacement(q *quorum, nodeID string, mc meta.Client) *placement {
	p := &placement{q: q, nodeID: nodeID, meta: mc, kick: make(chan struct{}, 1), epochs: map[string]uint64{},
		leading: map[string]time.Time{}, warned: map[string]string{}, hold: q.cfg.LeaderZoneHold}
	if p.hold <= 0 {
		p.hold = defaultLeaderZoneHold
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.view.Store(&placementView{journals: map[string]meta.Journal{}, parts: map[journal.Partition]string{}, moves: map[journal.Partition]meta.JournalMove{}})
	p.wg.Add(1)
	go p.run()
	return p
}

func (p *placement) stop() {
	p.cancel()
	p.wg.Wait()
}

func (p *placement) run() {
	defer p.wg.Done()
	t := time.NewTicker(placementRefresh)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(p.ctx, placementCallTimeout)
		if err := p.refresh(ctx); err != nil && p.ctx.Err() == nil {
			p.q.log.Warn("quorum placement not read", "err", err)
		}
		cancel()
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		case <-t.C:
		}
	}
}

// changed asks for a refresh soon (a watch event named a change).
func (p *placement) changed() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// refresh reads the placement and acts on it (see the file comment).
func (p *placement) refresh(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	pl, err := p.meta.ListJournals(ctx)
	if err != nil {
		return err
	}
	v := &placementView{journals: make(map[string]meta.Journal, len(pl.Journals)), parts: make(map[journal.Partition]string, len(pl.Assignments)),
		moves: make(map[journal.Partition]meta.JournalMove, len(pl.Moves)), zones: make(map[uint64]string, len(pl.LeaderZones))}
	for _, z := range pl.LeaderZones {
		v.zones[z.StreamID] = z.Zone
	}
	for _, mv := range pl.Moves {
		if mv.Partition >= 0 {
			v.moves[journal.Partition{Stream: mv.StreamID, Partition: uint32(mv.Partition)}] = mv
		}
	}
	for _, j := range pl.Journals {
		v.journals[j.ID] = j
	}
	for _, a := range pl.Assignments {
		if a.Partition >= 0 {
			v.parts[journal.Partition{Stream: a.StreamID, Partition: uint32(a.Partition)}] = a.Journal
		}
	}
	p.view.Store(v)
	p.readAt.Store(time.Now().UnixNano())
	var errs []error
	now := time.Now()
	for id := range p.leading {
		if m := p.q.host.Member(id); m == nil || !m.IsLeader() {
			delete(p.leading, id)
		}
	}
	for id := range p.warned {
		if _, ok := v.journals[id]; !ok {
			delete(p.warned, id)
		}
	}
	for _, j := range pl.Journals {
		if j.Epoch < p.epochs[j.ID] {
			continue // a stale reading
		}
		p.epochs[j.ID] = j.Epoch
		voters := journalVoters(j)
		p.q.host.Know(j.ID, voters)
		if !j.HasMember(p.nodeID) {
			if p.q.host.Member(j.ID) != nil {
				p.q.log.Info("journal member stopped: the node is no longer one of the journal's members", "journal", j.ID, "epoch", j.Epoch)
				if err := p.q.host.Stop(j.ID); err != nil {
					errs = append(errs, fmt.Errorf("stop member of journal %s: %w", j.ID, err))
				}
			}
			continue
		}
		m := p.q.host.Member(j.ID)
		if m == nil {
			if m, err = p.q.host.Start(j.ID, voters, j.Epoch == 1); err != nil {
				errs = append(errs, fmt.Errorf("start member of journal %s: %w", j.ID, err))
				continue
			}
			p.q.log.Info("journal member started", "journal", j.ID, "epoch", j.Epoch, "members", len(j.Members))
		}
		if m.IsLeader() {
			if err := p.applyMembers(m, j); err != nil {
				errs = append(errs, err)
			}
			if err := p.placeStreams(ctx, m, v); err != nil {
				errs = append(errs, err)
			}
			busy, err := p.moves(ctx, m, v)
			if err != nil {
				errs = append(errs, err)
			}
			if busy {
				p.soon()
			} else if err := p.followZone(ctx, m, j, v, now); err != nil { // quorum_leaderzone.go; not during a move
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// moveRecheck is how soon a refresh looks again while a journal this node leads is in
// the middle of a move (its offload runs every second meanwhile).
const moveRecheck = 200 * time.Millisecond

// soon asks for a refresh after moveRecheck.
func (p *placement) soon() {
	time.AfterFunc(moveRecheck, p.changed)
}

// moves carries out, on m's journal (m leads it), its part of every move (docs/quorum.md,
// "Moving a partition"); busy reports a move that needs another look soon. Every step is
// idempotent and is retried by the next refresh, on this node or on the journal's next
// leader:
//
//   - a partition moving away (state requested): Seal it (appends refused with
//     journal.ErrMoved); offload seals it into segments at once; once the journal holds
//     none of it and the offset index's high watermark is its end, SealJournalMove with
//     the end and its producer states;
//   - a partition moving in (state sealed): Adopt it at the move's end with the carried
//     producers, then CompleteJournalMove (the owner flips);
//   - a partition the journal owns with no move but sealed here (its move was
//     cancelled): reopen it.
func (p *placement) moves(ctx context.Context, m *journal.Member, v *placementView) (busy bool, err error) {
	jid := m.Journal()
	var errs []error
	for part, mv := range v.moves {
		switch {
		case mv.From == jid && mv.State == meta.MoveRequested:
			busy = true
			if err := p.moveOut(ctx, m, part, mv); err != nil {
				errs = append(errs, err)
			}
		case mv.To == jid && mv.State == meta.MoveSealed:
			busy = true
			if _, err := m.Adopt(ctx, journal.Adopt{Partition: part, Start: mv.End, Producers: mv.Producers}); err != nil {
				errs = append(errs, fmt.Errorf("journal %s: adopt %s at %d: %w", jid, part, mv.End, err))
				continue
			}
			if err := p.meta.CompleteJournalMove(ctx, mv.StreamID, mv.Partition, jid, mv.End); err != nil {
				errs = append(errs, fmt.Errorf("journal %s: complete the move of %s at %d: %w", jid, part, mv.End, err))
				continue
			}
			p.q.log.Info("quorum partition moved in", "journal", jid, "from", mv.From, "stream", mv.StreamID, "partition", mv.Partition, "at", mv.End)
		}
	}
	for part, owner := range v.parts {
		if _, moving := v.moves[part]; owner == jid && !moving && m.MoveState(part).Sealed {
			if _, err := m.Seal(ctx, journal.Seal{Partition: part, Sealed: false}); err != nil {
				errs = append(errs, fmt.Errorf("journal %s: reopen %s: %w", jid, part, err))
			}
		}
	}
	return busy, errors.Join(errs...)
}

// moveOut is the old journal's part of a requested move.
func (p *placement) moveOut(ctx context.Context, m *journal.Member, part journal.Partition, mv meta.JournalMove) error {
	jid := m.Journal()
	st := m.MoveState(part)
	if !st.Sealed {
		if _, err := m.Seal(ctx, journal.Seal{Partition: part, Sealed: true}); err != nil {
			return fmt.Errorf("journal %s: seal %s for its move to %s: %w", jid, part, mv.To, err)
		}
		p.q.log.Info("quorum partition sealed for its move", "journal", jid, "to", mv.To, "stream", mv.StreamID, "partition", mv.Partition)
		st = m.MoveState(part)
	}
	if st.Retained > 0 {
		return nil // offload is at it
	}
	_, ps, err := p.meta.Lookup(ctx, mv.StreamID, mv.Partition, 0, 0)
	if err != nil {
		return fmt.Errorf("journal %s: move %s: index: %w", jid, part, err)
	}
	if ps.HighWatermark != st.Next {
		return nil // the last segment's append or trim is under way
	}
	mv.End, mv.Producers = st.Next, m.ProducersOf(part)
	if err := p.meta.SealJournalMove(ctx, mv); err != nil {
		return fmt.Errorf("journal %s: record the seal of %s at %d: %w", jid, part, mv.End, err)
	}
	p.q.log.Info("quorum partition offloaded for its move", "journal", jid, "to", mv.To, "stream", mv.StreamID, "partition", mv.Partition, "end", mv.End)
	return nil
}

// journalVoters is j's members as Raft servers.
func journalVoters(j meta.Journal) []raft.Server {
	out := make([]raft.Server, len(j.Members))
	for i, m := range j.Members {
		out[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.Node), Address: raft.ServerAddress(m.Addr + "/" + j.ID)}
	}
	return out
}

// applyMembers makes the Raft configuration of m's journal (m leads it) the metastore's
// members: the servers that left go first, this leader last (it steps down then, and the
// next leader's node finishes), then the members that joined are added.
func (p *placement) applyMembers(m *journal.Member, j meta.Journal) error {
	cur, err := m.Voters()
	if err != nil {
		return fmt.Errorf("journal %s: configuration: %w", j.ID, err)
	}
	want := map[raft.ServerID]raft.ServerAddress{}
	for _, s := range journalVoters(j) {
		want[s.ID] = s.Address
	}
	have := map[raft.ServerID]raft.ServerAddress{}
	var self bool
	for _, s := range cur {
		have[s.ID] = s.Address
		if _, ok := want[s.ID]; ok {
			continue
		}
		if string(s.ID) == m.ID() {
			self = true
			continue
		}
		if err := m.RemoveServer(string(s.ID)); err != nil {
			return err
		}
		p.q.log.Info("journal member removed", "journal", j.ID, "member", s.ID, "epoch", j.Epoch)
	}
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, string(id))
	}
	sort.Strings(ids)
	for _, id := range ids {
		addr := want[raft.ServerID(id)]
		if a, ok := have[raft.ServerID(id)]; ok && a == addr {
			continue
		}
		if err := m.AddVoter(id, addr); err != nil {
			return err
		}
		p.q.log.Info("journal member added", "journal", j.ID, "member", id, "addr", addr, "epoch", j.Epoch)
	}
	if self {
		p.q.log.Info("journal member removed (this node, the leader)", "journal", j.ID, "member", m.ID(), "epoch", j.Epoch)
		return m.RemoveServer(m.ID())
	}
	return nil
}

// placeStreams places, in the state of m's journal (m leads it), every stream the view
// assigns to the journal and the state does not hold yet: partitions 0..n-1 where n-1
// is the stream's highest partition in the journal.
func (p *placement) placeStreams(ctx context.Context, m *journal.Member, v *placementView) error {
	top := map[uint64]uint32{}
	for part, jid := range v.parts {
		if jid == m.Journal() {
			top[part.Stream] = max(top[part.Stream], part.Partition+1)
		}
	}
	for st, n := range top {
		if m.Has(journal.Partition{Stream: st, Partition: n - 1}) {
			continue
		}
		if _, err := m.Assign(ctx, journal.Assign{Stream: st, Partitions: n}); err != nil {
			return fmt.Errorf("journal %s: place stream %d: %w", m.Journal(), st, err)
		}
	}
	return nil
}

// knownJournal is the journal that holds the partition: the static journal, or the one
// the placement view names.
func (q *quorum) knownJournal(streamID uint64, partition int32) (string, bool) {
	if q.pl == nil {
		return q.cfg.Journal, true
	}
	if partition < 0 {
		return "", false
	}
	jid, ok := q.pl.view.Load().parts[journal.Partition{Stream: streamID, Partition: uint32(partition)}]
	return jid, ok
}

// journalOf is the journal that holds the partition for a produce; a partition the view
// does not place yet is looked up again (its stream may be new), at most once per
// placementReread however many produces ask.
func (q *quorum) journalOf(ctx context.Context, streamID uint64, partition int32) (string, error) {
	if jid, ok := q.knownJournal(streamID, partition); ok {
		return jid, nil
	}
	if time.Since(time.Unix(0, q.pl.readAt.Load())) >= placementReread {
		if err := q.pl.refresh(ctx); err != nil {
			return "", fmt.Errorf("%w: quorum placement: %v", meta.ErrUnavailable, err)
		}
	}
	if jid, ok := q.knownJournal(streamID, partition); ok {
		return jid, nil
	}
	return "", fmt.Errorf("%w: stream %d partition %d is not placed in a journal yet (the sequencer creates journals once three log nodes with a journal listener are live)",
		meta.ErrUnavailable, streamID, partition)
}

// eventIfAny passes a watch event to the placement (Node.watch).
func (q *quorum) eventIfAny(ev meta.Event) {
	if q != nil && q.pl != nil && (ev.JournalsChanged || ev.StreamsChanged || ev.Reset) {
		q.pl.changed()
	}
}

// journalAddrIfAny is the journal listener's advertised address for the node registry
// ("" without the quorum class).
func (q *quorum) journalAddrIfAny() string {
	if q == nil {
		return ""
	}
	return q.mux.Addr()
}
