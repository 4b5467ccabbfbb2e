package meta

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// Quorum placement: the journals of the quorum class (Raft groups of log nodes, package
// lognode-svc/journal) and the journal that holds each partition of each quorum stream. The
// sequencer's placement controller creates journals from the live log nodes that have a
// journal listener and replaces a member whose node is gone; log nodes learn both from
// Watch (Event.JournalsChanged) and ListJournals, start and stop their members, and send a
// partition's produces to the journal that holds it.

// Placement limits.
const (
	MaxJournalIDLength = 64 // bytes of a journal id
	// MaxJournalMembers bounds one journal's voters (three is the class's shape; a
	// replacement holds four for a moment at the Raft level, never in the metastore).
	MaxJournalMembers = 7
	// MaxJournals bounds the journals of a cluster.
	MaxJournals = 1024
)

// ErrJournalEpoch: a membership change whose epoch is not the journal's current one
// (another change came first). Nothing was changed; read the journal again.
var ErrJournalEpoch = errors.New("meta: journal epoch changed")

// JournalMember is one voter of a journal.
type JournalMember struct {
	Node string `json:"node"` // the log node's id (its Raft server id in the journal)
	Addr string `json:"addr"` // host:port of the node's journal Raft listener
	Zone string `json:"zone,omitempty"`
}

// Journal is one Raft group of the quorum class as the metastore records it.
type Journal struct {
	ID      string          `json:"id"`
	Members []JournalMember `json:"members"`
	// Epoch is 1 at creation and grows by one with every membership change
	// (SetJournalMembers); the journal's Raft leader applies each change with AddVoter and
	// RemoveServer.
	Epoch     uint64 `json:"epoch"`
	CreatedMs int64  `json:"created_ms"`
	UpdatedMs int64  `json:"updated_ms"`
}

// HasMember reports whether node is one of j's members.
func (j Journal) HasMember(node string) bool {
	for _, m := range j.Members {
		if m.Node == node {
			return true
		}
	}
	return false
}

// HasZone reports whether one of j's members is in zone.
func (j Journal) HasZone(zone string) bool {
	for _, m := range j.Members {
		if m.Zone == zone {
			return true
		}
	}
	return false
}

// JournalAssignment names the journal that holds one partition of a quorum stream.
type JournalAssignment struct {
	StreamID  uint64 `json:"stream_id"`
	Partition int32  `json:"partition"`
	Journal   string `json:"journal"`
}

// Placement is the whole placement state: every journal by id and every assignment by
// stream and partition.
type Placement struct {
	Journals    []Journal           `json:"journals"`
	Assignments []JournalAssignment `json:"assignments"`
	// Moves are the partitions moving between journals, by stream and partition.
	Moves []JournalMove `json:"moves,omitempty"`
	// LeaderZones are the leader zone hints (StreamConfig.LeaderZone) of the streams that
	// have assignments and a hint, by stream id.
	LeaderZones []StreamLeaderZone `json:"leader_zones,omitempty"`
}

// StreamLeaderZone is one quorum stream's leader zone hint.
type StreamLeaderZone struct {
	StreamID uint64 `json:"stream_id"`
	Zone     string `json:"zone"`
}

// CheckJournalID reports a journal id that cannot be one: 1..MaxJournalIDLength bytes of
// letters, digits, '-', '_' and '.', not starting with '_' (the journal listener's own
// services start with it).
func CheckJournalID(id string) error {
	if id == "" || len(id) > MaxJournalIDLength || id[0] == '_' {
		return fmt.Errorf("%w: journal id %q: want 1 to %d bytes, not starting with '_'", ErrInvalidArgument, id, MaxJournalIDLength)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%w: journal id %q: %q is not a letter, digit, '-', '_' or '.'", ErrInvalidArgument, id, r)
		}
	}
	return nil
}

// CheckJournalMembers reports a member list that cannot be a journal's: none, more than
// MaxJournalMembers, a member without a node id or with an address that is not host:port,
// or a node twice.
func CheckJournalMembers(ms []JournalMember) error {
	if len(ms) == 0 || len(ms) > MaxJournalMembers {
		return fmt.Errorf("%w: journal of %d members: want 1 to %d", ErrInvalidArgument, len(ms), MaxJournalMembers)
	}
	seen := make(map[string]bool, len(ms))
	for i, m := range ms {
		if m.Node == "" || len(m.Node) > MaxNameLength || strings.ContainsAny(m.Node, " \t\r\n") {
			return fmt.Errorf("%w: journal member %d: node id %q", ErrInvalidArgument, i, m.Node)
		}
		if seen[m.Node] {
			return fmt.Errorf("%w: journal member %s listed twice", ErrInvalidArgument, m.Node)
		}
		seen[m.Node] = true
		if _, port, err := net.SplitHostPort(m.Addr); err != nil || port == "" || strings.Contains(m.Addr, "/") {
			return fmt.Errorf("%w: journal member %s: address %q: want host:port", ErrInvalidArgument, m.Node, m.Addr)
		}
		if len(m.Zone) > MaxNameLength {
			return fmt.Errorf("%w: journal member %s: zone of %d bytes", ErrInvalidArgument, m.Node, len(m.Zone))
		}
	}
	return nil
}

// Moving a partition between journals (docs/quorum.md, "Moving a partition"). A move is a
// record beside the assignment, keyed like it, that goes through two states before the
// assignment's owner flips:
//
//	requested  AssignJournalPartitions named another journal than the owner. The owner
//	           (From) still holds the partition; its leader seals it in its journal (no
//	           more appends) and offloads everything it holds of it.
//	sealed     SealJournalMove: From's leader recorded End, the partition's end in From,
//	           equal to the offset index's high watermark (everything is offloaded), and
//	           the idempotent producers' last sequences. To's leader starts the partition
//	           at End with those producers.
//	(done)     CompleteJournalMove: To is the owner, the record is gone.
//
// A move in state requested can be cancelled by assigning the partition to its owner
// again (its leader reopens it); a sealed move only completes.

// Move states.
const (
	MoveRequested = "requested"
	MoveSealed    = "sealed"
)

// MaxMoveProducers bounds the producer states a move carries (the most recently used of
// the partition; a producer left out starts a new sequence after the move).
const MaxMoveProducers = 1024

// ErrJournalMove: a move step whose move is not in the state the step expects (another
// step, a cancellation or a completion came first). Nothing was changed; read the
// placement again.
var ErrJournalMove = errors.New("meta: journal move changed")

// ProducerCarry is one idempotent producer's state on a partition, carried by a move: its
// epoch and its last (at most ProducerBatches) chunks' sequence ranges and base offsets,
// oldest first.
type ProducerCarry struct {
	ID    int64   `json:"id"`
	Epoch int16   `json:"epoch"`
	First []int32 `json:"first"`
	Last  []int32 `json:"last"`
	Base  []int64 `json:"base"`
}

// JournalMove is a partition's move from journal From to journal To in progress.
type JournalMove struct {
	StreamID  uint64          `json:"stream_id"`
	Partition int32           `json:"partition"`
	From      string          `json:"from"`
	To        string          `json:"to"`
	State     string          `json:"state"`
	End       int64           `json:"end,omitempty"`       // sealed: the partition's end in From
	Producers []ProducerCarry `json:"producers,omitempty"` // sealed: its producer states
	CreatedMs int64           `json:"created_ms,omitempty"`
}

// CheckProducerCarry reports producer states a move cannot carry: more than
// MaxMoveProducers, an id <= 0 or twice, or chunk lists of unequal lengths or more than
// ProducerBatches.
func CheckProducerCarry(ps []ProducerCarry) error {
	if len(ps) > MaxMoveProducers {
		return fmt.Errorf("%w: a move carrying %d producer states, at most %d", ErrInvalidArgument, len(ps), MaxMoveProducers)
	}
	seen := make(map[int64]bool, len(ps))
	for _, p := range ps {
		if p.ID <= 0 || seen[p.ID] {
			return fmt.Errorf("%w: a move carrying producer %d twice or with an id <= 0", ErrInvalidArgument, p.ID)
		}
		seen[p.ID] = true
		if len(p.First) != len(p.Last) || len(p.First) != len(p.Base) || len(p.First) > ProducerBatches {
			return fmt.Errorf("%w: a move carrying producer %d with %d/%d/%d chunks, want equal and at most %d",
				ErrInvalidArgument, p.ID, len(p.First), len(p.Last), len(p.Base), ProducerBatches)
		}
	}
	return nil
}
