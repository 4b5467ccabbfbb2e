package reader

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/prometheus/client_golang/prometheus"
)

// smallTmpfs mounts a tmpfs of size at a fresh directory, or skips the test where mounting
// is refused (it needs root and mount rights).
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

func gatherCounter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

func block(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 200<<10) }

// TestDiskCacheFullEvictsOldestAndCounts: the disk cache's bound (1 GiB) is larger than
// its filesystem (a 1 MiB tmpfs), so the cache fills the disk with its own blocks. Writes
// that find the disk full must make room by evicting the oldest blocks (the newest blocks
// are the ones fetched next), be counted, and leave no temporary file behind; when
// something else takes all the space, blocks are not cached (and nothing breaks); when the
// space returns, caching resumes.
func TestDiskCacheFullEvictsOldestAndCounts(t *testing.T) {
	dir := smallTmpfs(t, "1m")
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	r, err := New(Config{Bucket: objstore.NewMem(), Meta: &fakeIndex{}, DiskCacheDir: dir, DiskCacheBytes: 1 << 30, Metrics: NewMetrics(reg),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := r.disk
	for i := range 12 {
		c.put(fmt.Sprintf("seg#%d", i), block(i))
	}
	for _, i := range []int{11, 10} {
		b, ok := c.get(fmt.Sprintf("seg#%d", i))
		if !ok {
			t.Fatalf("block %d (of the newest) is not cached: the full disk stopped the cache taking new blocks (cache holds %d bytes)", i, c.size())
		}
		if !bytes.Equal(b, block(i)) {
			t.Fatalf("block %d read back differs", i)
		}
	}
	if _, ok := c.get("seg#0"); ok {
		t.Fatal("the oldest block is still cached on a 1 MiB disk after 12 blocks of 200 KiB")
	}
	if n := gatherCounter(t, reg, "loam_disk_cache_write_errors_total", "no_space"); n == 0 {
		t.Fatal("loam_disk_cache_write_errors_total{error=\"no_space\"} is 0 after writes found the disk full")
	}
	if !strings.Contains(logs.String(), "disk cache filesystem full") {
		t.Fatalf("no warning that the disk cache's filesystem is full; the log:\n%s", logs.String())
	}
	noTemps := func() {
		t.Helper()
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "tmp-") {
				t.Fatalf("temporary file %s left behind", e.Name())
			}
		}
	}
	noTemps()

	// Something else takes every byte left, and the cache is emptied (a restart, say):
	// a block cannot be cached, and the cache says so without breaking.
	c.mu.Lock()
	for c.lru.Len() > 0 {
		c.dropLocked(c.lru.Back())
	}
	c.mu.Unlock()
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := filler.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	filler.Close()
	c.put("seg#full", block(1))
	if _, ok := c.get("seg#full"); ok {
		t.Fatal("a block was cached on a disk with no space")
	}
	noTemps()
	// Space returns: caching resumes.
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	c.put("seg#back", block(2))
	if b, ok := c.get("seg#back"); !ok || !bytes.Equal(b, block(2)) {
		t.Fatal("no caching once space returned")
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
