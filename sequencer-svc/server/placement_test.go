package server

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// TestPlacementOnNode: journals, membership changes and assignments on a real node, in
// process and over gRPC (loam.meta.v1.JournalPlacement), with the same answers and errors,
// and the watch stream reporting each change.
func TestPlacementOnNode(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The watch is subscribed before the first change (a subscription after it would not
	// see it); a Reset (the watcher re-reads everything, as log nodes do) counts too.
	changes := make(chan meta.Event, 64)
	subscribed := make(chan struct{})
	go func() {
		_ = n.watch(ctx, 0, func(uint64) error { close(subscribed); return nil }, func(ev meta.Event) error {
			if ev.JournalsChanged || ev.Reset {
				changes <- ev
			}
			return nil
		})
	}()
	select {
	case <-subscribed:
	case <-ctx.Done():
		t.Fatal("the watch did not start")
	}
	for name, c := range clients(t, n) {
		id := "j-" + name
		ms := []meta.JournalMember{{Node: name + "-1", Addr: "10.0.0.1:7101", Zone: "a"}, {Node: name + "-2", Addr: "10.0.0.2:7101", Zone: "b"},
			{Node: name + "-3", Addr: "10.0.0.3:7101", Zone: "c"}}
		if _, err := c.CreateJournal(ctx, meta.Journal{ID: "_bad", Members: ms}); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("%s: bad id: %v", name, err)
		}
		j, err := c.CreateJournal(ctx, meta.Journal{ID: id, Members: ms})
		if err != nil || j.ID != id || j.Epoch != 1 || !reflect.DeepEqual(j.Members, ms) {
			t.Fatalf("%s: create: %+v %v", name, j, err)
		}
		select {
		case <-changes:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no watch event for the new journal", name)
		}
		st, err := c.CreateStream(ctx, meta.StreamConfig{Namespace: meta.DefaultNS, Name: "q-" + name, Partitions: 2, Class: meta.ClassQuorum})
		if err != nil {
			t.Fatal(err)
		}
		next := append([]meta.JournalMember(nil), ms...)
		next[1] = meta.JournalMember{Node: name + "-4", Addr: "10.0.0.4:7101", Zone: "b"}
		if j, err = c.SetJournalMembers(ctx, id, 1, next); err != nil || j.Epoch != 2 || !reflect.DeepEqual(j.Members, next) {
			t.Fatalf("%s: set members: %+v %v", name, j, err)
		}
		if _, err := c.SetJournalMembers(ctx, id, 1, ms); !errors.Is(err, meta.ErrJournalEpoch) {
			t.Fatalf("%s: stale epoch: %v", name, err)
		}
		if err := c.AssignJournalPartitions(ctx, st.ID, []int32{1}, id); err != nil {
			t.Fatalf("%s: assign: %v", name, err)
		}
		if err := c.AssignJournalPartitions(ctx, st.ID, []int32{5}, id); !errors.Is(err, meta.ErrPartitionNotFound) {
			t.Fatalf("%s: assign a missing partition: %v", name, err)
		}
		p, err := c.ListJournals(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []meta.JournalAssignment
		for _, a := range p.Assignments {
			if a.StreamID == st.ID {
				got = append(got, a)
			}
		}
		if len(got) != 2 || got[0].Partition != 0 || got[1].Partition != 1 || got[1].Journal != id {
			t.Fatalf("%s: the stream's assignments: %+v", name, got)
		}
		found := false
		for _, pj := range p.Journals {
			found = found || pj.ID == id && pj.Epoch == 2 && reflect.DeepEqual(pj.Members, next)
		}
		if !found {
			t.Fatalf("%s: listed %+v", name, p.Journals)
		}
	}
}
