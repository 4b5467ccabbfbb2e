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
