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
	return out
}
