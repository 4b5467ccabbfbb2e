package lognodecmd

import (
	"flag"
	"fmt"
	"net"
	"strings"

	"github.com/loamhq/loam/lognode-svc/node"
)

// journalFlags are the quorum class's flags (docs/quorum.md): the journal Raft listener,
// the member's log directory, and the journal's voters.
type journalFlags struct {
	addr, advertise, dir, voters, id string
	noSync                           bool
}

func (f *journalFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "journal-addr", "", "address of the journal Raft listener (Raft of every journal this node is a member of, and quorum produces forwarded by other nodes); empty: streams of class quorum are refused")
	fs.StringVar(&f.advertise, "journal-advertise", "", "host:port other log nodes reach --journal-addr at (default: the listen address)")
	fs.StringVar(&f.dir, "journal-dir", "", "directory of this node's journal member: its Raft log (fsynced per write) and snapshots")
	fs.StringVar(&f.voters, "journal-voters", "", "the static journal's members, comma-separated NODE_ID=HOST:PORT (their --journal-advertise), this node's among them to host a member; usually three, in three zones; empty: the sequencer's placement controller creates the journals from the registered log nodes")
	fs.StringVar(&f.id, "journal-id", "j0", "the journal's id")
	fs.BoolVar(&f.noSync, "journal-no-sync", false, "testing aid: the journal log is not fsynced (acknowledged writes may be lost on a machine crash)")
}

// apply sets cfg.Quorum (nothing without --journal-addr).
func (f *journalFlags) apply(cfg *node.Config) error {
	if f.addr == "" {
		if f.voters != "" {
			return fmt.Errorf("--journal-voters given without --journal-addr")
		}
		return nil
	}
	var voters []node.JournalVoter
	if strings.TrimSpace(f.voters) != "" { // else placement mode: the sequencer places the journals
		var err error
		if voters, err = parseJournalVoters(f.voters); err != nil {
			return err
		}
	} else if f.dir == "" {
		return fmt.Errorf("--journal-addr without --journal-voters (journals placed by the sequencer) needs --journal-dir")
	}
	cfg.Quorum = node.QuorumConfig{Addr: f.addr, Advertise: f.advertise, Dir: f.dir, Journal: f.id, Voters: voters, NoSync: f.noSync}
	return nil
}

// parseJournalVoters parses NODE_ID=HOST:PORT,...
func parseJournalVoters(s string) ([]node.JournalVoter, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("--journal-voters is required with --journal-addr: NODE_ID=HOST:PORT, comma-separated")
	}
	var out []node.JournalVoter
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("--journal-voters: %q: want NODE_ID=HOST:PORT", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--journal-voters: %q: %v", part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("--journal-voters: node %q named twice", id)
		}
		seen[id] = true
		out = append(out, node.JournalVoter{ID: id, Addr: addr})
	}
	return out, nil
}
