package reader

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// diskCache is a byte-bounded LRU of immutable byte ranges on local disk (the NVMe
// cache). Files are named by a hash of their key; a restart keeps what is on disk, ordered
// by modification time. Entries are checked by their reader (segment CRCs), so a damaged
// file costs one more range GET, never a wrong answer.
type diskCache struct {
	dir   string
	limit int64

	mu    sync.Mutex
	used  int64
	lru   *list.List // of *diskItem, front = newest
	items map[string]*list.Element
}

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
	f, err := os.CreateTemp(c.dir, "tmp-")
	if err != nil {
		return
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), filepath.Join(c.dir, name)) != nil {
		os.Remove(f.Name())
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
}

// size is the bytes the cache holds.
func (c *diskCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
