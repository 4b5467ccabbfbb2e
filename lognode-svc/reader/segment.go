package reader

import (
	"container/list"
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/segfmt"
)

// BlockSize groups a segment's batches into blocks, the unit of a segment range GET and
// of the disk cache: block k holds the batches that start in [k·BlockSize, (k+1)·BlockSize)
// of the data region, so blocks are batch-aligned and every reader cuts them alike.
const BlockSize = 1 << 20

// blockOf returns the block holding the batch at or after offset, or -1 if none does.
func blockOf(info *segfmt.Info, offset int64) int {
	i, _ := info.Find(offset)
	if i == len(info.Batches) {
		return -1
	}
	return int((info.Batches[i].Offset - info.DataOffset) / BlockSize)
}

// blockRange returns the batches [from, to) of block k.
func blockRange(info *segfmt.Info, k int) (from, to int) {
	lo := info.DataOffset + int64(k)*BlockSize
	hi := lo + BlockSize
	from = sort.Search(len(info.Batches), func(i int) bool { return info.Batches[i].Offset >= lo })
	to = sort.Search(len(info.Batches), func(i int) bool { return info.Batches[i].Offset >= hi })
	return from, to
}

// segmentInfo returns the footer index of the segment an entry points at. The index starts
// where the entry's data region ends, so one range read fetches it.
func (r *Reader) segmentInfo(ctx context.Context, e meta.IndexEntry) (*segfmt.Info, error) {
	if info := r.segs.get(e.Object); info != nil {
		return info, nil
	}
	info, err := segfmt.ReadInfoAt(ctx, r.cfg.Bucket, e.Object, e.Offset+e.Length)
	if err != nil {
		return nil, fmt.Errorf("reader: segment %s: %w", e.Object, err)
	}
	if info.DataOffset != e.Offset || info.DataLength != e.Length {
		return nil, fmt.Errorf("reader: segment %s: data region [%d,+%d) but the index entry says [%d,+%d)",
			e.Object, info.DataOffset, info.DataLength, e.Offset, e.Length)
	}
	r.segs.put(e.Object, info)
	return info, nil
}

// readBlock reads block k of a segment: from the disk cache, else one range GET (then
// kept on disk). Either way the bytes are checked against the footer index.
func (r *Reader) readBlock(ctx context.Context, e meta.IndexEntry, info *segfmt.Info, k int) (*span, error) {
	from, to := blockRange(info, k)
	if from == to {
		return nil, fmt.Errorf("reader: segment %s: block %d is empty", e.Object, k)
	}
	off, n := info.Span(from, to)
	sp := &span{base: info.Batches[from].BaseOffset, end: info.Batches[to-1].End()}
	dkey := e.Object + "#" + strconv.Itoa(k)
	if r.disk != nil {
		if b, ok := r.disk.get(dkey); ok {
			if info.CheckBatches(from, to, b) == nil {
				r.cfg.Metrics.hit("disk")
				sp.data = b
				return sp, nil
			}
			r.disk.remove(dkey) // damaged on disk: read it again
		}
	}
	r.cfg.Metrics.hit("object")
	b, err := r.cfg.Bucket.GetRange(ctx, e.Object, off, n)
	if err != nil {
		return nil, fmt.Errorf("reader: read %s [%d+%d]: %w", e.Object, off, n, err)
	}
	if err := info.CheckBatches(from, to, b); err != nil {
		return nil, fmt.Errorf("reader: %s block %d: %w", e.Object, k, err)
	}
	if r.disk != nil {
		r.disk.put(dkey, b)
	}
	sp.data = b
	return sp, nil
}

// infoCache is a bounded LRU of segment footer indexes by object key.
type infoCache struct {
	mu    sync.Mutex
	limit int
	lru   *list.List
	items map[string]*list.Element
}

type infoItem struct {
	key  string
	info *segfmt.Info
}

func newInfoCache(limit int) *infoCache {
	return &infoCache{limit: limit, lru: list.New(), items: make(map[string]*list.Element)}
}

func (c *infoCache) get(key string) *segfmt.Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.lru.MoveToFront(el)
		return el.Value.(*infoItem).info
	}
	return nil
}

func (c *infoCache) put(key string, info *segfmt.Info) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return
	}
	c.items[key] = c.lru.PushFront(&infoItem{key: key, info: info})
	for c.lru.Len() > c.limit {
		it := c.lru.Remove(c.lru.Back()).(*infoItem)
		delete(c.items, it.key)
	}
}
