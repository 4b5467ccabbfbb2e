package metapb

import "github.com/loamhq/loam/shared/meta"

// FromJournal converts a meta.Journal.
func FromJournal(j meta.Journal) *Journal {
	out := &Journal{Id: j.ID, Epoch: j.Epoch, CreatedMs: j.CreatedMs, UpdatedMs: j.UpdatedMs}
	out.Members = FromJournalMembers(j.Members)
	return out
}

// ToJournal converts a Journal (nil: the zero journal).
func ToJournal(j *Journal) meta.Journal {
	return meta.Journal{ID: j.GetId(), Members: ToJournalMembers(j.GetMembers()), Epoch: j.GetEpoch(), CreatedMs: j.GetCreatedMs(),
		UpdatedMs: j.GetUpdatedMs()}
}

// FromJournalMembers converts journal members.
func FromJournalMembers(ms []meta.JournalMember) []*JournalMember {
	out := make([]*JournalMember, len(ms))
	for i, m := range ms {
		out[i] = &JournalMember{Node: m.Node, Addr: m.Addr, Zone: m.Zone}
	}
	return out
}

// ToJournalMembers converts journal members.
func ToJournalMembers(ms []*JournalMember) []meta.JournalMember {
	if len(ms) == 0 {
		return nil
	}
	out := make([]meta.JournalMember, len(ms))
	for i, m := range ms {
		out[i] = meta.JournalMember{Node: m.GetNode(), Addr: m.GetAddr(), Zone: m.GetZone()}
	}
	return out
}

// FromPlacement converts a meta.Placement.
func FromPlacement(p meta.Placement) *ListJournalsResponse {
	out := &ListJournalsResponse{Journals: make([]*Journal, len(p.Journals)), Assignments: make([]*JournalAssignment, len(p.Assignments))}
	for i, j := range p.Journals {
		out.Journals[i] = FromJournal(j)
	}
	for i, a := range p.Assignments {
		out.Assignments[i] = &JournalAssignment{StreamId: a.StreamID, Partition: a.Partition, Journal: a.Journal}
	}
	for _, m := range p.Moves {
		out.Moves = append(out.Moves, FromJournalMove(m))
	}
	for _, z := range p.LeaderZones {
		out.LeaderZones = append(out.LeaderZones, &StreamLeaderZone{StreamId: z.StreamID, Zone: z.Zone})
	}
	return out
}

// ToPlacement converts a ListJournalsResponse.
func ToPlacement(r *ListJournalsResponse) meta.Placement {
	var out meta.Placement
	for _, j := range r.GetJournals() {
		out.Journals = append(out.Journals, ToJournal(j))
	}
	for _, a := range r.GetAssignments() {
		out.Assignments = append(out.Assignments, meta.JournalAssignment{StreamID: a.GetStreamId(), Partition: a.GetPartition(), Journal: a.GetJournal()})
	}
	for _, m := range r.GetMoves() {
		out.Moves = append(out.Moves, ToJournalMove(m))
	}
	for _, z := range r.GetLeaderZones() {
		out.LeaderZones = append(out.LeaderZones, meta.StreamLeaderZone{StreamID: z.GetStreamId(), Zone: z.GetZone()})
	}
	return out
}

// FromJournalMove converts a meta.JournalMove.
func FromJournalMove(m meta.JournalMove) *JournalMove {
	out := &JournalMove{StreamId: m.StreamID, Partition: m.Partition, From: m.From, To: m.To, State: m.State, End: m.End, CreatedMs: m.CreatedMs}
	for _, p := range m.Producers {
		out.Producers = append(out.Producers, &ProducerCarry{Id: p.ID, Epoch: int32(p.Epoch), First: p.First, Last: p.Last, Base: p.Base})
	}
	return out
}

// ToJournalMove converts a JournalMove (nil: the zero move).
func ToJournalMove(m *JournalMove) meta.JournalMove {
	out := meta.JournalMove{StreamID: m.GetStreamId(), Partition: m.GetPartition(), From: m.GetFrom(), To: m.GetTo(), State: m.GetState(),
		End: m.GetEnd(), CreatedMs: m.GetCreatedMs()}
	for _, p := range m.GetProducers() {
		out.Producers = append(out.Producers, meta.ProducerCarry{ID: p.GetId(), Epoch: int16(p.GetEpoch()), First: p.GetFirst(), Last: p.GetLast(), Base: p.GetBase()})
	}
	return out
}
