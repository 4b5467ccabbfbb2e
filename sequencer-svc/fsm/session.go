package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Lazy sync (Options.LazySync): the state database is written without fsync, since the Raft
// log (fsynced on a majority before an entry commits) is the durable record and the state
// can always be rebuilt from the newest snapshot plus the log after it. What must never
// happen is trusting a file whose writes were only partly on disk, which is what a power
// loss or a kernel crash leaves behind; a crash of the process alone cannot: every write it
// made is in the page cache and reaches the file.
//
// So the file has a session marker beside it (path + ".session"), written and fsynced
// before the first write of a session:
//
//	"clean\n"            the last session synced the file and closed it
//	"boot <boot id>\n"   a session ran (or runs) under that Linux boot id
//
// Open trusts the file when the marker says clean, or names the current boot (only the
// process died: the page cache held everything), or is absent (a file from a session that
// synced every commit). Otherwise it discards the file and starts empty; the server then
// restores the newest snapshot and Raft replays the log after it.

const sessionSuffix = ".session"

// bootID returns the identity of the running kernel boot, "" where there is none.
var bootID = func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ErrDiscarded is what FSM.Discarded wraps: the state database was not trusted at Open.
var ErrDiscarded = errors.New("fsm: state database discarded")

// startSession decides whether the database at path can be trusted, removes it when not
// (returning why), and marks the session started.
func startSession(path string, nosync bool) (discarded error, err error) {
	marker := path + sessionSuffix
	boot := bootID()
	got, rerr := os.ReadFile(marker)
	_, serr := os.Stat(path)
	switch {
	case serr != nil || errors.Is(rerr, os.ErrNotExist):
		// No file, or one from a session that synced every commit.
	case rerr != nil:
		return nil, fmt.Errorf("fsm: session marker %s: %w", marker, rerr)
	case bytes.Equal(got, []byte("clean\n")):
	case boot != "" && bytes.Equal(got, []byte("boot "+boot+"\n")):
	default:
		why := fmt.Errorf("%w: %s: its last session (%q) did not close it cleanly and ran under another boot (now %q), so its unsynced writes may be lost",
			ErrDiscarded, path, strings.TrimSpace(string(got)), boot)
		if err := removeFile(path); err != nil {
			return nil, fmt.Errorf("fsm: discard %s: %w", path, err)
		}
		discarded = why
	}
	mark := "boot " + boot + "\n"
	if boot == "" {
		mark = "boot unknown\n"
	}
	return discarded, writeMarker(marker, mark, nosync)
}

// endSession marks a synced, closed database clean.
func endSession(path string, nosync bool) error {
	return writeMarker(path+sessionSuffix, "clean\n", nosync)
}

// writeMarker replaces the marker atomically (temporary file, fsync, rename, fsync of the
// directory).
func writeMarker(path, content string, nosync bool) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("fsm: session marker: %w", err)
	}
	_, err = f.WriteString(content)
	if err == nil && !nosync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil && !nosync {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = removeFile(tmp)
		return fmt.Errorf("fsm: session marker %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
