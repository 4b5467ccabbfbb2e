package reader

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// diskCache is a byte-bounded LRU of immutable byte ranges on local disk (the NVMe
// cache). Files are named by a hash of their key; a restart keeps what is on disk, ordered
// by modification time. Entries are checked by their reader (segment CRCs), so a damaged
// file costs one more range GET, never a wrong answer.
//
// A write that finds the filesystem full (ENOSPC, EDQUOT: the disk is smaller than the
// cache's bound, or something else filled it) evicts the oldest blocks to make room and
// is tried once more; a block that still cannot be written is simply not cached (the
// fetch is served from the bucket's bytes all the same). Failures are counted
// (loam_disk_cache_write_errors_total) and logged at most once per diskWarnEvery.
type diskCache struct {
	dir     string
	limit   int64
	metrics *Metrics     // nil: none
	log     *slog.Logger // nil: none

	mu       sync.Mutex
	used     int64
	lru      *list.List // of *diskItem, front = newest
	items    map[string]*list.Element
	lastWarn time.Time
	unwarned int // write failures since the last warning
}

// diskWarnEvery spaces the warnings of failed cache writes.
const diskWarnEvery = 30 * time.Second

type diskItem struct {
	name string
	size int64
}

func openDiskCache(dir string, limit int64) (*diskCache, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("reader: disk cache %s: %w", dir, err)
	}
	c := &diskCache{dir: dir, limit: limit, lru: list.New(), items: make(map[string]*list.Element)}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reader: disk cache %s: %w", dir, err)
	}
	type found struct {
		name  string
		size  int64
		mtime int64
	}
	var fs []found
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if strings.HasPrefix(e.Name(), "tmp-") {
			os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		fs = append(fs, found{e.Name(), info.Size(), info.ModTime().UnixNano()})
	}
	slices.SortFunc(fs, func(a, b found) int { return int(a.mtime - b.mtime) })
	for _, f := range fs {
		c.items[f.name] = c.lru.PushFront(&diskItem{name: f.name, size: f.size})
		c.used += f.size
	}
	c.mu.Lock()
	c.evictLocked()
	c.mu.Unlock()
	return c, nil
}

func diskName(key string) string {
	h := sha256.Sum256([]byte(key))
	return nsDiskPrefix(key) + hex.EncodeToString(h[:16])
}

func (c *diskCache) get(key string) ([]byte, bool) {
	name := diskName(key)
	c.mu.Lock()
	el, ok := c.items[name]
	if ok {
		c.lru.MoveToFront(el)
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(c.dir, name))
	if err != nil {
		c.remove(key)
		return nil, false
	}
	return b, true
}

func (c *diskCache) put(key string, b []byte) {
	if int64(len(b)) > c.limit {
		return
	}
	name := diskName(key)
	c.mu.Lock()
	_, ok := c.items[name]
	c.mu.Unlock()
	if ok {
		return
	}
	err := c.write(name, b)
	if isNoSpace(err) {
		// The filesystem is full: make room by dropping the oldest blocks, then try once
		// more.
		c.metrics.diskWriteError("no_space")
		full := err
		if c.evictFor(int64(len(b))) > 0 {
			switch err = c.write(name, b); {
			case isNoSpace(err):
				c.metrics.diskWriteError("no_space")
			case err != nil:
				c.metrics.diskWriteError("other")
			}
		}
		c.warn(full, err == nil)
		if err != nil {
			return
		}
	} else if err != nil {
		c.metrics.diskWriteError("other")
		c.warn(err, false)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[name]; ok {
		return
	}
	c.items[name] = c.lru.PushFront(&diskItem{name: name, size: int64(len(b))})
	c.used += int64(len(b))
	c.evictLocked()
	c.metrics.diskSize(c.used)
}

// write writes b to the cache file name, through a temporary file renamed into place (a
// reader never sees half a file).
func (c *diskCache) write(name string, b []byte) error {
	f, err := os.CreateTemp(c.dir, "tmp-")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(c.dir, name))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// evictFor drops the oldest blocks until at least n bytes are freed or the cache is empty,
// and returns the bytes freed.
func (c *diskCache) evictFor(n int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var freed int64
	for freed < n && c.lru.Len() > 0 {
		el := c.lru.Back()
		freed += el.Value.(*diskItem).size
		c.dropLocked(el)
	}
	return freed
}

// warn logs a failed write (cached: the write went through once the oldest blocks were
// evicted), at most once per diskWarnEvery, with the failures since the last warning.
func (c *diskCache) warn(err error, cached bool) {
	c.mu.Lock()
	c.unwarned++
	now := time.Now()
	if c.log == nil || now.Sub(c.lastWarn) < diskWarnEvery {
		c.mu.Unlock()
		return
	}
	n, held := c.unwarned, c.used
	c.unwarned, c.lastWarn = 0, now
	c.mu.Unlock()
	var msg string
	switch {
	case isNoSpace(err) && cached:
		msg = "reader: disk cache filesystem full: the oldest blocks are evicted to make room (the filesystem holds less than the cache's bound)"
	case isNoSpace(err):
		msg = "reader: disk cache filesystem full: blocks not cached are served from the bucket; caching resumes when space returns"
	default:
		msg = "reader: disk cache write failed: the block is served from the bucket, not cached"
	}
	c.log.Warn(msg, "dir", c.dir, "err", err, "failures", n, "cache_bytes", held)
}

func (c *diskCache) remove(key string) {
	name := diskName(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[name]; ok {
		c.dropLocked(el)
	}
}

func (c *diskCache) evictLocked() {
	for c.used > c.limit && c.lru.Len() > 0 {
		c.dropLocked(c.lru.Back())
	}
}

func (c *diskCache) dropLocked(el *list.Element) {
	it := c.lru.Remove(el).(*diskItem)
	delete(c.items, it.name)
	c.used -= it.size
	os.Remove(filepath.Join(c.dir, it.name))
	c.metrics.diskSize(c.used)
}

// size is the bytes the cache holds.
func (c *diskCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
