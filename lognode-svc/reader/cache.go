package reader

import (
	"container/list"
	"sort"
	"sync"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/recordbatch"
)

// span is a run of whole batches covering offsets [base, end), baseOffsets patched, in
// data or, for a tail chunk committed from several requests, in parts (each whole
// batches, in offset order). It is immutable once built.
type span struct {
	base, end int64
	data      []byte
	parts     [][]byte // when data is nil
}

// size is the bytes of the span's batches.
func (s *span) size() int64 {
	n := int64(len(s.data))
	for _, p := range s.parts {
		n += int64(len(p))
	}
	return n
}

// each calls fn for every batch with its first offset and the offset after it.
func (s *span) each(fn func(base, end int64, batch []byte) bool) {
	if s.data != nil {
		eachBatch(s.data, fn)
		return
	}
	for _, p := range s.parts {
		if !eachBatch(p, fn) {
			return
		}
	}
}

// eachBatch calls fn for every batch of data; false when fn stopped it.
func eachBatch(data []byte, fn func(base, end int64, batch []byte) bool) bool {
	rest := data
	for len(rest) > 0 {
		b, tail, err := recordbatch.Parse(rest)
		if err != nil {
			return true // validated when the span was built
		}
		if !fn(b.BaseOffset, b.BaseOffset+b.OffsetCount(), b.Raw) {
			return false
		}
		rest = tail
	}
	return true
}

type spanKey struct {
	stream    uint64
	partition int32
	base      int64 // a WAL chunk's base offset (-1 for segment blocks)
	block     int   // a segment block's number
	object    string
}

// spanCache is a byte-bounded LRU of spans with a per-partition offset lookup.
type spanCache struct {
	mu    sync.Mutex
	limit int64
	used  int64
	lru   *list.List // of *cacheItem, front = newest
	items map[spanKey]*list.Element
	parts map[pkey][]*cacheItem // sorted by base; for find
}

type cacheItem struct {
	key spanKey
	sp  *span
}

func newSpanCache(limit int64) *spanCache {
	return &spanCache{limit: limit, lru: list.New(), items: make(map[spanKey]*list.Element), parts: make(map[pkey][]*cacheItem)}
}

func (c *spanCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

func (c *spanCache) put(k spanKey, sp *span) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.lru.MoveToFront(el)
		return
	}
	it := &cacheItem{key: k, sp: sp}
	c.items[k] = c.lru.PushFront(it)
	pk := pkey{k.stream, k.partition}
	ps := c.parts[pk]
	i := sort.Search(len(ps), func(i int) bool { return ps[i].sp.base >= sp.base })
	ps = append(ps, nil)
	copy(ps[i+1:], ps[i:])
	ps[i] = it
	c.parts[pk] = ps
	c.used += sp.size()
	for c.used > c.limit && c.lru.Len() > 1 {
		c.removeLocked(c.lru.Back())
	}
}

func (c *spanCache) removeLocked(el *list.Element) {
	it := c.lru.Remove(el).(*cacheItem)
	delete(c.items, it.key)
	c.used -= it.sp.size()
	pk := pkey{it.key.stream, it.key.partition}
	ps := c.parts[pk]
	for i, x := range ps {
		if x == it {
			ps = append(ps[:i], ps[i+1:]...)
			break
		}
	}
	if len(ps) == 0 {
		delete(c.parts, pk)
	} else {
		c.parts[pk] = ps
	}
}

func (c *spanCache) get(k spanKey) *span {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cacheItem).sp
}

// find returns the span of partition k holding offset, if cached.
func (c *spanCache) find(k pkey, offset int64) *span {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := c.parts[k]
	i := sort.Search(len(ps), func(i int) bool { return ps[i].sp.end > offset })
	if i < len(ps) && ps[i].sp.base <= offset {
		c.lru.MoveToFront(c.items[ps[i].key])
		return ps[i].sp
	}
	return nil
}

// dropStream removes every span of a stream.
func (c *spanCache) dropStream(stream uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, el := range c.items {
		if k.stream == stream {
			c.removeLocked(el)
		}
	}
}

// dropPartition removes every span of one partition.
func (c *spanCache) dropPartition(k pkey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, it := range append([]*cacheItem(nil), c.parts[k]...) {
		c.removeLocked(c.items[it.key])
	}
}

// chunkKey names what the chunk cache holds: a WAL object's chunk of one partition
// (block -1), or one block of a segment.
type chunkKey struct {
	object    string
	stream    uint64
	partition int32
	block     int
}

// chunkItem is a cached chunk or segment block. A WAL chunk is cached as read, its
// batches still carrying the producer's baseOffsets; the first fetch that serves it
// patches them in place to the offsets its index entry assigns (a chunk has one base
// offset for good), and from then on the bytes are immutable. Unpatched bytes are never
// handed out.
type chunkItem struct {
	mu   sync.Mutex
	data []byte
	sp   *span // set once patched (segment blocks: at once)
	size int64 // len(data)
	// at and n place a WAL chunk in its object, as its index entry must (0, 0: a block).
	at, n int64
	// sealed is the identity of a WAL chunk still sealed with its namespace's key; nil
	// once opened, and for plaintext chunks.
	sealed *envelope.ChunkID
}

// chunkCache is a byte-bounded LRU of chunks and segment blocks (what ChunkCacheBytes
// bounds: the bytes of the chunks, each its own allocation).
type chunkCache struct {
	mu    sync.Mutex
	limit int64
	used  int64
	lru   *list.List // of *chunkEntry, front = newest
	items map[chunkKey]*list.Element
}

type chunkEntry struct {
	key chunkKey
	it  *chunkItem
}

func newChunkCache(limit int64) *chunkCache {
	return &chunkCache{limit: limit, lru: list.New(), items: make(map[chunkKey]*list.Element)}
}

func (c *chunkCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

func (c *chunkCache) get(k chunkKey) *chunkItem {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*chunkEntry).it
}

// put caches it under k unless k is cached already; it returns the cached item.
func (c *chunkCache) put(k chunkKey, it *chunkItem) *chunkItem {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.lru.MoveToFront(el)
		return el.Value.(*chunkEntry).it
	}
	c.items[k] = c.lru.PushFront(&chunkEntry{key: k, it: it})
	c.used += it.size
	for c.used > c.limit && c.lru.Len() > 1 {
		c.removeLocked(c.lru.Back())
	}
	return it
}

func (c *chunkCache) removeLocked(el *list.Element) {
	ce := c.lru.Remove(el).(*chunkEntry)
	delete(c.items, ce.key)
	c.used -= ce.it.size
}

// dropStream removes every chunk and block of a stream.
func (c *chunkCache) dropStream(stream uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, el := range c.items {
		if k.stream == stream {
			c.removeLocked(el)
		}
	}
}

// dropAll empties the cache.
func (c *spanCache) dropAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Init()
	clear(c.items)
	clear(c.parts)
	c.used = 0
}
