package metafake

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/loamhq/loam/shared/meta"
)

// Quorum placement, in memory, with the sequencer's rules (sequencer-svc/fsm/placement.go):
// journals by id, and each partition of a quorum stream in the least loaded journal (the
// journal of the stream's partition 0 for partitions added later; streams created while
// there is no journal are placed by the first one; a stream with a leader zone hint goes to
// the least loaded journal with a member in that zone, if any).

type placementState struct {
	journals map[string]meta.Journal
	assigned map[pkey]string
	moves    map[pkey]meta.JournalMove
}

func (f *Meta) placementLocked() *placementState {
	if f.placement == nil {
		f.placement = &placementState{journals: map[string]meta.Journal{}, assigned: map[pkey]string{}, moves: map[pkey]meta.JournalMove{}}
	}
	return f.placement
}

// CreateJournal records journal j at epoch 1 and places the unplaced quorum partitions.
func (f *Meta) CreateJournal(ctx context.Context, j meta.Journal) (meta.Journal, error) {
	if err := meta.CheckJournalID(j.ID); err != nil {
		return meta.Journal{}, err
	}
	if err := meta.CheckJournalMembers(j.Members); err != nil {
		return meta.Journal{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ps := f.placementLocked()
	if old, ok := ps.journals[j.ID]; ok {
		if !slices.Equal(old.Members, j.Members) {
			return meta.Journal{}, fmt.Errorf("%w: create journal %s: it exists with other members", meta.ErrInvalidArgument, j.ID)
		}
		return old, nil
	}
	if len(ps.journals) >= meta.MaxJournals {
		return meta.Journal{}, fmt.Errorf("%w: create journal %s: %d journals already", meta.ErrInvalidArgument, j.ID, len(ps.journals))
	}
	now := f.nowMs()
	j = meta.Journal{ID: j.ID, Members: slices.Clone(j.Members), Epoch: 1, CreatedMs: now, UpdatedMs: now}
	ps.journals[j.ID] = j
	for _, st := range f.streams {
		f.placeLocked(st, 0)
	}
	return j, nil
}

// placeLocked places st's partitions from `from` on that no journal holds.
func (f *Meta) placeLocked(st meta.Stream, from int32) {
	ps := f.placementLocked()
	if st.Class != meta.ClassQuorum || len(ps.journals) == 0 {
		return
	}
	target := ps.assigned[pkey{st.ID, 0}]
	if _, ok := ps.journals[target]; !ok {
		loads := map[string]int{}
		for _, j := range ps.assigned {
			loads[j]++
		}
		ids := make([]string, 0, len(ps.journals))
		for id := range ps.journals {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		target = ids[0]
		for _, id := range ids[1:] {
			if loads[id] < loads[target] {
				target = id
			}
		}
		// A leader zone hint: the least loaded journal with a member in the zone, if any.
		zoned := ""
		for _, id := range ids {
			if st.LeaderZone != "" && ps.journals[id].HasZone(st.LeaderZone) && (zoned == "" || loads[id] < loads[zoned]) {
				zoned = id
			}
		}
		if zoned != "" {
			target = zoned
		}
	}
	for p := from; p < st.Partitions; p++ {
		if _, ok := ps.assigned[pkey{st.ID, p}]; !ok {
			ps.assigned[pkey{st.ID, p}] = target
		}
	}
}

// SetJournalMembers replaces journal id's members at epoch.
func (f *Meta) SetJournalMembers(ctx context.Context, id string, epoch uint64, members []meta.JournalMember) (meta.Journal, error) {
	if err := meta.CheckJournalMembers(members); err != nil {
		return meta.Journal{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ps := f.placementLocked()
	j, ok := ps.journals[id]
	switch {
	case !ok:
		return meta.Journal{}, fmt.Errorf("%w: set the members of journal %q: no such journal", meta.ErrInvalidArgument, id)
	case j.Epoch == epoch+1 && slices.Equal(j.Members, members):
		return j, nil
	case j.Epoch != epoch:
		return meta.Journal{}, fmt.Errorf("set the members of journal %s at epoch %d: it is at epoch %d: %w", id, epoch, j.Epoch, meta.ErrJournalEpoch)
	}
	j.Members, j.Epoch, j.UpdatedMs = slices.Clone(members), j.Epoch+1, f.nowMs()
	ps.journals[id] = j
	return j, nil
}

// AssignJournalPartitions assigns a partition no journal holds to journal, and requests
// the move of one another journal holds (meta.Client's rules).
func (f *Meta) AssignJournalPartitions(ctx context.Context, streamID uint64, partitions []int32, journal string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ps := f.placementLocked()
	i := slices.IndexFunc(f.streams, func(s meta.Stream) bool { return s.ID == streamID })
	switch {
	case i < 0:
		return fmt.Errorf("assign partitions of stream %d: %w", streamID, meta.ErrStreamNotFound)
	case f.streams[i].Class != meta.ClassQuorum:
		return fmt.Errorf("%w: assign partitions of stream %d: class %s", meta.ErrInvalidArgument, streamID, f.streams[i].Class)
	case len(partitions) == 0:
		return fmt.Errorf("%w: assign partitions of stream %d: none", meta.ErrInvalidArgument, streamID)
	}
	if _, ok := ps.journals[journal]; !ok {
		return fmt.Errorf("%w: assign partitions of stream %d: no journal %q", meta.ErrInvalidArgument, streamID, journal)
	}
	for _, p := range partitions {
		if p < 0 || p >= f.streams[i].Partitions {
			return fmt.Errorf("assign partition %d of stream %d: %w", p, streamID, meta.ErrPartitionNotFound)
		}
		k := pkey{streamID, p}
		m, moving := ps.moves[k]
		switch {
		case !moving, m.To == journal:
		case ps.assigned[k] == journal && m.State == meta.MoveRequested:
		case ps.assigned[k] == journal:
			return fmt.Errorf("%w: assign partition %d of stream %d: sealed for its move to %s", meta.ErrInvalidArgument, p, streamID, m.To)
		default:
			return fmt.Errorf("%w: assign partition %d of stream %d: moving from %s to %s", meta.ErrInvalidArgument, p, streamID, m.From, m.To)
		}
	}
	for _, p := range partitions {
		k := pkey{streamID, p}
		m, moving := ps.moves[k]
		owner := ps.assigned[k]
		_, known := ps.journals[owner]
		switch {
		case moving && m.To == journal:
		case moving:
			delete(ps.moves, k)
		case !known:
			ps.assigned[k] = journal
		case owner != journal:
			ps.moves[k] = meta.JournalMove{StreamID: streamID, Partition: p, From: owner, To: journal, State: meta.MoveRequested, CreatedMs: f.nowMs()}
		}
	}
	return nil
}

// SealJournalMove records a requested move's seal at m.End (meta.Client's rules).
func (f *Meta) SealJournalMove(ctx context.Context, m meta.JournalMove) error {
	if err := meta.CheckProducerCarry(m.Producers); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ps := f.placementLocked()
	k := pkey{m.StreamID, m.Partition}
	cur, ok := ps.moves[k]
	what := fmt.Sprintf("seal the move of stream %d partition %d from %s to %s at %d", m.StreamID, m.Partition, m.From, m.To, m.End)
	switch {
	case !ok || cur.From != m.From || cur.To != m.To:
		return fmt.Errorf("%s: no such move: %w", what, meta.ErrJournalMove)
	case cur.State == meta.MoveSealed && cur.End == m.End:
		return nil
	case cur.State != meta.MoveRequested:
		return fmt.Errorf("%s: the move is %s at %d: %w", what, cur.State, cur.End, meta.ErrJournalMove)
	}
	fp, err := f.part(m.StreamID, m.Partition)
	if err != nil {
		return err
	}
	if fp.hwm != m.End {
		return fmt.Errorf("%s: the offset index ends at %d: %w", what, fp.hwm, meta.ErrIndexChanged)
	}
	cur.State, cur.End, cur.Producers = meta.MoveSealed, m.End, slices.Clone(m.Producers)
	ps.moves[k] = cur
	if l := f.leases[leaseKey{k, meta.LeaseOffload}]; l != nil {
		l.expiresMs = 0
	}
	return nil
}

// CompleteJournalMove flips the owner of a move sealed at end (meta.Client's rules).
func (f *Meta) CompleteJournalMove(ctx context.Context, streamID uint64, partition int32, journal string, end int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ps := f.placementLocked()
	k := pkey{streamID, partition}
	cur, ok := ps.moves[k]
	what := fmt.Sprintf("complete the move of stream %d partition %d to %s at %d", streamID, partition, journal, end)
	switch {
	case !ok && ps.assigned[k] == journal:
		return nil
	case !ok || cur.To != journal:
		return fmt.Errorf("%s: no such move: %w", what, meta.ErrJournalMove)
	case cur.State != meta.MoveSealed || cur.End != end:
		return fmt.Errorf("%s: the move is %s at %d: %w", what, cur.State, cur.End, meta.ErrJournalMove)
	}
	ps.assigned[k] = journal
	delete(ps.moves, k)
	return nil
}

// ListJournals answers every journal by id and every assignment by stream and partition.
func (f *Meta) ListJournals(ctx context.Context) (meta.Placement, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ps := f.placementLocked()
	var out meta.Placement
	for _, j := range ps.journals {
		j.Members = slices.Clone(j.Members)
		out.Journals = append(out.Journals, j)
	}
	sort.Slice(out.Journals, func(a, b int) bool { return out.Journals[a].ID < out.Journals[b].ID })
	for k, j := range ps.assigned {
		out.Assignments = append(out.Assignments, meta.JournalAssignment{StreamID: k.stream, Partition: k.p, Journal: j})
	}
	for _, st := range f.streams {
		if _, ok := ps.assigned[pkey{st.ID, 0}]; ok && st.LeaderZone != "" {
			out.LeaderZones = append(out.LeaderZones, meta.StreamLeaderZone{StreamID: st.ID, Zone: st.LeaderZone})
		}
	}
	sort.Slice(out.LeaderZones, func(a, b int) bool { return out.LeaderZones[a].StreamID < out.LeaderZones[b].StreamID })
	sort.Slice(out.Assignments, func(a, b int) bool {
		x, y := out.Assignments[a], out.Assignments[b]
		return x.StreamID < y.StreamID || x.StreamID == y.StreamID && x.Partition < y.Partition
	})
	for _, m := range ps.moves {
		m.Producers = slices.Clone(m.Producers)
		out.Moves = append(out.Moves, m)
	}
	sort.Slice(out.Moves, func(a, b int) bool {
		x, y := out.Moves[a], out.Moves[b]
		return x.StreamID < y.StreamID || x.StreamID == y.StreamID && x.Partition < y.Partition
	})
	return out, nil
}
