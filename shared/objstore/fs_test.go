package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loamhq/loam/shared/objstore"
)

func newFS(t *testing.T) (*objstore.FS, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := objstore.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b, dir
}

func listAll(t *testing.T, b objstore.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	if err := b.List(t.Context(), prefix, func(info objstore.ObjectInfo) error {
		keys = append(keys, info.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// tree lists the files and directories under dir, relative, sorted.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFSLayout(t *testing.T) {
	b, dir := newFS(t)
	ctx := t.Context()
	for _, k := range []string{"wal/c1/0001.wal", "wal", "100%/x", "a.b"} {
		if err := b.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"100%25%/", "100%25%/x", "a.b", "wal", "wal%/", "wal%/c1%/", "wal%/c1%/0001.wal"}
	if got := tree(t, dir); !slices.Equal(got, want) {
		t.Errorf("tree = %q\nwant %q", got, want)
	}
}

// TestFSLeftoverTempInvisible: the temporary file of a Put that crashed before its rename
// is not an object: Get, Stat and List do not see it, and it does not block the key.
func TestFSLeftoverTempInvisible(t *testing.T) {
	b, dir := newFS(t)
	ctx := t.Context()
	if err := b.Put(ctx, "seg/0001", []byte("whole")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"%tmp-123456", "seg%/%tmp-987654", "seg%/%tmp-0001"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("half a bo"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := listAll(t, b, ""); !slices.Equal(got, []string{"seg/0001"}) {
		t.Errorf("List = %q, want only seg/0001", got)
	}
	for _, key := range []string{"%tmp-123456", "seg/%tmp-987654"} {
		if _, err := b.Get(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Get(%q): err = %v, want ErrNotFound", key, err)
		}
		if _, err := b.Stat(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Stat(%q): err = %v, want ErrNotFound", key, err)
		}
		// A key spelled like a temp file is an ordinary key.
		if err := b.Put(ctx, key, []byte("real"), objstore.IfAbsent()); err != nil {
			t.Errorf("Put(%q): %v", key, err)
		}
	}
	if err := b.Put(ctx, "seg/0002", []byte("next"), objstore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	want := []string{"%tmp-123456", "seg/%tmp-987654", "seg/0001", "seg/0002"}
	if got := listAll(t, b, ""); !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
}

func TestFSForeignEntriesIgnored(t *testing.T) {
	b, dir := newFS(t)
	ctx := t.Context()
	if err := b.Put(ctx, "d/k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// A directory without the '%' suffix, a bad escape, a symlink: none is an object.
	for _, d := range []string{"plain-dir", "d%/bad%zz%"} {
		if err := os.MkdirAll(filepath.Join(dir, d, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "d%", "bad%zz"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "d%", "k"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, b, ""); !slices.Equal(got, []string{"d/k"}) {
		t.Errorf("List = %q, want only d/k", got)
	}
}

func TestFSDeleteRemovesEmptyDirs(t *testing.T) {
	b, dir := newFS(t)
	ctx := t.Context()
	for _, k := range []string{"x/y/z", "x/w"} {
		if err := b.Put(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Delete(ctx, "x/y/z"); err != nil {
		t.Fatal(err)
	}
	if got, want := tree(t, dir), []string{"x%/", "x%/w"}; !slices.Equal(got, want) {
		t.Errorf("after deleting x/y/z: tree = %q, want %q", got, want)
	}
	if err := b.Delete(ctx, "x/w"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dir); len(got) != 0 {
		t.Errorf("after deleting everything: tree = %q, want empty", got)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the root went away: %v", err)
	}
}

// TestFSConcurrentPutDelete races Puts into a directory against Deletes that empty and
// remove it (run with -race): no Put may fail, and no temporary file may be left.
func TestFSConcurrentPutDelete(t *testing.T) {
	b, dir := newFS(t)
	ctx := t.Context()
	const workers, rounds = 6, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				key := fmt.Sprintf("hot/a/b/%d-%d", w, i%3)
				if err := b.Put(ctx, key, []byte(key), objstore.IfAbsent()); err != nil {
					errs <- err
					return
				}
				if err := b.Delete(ctx, key); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := tree(t, dir); len(got) != 0 {
		t.Errorf("left behind: %q", got)
	}
}

// TestFSIfAbsentRaceRounds: of 16 concurrent IfAbsent Puts exactly one wins, round after
// round, and no temporary file is left behind.
func TestFSIfAbsentRaceRounds(t *testing.T) {
	b, dir := newFS(t)
	ctx := t.Context()
	for round := range 20 {
		key := fmt.Sprintf("r/%d", round)
		var wins sync.WaitGroup
		var mu sync.Mutex
		winners := 0
		start := make(chan struct{})
		for i := range 16 {
			wins.Go(func() {
				<-start
				err := b.Put(ctx, key, fmt.Appendf(nil, "%d", i), objstore.IfAbsent())
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners++
				case !errors.Is(err, objstore.ErrPreconditionFailed):
					t.Errorf("round %d racer %d: %v", round, i, err)
				}
			})
		}
		close(start)
		wins.Wait()
		if winners != 1 {
			t.Fatalf("round %d: %d winners, want 1", round, winners)
		}
	}
	for _, p := range tree(t, dir) {
		if strings.Contains(p, "%tmp-") {
			t.Errorf("temporary file left: %s", p)
		}
	}
}

func TestFSLongPartRejected(t *testing.T) {
	b, _ := newFS(t)
	long := strings.Repeat("x", 256)
	if err := b.Put(t.Context(), "d/"+long, []byte("v")); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Errorf("Put with a 256-byte part: err = %v, want ErrInvalidKey", err)
	}
	if err := b.Put(t.Context(), "d/"+long[:255], []byte("v")); err != nil {
		t.Errorf("Put with a 255-byte part: %v", err)
	}
}

// TestFSSharedDirectory: two FS values on one directory (two processes, in production)
// see each other's objects, and IfAbsent holds across them.
func TestFSSharedDirectory(t *testing.T) {
	b1, dir := newFS(t)
	b2, err := objstore.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b1.Put(ctx, "k", []byte("from 1"), objstore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	if err := b2.Put(ctx, "k", []byte("from 2"), objstore.IfAbsent()); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Errorf("second IfAbsent Put: err = %v", err)
	}
	if got, err := b2.Get(ctx, "k"); err != nil || string(got) != "from 1" {
		t.Errorf("Get through the second FS = %q, %v", got, err)
	}
}

func TestNewFSErrors(t *testing.T) {
	if _, err := objstore.NewFS(""); err == nil {
		t.Error("NewFS(\"\") succeeded")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := objstore.NewFS(file); err == nil {
		t.Error("NewFS on a regular file succeeded")
	}
}
