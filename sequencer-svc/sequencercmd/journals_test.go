package sequencercmd

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
)

// TestJournalsAndMovePartition: `sequencer-svc journals` and `move-partition` against an
// in-process sequencer over its RPC port: the journals with their epochs, loads and
// members; a move requested by move-partition shows in journals' moves; bad arguments and
// refusals of the sequencer are errors that say what is wrong.
func TestJournalsAndMovePartition(t *testing.T) {
	n := servertest.Start(t)
	mc := server.NewLocalClient(n)
	t.Cleanup(func() { mc.Close() })
	ctx := context.Background()
	cluster := []string{"--cluster", n.RPCAddr()}
	for _, j := range []meta.Journal{
		{ID: "j1", Members: []meta.JournalMember{{Node: "a1", Addr: "10.0.0.1:7101", Zone: "az-a"}, {Node: "b1", Addr: "10.0.0.2:7101", Zone: "az-b"}}},
		{ID: "j2", Members: []meta.JournalMember{{Node: "a2", Addr: "10.0.0.3:7101", Zone: "az-a"}}},
	} {
		if _, err := mc.CreateJournal(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	st, err := mc.CreateStream(ctx, meta.StreamConfig{Name: "q", Partitions: 3, Class: meta.ClassQuorum})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mc.CreateStream(ctx, meta.StreamConfig{Name: "std", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	run := func(cmd func(io.Writer, []string) error, args ...string) (string, error) {
		t.Helper()
		var b strings.Builder
		err := cmd(&b, append(append([]string{}, cluster...), args...))
		return b.String(), err
	}
	js, mv := journals, movePartition

	out, err := run(js)
	want := "JOURNAL  EPOCH  PARTITIONS  MEMBERS\n" +
		"j1       1      3           a1@az-a,b1@az-b\n" +
		"j2       1      0           a2@az-a\n"
	if err != nil || out != want {
		t.Fatalf("journals: %v\n%s\nwant\n%s", err, out, want)
	}
	out, err = run(mv, "default/q", "2", "j2")
	if err != nil || out != "move of default/q partition 2 to journal j2 requested (sequencer-svc journals shows it until it completes)\n" {
		t.Fatalf("move-partition: %v %q", err, out)
	}
	out, err = run(js)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 6 || strings.Join(strings.Fields(lines[4]), " ") != "STREAM ID PARTITION FROM TO STATE END" ||
		strings.Join(strings.Fields(lines[5]), " ") != strconv.FormatUint(st.ID, 10)+" 2 j1 j2 requested 0" {
		t.Fatalf("journals after the request: %v\n%s", err, out)
	}
	// The move is in the metastore as requested, the owner unchanged.
	p, err := mc.ListJournals(ctx)
	if err != nil || len(p.Moves) != 1 || p.Moves[0].From != "j1" || p.Moves[0].To != "j2" || p.Moves[0].State != meta.MoveRequested {
		t.Fatalf("moves: %+v %v", p.Moves, err)
	}
	// Asking again is a repeat; assigning the partition to its owner cancels the move.
	if _, err := run(mv, "default/q", "2", "j2"); err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if _, err := run(mv, "default/q", "2", "j1"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if out, err := run(js); err != nil || strings.Contains(out, "STREAM ID") {
		t.Fatalf("journals after the cancellation: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"default/q", "2"}, "want NAMESPACE/STREAM PARTITION JOURNAL"},
		{[]string{"q", "2", "j2"}, `stream "q": want NAMESPACE/STREAM`},
		{[]string{"default/q", "-1", "j2"}, `partition "-1": want a number >= 0`},
		{[]string{"default/q", "two", "j2"}, `partition "two": want a number >= 0`},
		{[]string{"default/q", "2", "j9"}, "no such journal"},
		{[]string{"default/q", "7", "j2"}, "partition 7 of 3"},
		{[]string{"default/nope", "0", "j2"}, "stream not found"},
		{[]string{"default/std", "0", "j2"}, "not quorum"},
	} {
		if _, err := run(mv, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("move-partition %v: %v, want %q", c.args, err, c.want)
		}
	}
	// A sequencer that does not answer is an error, not an empty table.
	if err := journals(&strings.Builder{}, []string{"--cluster", servertest.FreeAddr(t)}); err == nil {
		t.Fatal("journals of an address nothing listens on: no error")
	}
}
