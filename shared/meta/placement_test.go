package meta_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/loamhq/loam/lognode-svc/journal"
	"github.com/loamhq/loam/shared/meta"
)

func TestCheckJournal(t *testing.T) {
	for _, id := range []string{"j1", "J-2.a_b", strings.Repeat("x", meta.MaxJournalIDLength)} {
		if err := meta.CheckJournalID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", "_x", "j 1", "j/1", "é", strings.Repeat("x", meta.MaxJournalIDLength+1)} {
		if err := meta.CheckJournalID(id); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Errorf("%q: %v, want invalid", id, err)
		}
	}
	ok := []meta.JournalMember{{Node: "a", Addr: "10.0.0.1:7101", Zone: "z1"}, {Node: "b", Addr: "[::1]:7101"}}
	if err := meta.CheckJournalMembers(ok); err != nil {
		t.Fatal(err)
	}
	for name, ms := range map[string][]meta.JournalMember{
		"none":       nil,
		"too many":   make([]meta.JournalMember, meta.MaxJournalMembers+1),
		"no node":    {{Addr: "h:1"}},
		"space":      {{Node: "a b", Addr: "h:1"}},
		"twice":      {{Node: "a", Addr: "h:1"}, {Node: "a", Addr: "h:2"}},
		"no port":    {{Node: "a", Addr: "h"}},
		"empty port": {{Node: "a", Addr: "h:"}},
		"slash":      {{Node: "a", Addr: "h:1/j"}},
		"long zone":  {{Node: "a", Addr: "h:1", Zone: strings.Repeat("z", meta.MaxNameLength+1)}},
	} {
		if err := meta.CheckJournalMembers(ms); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}

// FuzzCheckJournal: whatever the metastore accepts, a log node can host: an accepted id
// and member address make a Raft member address the journal listener takes apart again.
func FuzzCheckJournal(f *testing.F) {
	for _, s := range [][2]string{{"j1", "10.0.0.1:7101"}, {"_x", "h:1"}, {"j/1", "h:1/j"}, {"a.b-c", "[::1]:0"}, {"", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, id, addr string) {
		if meta.CheckJournalID(id) != nil || meta.CheckJournalMembers([]meta.JournalMember{{Node: "n", Addr: addr}}) != nil {
			return
		}
		hp, j, err := journal.SplitMemberAddr(raft.ServerAddress(addr + "/" + id))
		if err != nil || hp != addr || j != id {
			t.Fatalf("id %q addr %q: split as %q %q (%v)", id, addr, hp, j, err)
		}
	})
}
