package fsm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
)

// TestLazySyncSessions: a lazily synced state file is trusted after a clean close, after a
// crash of the process under the same boot, and when it has no marker (written by a
// session that synced every commit); after a crash under another boot it is discarded.
func TestLazySyncSessions(t *testing.T) {
	defer func(f func() string) { bootID = f }(bootID)
	boot := "boot-a"
	bootID = func() string { return boot }
	path := filepath.Join(t.TempDir(), "state.db")

	open := func() *FSM {
		t.Helper()
		f, err := Open(path, Options{LazySync: true})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	crash := func(f *FSM) { // the process dies: no sync, no marker
		t.Helper()
		if err := f.db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	hasStream := func(f *FSM) bool {
		_, _, err := f.GetStream(meta.DefaultNS, "s")
		return err == nil
	}

	f := open()
	data, _ := Encode(CreateStream(meta.StreamConfig{Name: "s", Partitions: 1}))
	if r := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data}).(*Result); r.Err != nil {
		t.Fatal(r.Err)
	}
	if f.Discarded() != nil {
		t.Fatalf("new file discarded: %v", f.Discarded())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path + sessionSuffix); string(got) != "clean\n" {
		t.Fatalf("marker after close %q", got)
	}

	boot = "boot-b" // a clean close survives a reboot
	f = open()
	if f.Discarded() != nil || !hasStream(f) || f.AppliedIndex() != 1 {
		t.Fatalf("after clean close: discarded %v, stream %v, applied %d", f.Discarded(), hasStream(f), f.AppliedIndex())
	}
	crash(f)

	f = open() // same boot: only the process died
	if f.Discarded() != nil || !hasStream(f) {
		t.Fatalf("after a process crash: discarded %v, stream %v", f.Discarded(), hasStream(f))
	}
	crash(f)

	boot = "boot-c" // the machine went down: unsynced writes may be lost
	f = open()
	if !errors.Is(f.Discarded(), ErrDiscarded) || hasStream(f) || f.AppliedIndex() != 0 {
		t.Fatalf("after a machine crash: discarded %v, stream %v, applied %d", f.Discarded(), hasStream(f), f.AppliedIndex())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// No marker: a file from a session that synced every commit.
	if err := os.Remove(path + sessionSuffix); err != nil {
		t.Fatal(err)
	}
	boot = "boot-d"
	f = open()
	defer f.Close()
	if f.Discarded() != nil {
		t.Fatalf("file without a marker discarded: %v", f.Discarded())
	}
}
