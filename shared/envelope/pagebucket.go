package envelope

import (
	"container/list"
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// SegmentKey is where the segment whose plain key is key (seg/...) is stored for the
// namespace with id ns: ns/<ns>/seg/...; PagesBucket seals such objects.
func SegmentKey(ns uint64, key string) string {
	return "ns/" + strconv.FormatUint(ns, 10) + "/" + key
}

// SealedNamespace answers the namespace id of a key PagesBucket seals (ns/<id>/seg/...).
func SealedNamespace(key string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, "ns/")
	if !ok {
		return 0, false
	}
	id, rest, ok := strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(rest, "seg/") || id == "" || strings.Trim(id, "0123456789") != "" || (len(id) > 1 && id[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(id, 10, 64)
	return n, err == nil
}

// PagesConfig configures a PagesBucket.
type PagesConfig struct {
	Bucket objstore.Bucket // required: where the sealed objects are stored
	// Keys names each namespace's key and holds the keyring (nil keyring: every sealed
	// object answers ErrKeyUnavailable).
	Keys *Catalog
	// PageSize is the plaintext bytes per page (default DefaultPageSize, 64 KiB): a range
	// read fetches and opens the pages that cover it.
	PageSize int
	// MaxHeaders bounds the cached page headers (LRU; default 4096, about 400 bytes
	// each). A header holds no key material: its data key is wrapped.
	MaxHeaders int
	// SSEKMS also asks the store to encrypt each sealed object with the namespace's KMS
	// key (S3 SSE-KMS; stores without it ignore the request).
	SSEKMS bool
}

// PagesBucket is a Bucket whose objects under ns/<id>/seg/ (SegmentKey) are stored
// sealed in pages with the namespace's key; every other key is passed through as it is.
// Get, GetRange and Stat of a sealed object answer its plaintext (a range read fetches
// the pages that cover it, and its header the first time); List answers the stored
// sizes. A namespace without a key on record, shredded, or whose KMS key is refused
// answers ErrKeyUnavailable naming it; a page that does not open answers ErrSealed.
type PagesBucket struct {
	cfg  PagesConfig
	mu   sync.Mutex
	lru  *list.List // of *pagesHeaderItem, front = most recently used
	hdrs map[string]*list.Element
}

type pagesHeaderItem struct {
	key string
	h   PagesHeader
}

// NewPagesBucket checks cfg.
func NewPagesBucket(cfg PagesConfig) (*PagesBucket, error) {
	if cfg.Bucket == nil || cfg.Keys == nil {
		return nil, errors.New("envelope: pages: Bucket and Keys are required")
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.PageSize < MinPageSize || cfg.PageSize > MaxPageSize {
		return nil, fmt.Errorf("envelope: pages: page size %d, want %d-%d", cfg.PageSize, MinPageSize, MaxPageSize)
	}
	if cfg.MaxHeaders <= 0 {
		cfg.MaxHeaders = 4096
	}
	return &PagesBucket{cfg: cfg, lru: list.New(), hdrs: map[string]*list.Element{}}, nil
}

// namespace is the key record of namespace id ns, refreshed once when not known.
func (b *PagesBucket) namespace(ctx context.Context, ns uint64, key string) (meta.NamespaceKey, error) {
	c := b.cfg.Keys
	find := func() (meta.NamespaceKey, bool) {
		c.mu.RLock()
		defer c.mu.RUnlock()
		for _, k := range c.keys {
			if k.ID == ns {
				return k, true
			}
		}
		return meta.NamespaceKey{}, false
	}
	k, ok := find()
	if !ok {
		if err := c.Refresh(ctx); err != nil {
			return meta.NamespaceKey{}, err
		}
		if k, ok = find(); !ok {
			return meta.NamespaceKey{}, fmt.Errorf("%w: %s: namespace id %d has no key on record", ErrKeyUnavailable, key, ns)
		}
	}
	if k.Shredded() {
		return k, fmt.Errorf("%w: namespace %s: its key was shredded", ErrKeyUnavailable, k.Namespace)
	}
	if c.cfg.Keyring == nil {
		return k, noKMS(k)
	}
	return k, nil
}

// Put stores body, sealed in pages when key is a namespace's segment.
func (b *PagesBucket) Put(ctx context.Context, key string, body []byte, opts ...objstore.PutOption) error {
	ns, ok := SealedNamespace(key)
	if !ok {
		return b.cfg.Bucket.Put(ctx, key, body, opts...)
	}
	k, err := b.namespace(ctx, ns, key)
	if err != nil {
		return fmt.Errorf("envelope: put %s: %w", key, err)
	}
	kek, err := b.cfg.Keys.cfg.Keyring.sealingKey(ctx, Of(k))
	if err != nil {
		return fmt.Errorf("envelope: put %s: %w", key, err)
	}
	sealed, err := SealPages(kek.key, kek.id, key, b.cfg.PageSize, body)
	if err != nil {
		return fmt.Errorf("envelope: put %s: %w", key, err)
	}
	if b.cfg.SSEKMS {
		opts = append(opts, objstore.SSEKMS(k.KeyARN))
	}
	return b.cfg.Bucket.Put(ctx, key, sealed, opts...)
}

// open answers the data key of the object key with header h.
func (b *PagesBucket) open(ctx context.Context, ns uint64, key string, h *PagesHeader) (cipher.AEAD, error) {
	k, err := b.namespace(ctx, ns, key)
	if err != nil {
		return nil, err
	}
	kek, err := b.cfg.Keys.cfg.Keyring.openingKey(ctx, Of(k), h.KeyID)
	if err != nil {
		return nil, err
	}
	return h.dataKey(kek.key, key)
}

// Get reads a whole object, opening its pages when it is sealed.
func (b *PagesBucket) Get(ctx context.Context, key string) ([]byte, error) {
	ns, ok := SealedNamespace(key)
	if !ok {
		return b.cfg.Bucket.Get(ctx, key)
	}
	sealed, err := b.cfg.Bucket.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	h, err := ParsePagesHeader(sealed)
	if err != nil {
		return nil, fmt.Errorf("envelope: get %s: %w", key, err)
	}
	if int64(len(sealed)) != h.StoredSize() {
		return nil, fmt.Errorf("envelope: get %s: %w: %d bytes stored, the header says %d", key, ErrSealed, len(sealed), h.StoredSize())
	}
	b.remember(key, h)
	aead, err := b.open(ctx, ns, key, &h)
	if err != nil {
		return nil, fmt.Errorf("envelope: get %s: %w", key, err)
	}
	return h.openPages(make([]byte, 0, h.Length), aead, key, 0, h.Pages(), sealed[PagesHeaderLen:])
}

// header answers the sealed object's header: cached, else one range read.
func (b *PagesBucket) header(ctx context.Context, key string) (PagesHeader, error) {
	b.mu.Lock()
	if el, ok := b.hdrs[key]; ok {
		b.lru.MoveToFront(el)
		h := el.Value.(*pagesHeaderItem).h
		b.mu.Unlock()
		return h, nil
	}
	b.mu.Unlock()
	raw, err := b.cfg.Bucket.GetRange(ctx, key, 0, PagesHeaderLen)
	if err != nil {
		return PagesHeader{}, err
	}
	h, err := ParsePagesHeader(raw)
	if err != nil {
		return PagesHeader{}, fmt.Errorf("envelope: %s: %w", key, err)
	}
	b.remember(key, h)
	return h, nil
}

func (b *PagesBucket) remember(key string, h PagesHeader) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el, ok := b.hdrs[key]; ok {
		el.Value.(*pagesHeaderItem).h = h
		b.lru.MoveToFront(el)
		return
	}
	b.hdrs[key] = b.lru.PushFront(&pagesHeaderItem{key: key, h: h})
	for b.lru.Len() > b.cfg.MaxHeaders {
		it := b.lru.Remove(b.lru.Back()).(*pagesHeaderItem)
		delete(b.hdrs, it.key)
	}
}

func (b *PagesBucket) forgetHeader(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el, ok := b.hdrs[key]; ok {
		b.lru.Remove(el)
		delete(b.hdrs, key)
	}
}

// GetRange reads plaintext [off, off+n) of an object (n < 0: to the end), fetching and
// opening only the pages that cover it when it is sealed.
func (b *PagesBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	ns, ok := SealedNamespace(key)
	if !ok {
		return b.cfg.Bucket.GetRange(ctx, key, off, n)
	}
	h, err := b.header(ctx, key)
	if err != nil {
		return nil, err
	}
	if off < 0 || off > h.Length {
		return nil, fmt.Errorf("envelope: get %s [%d+%d] of %d bytes: %w", key, off, n, h.Length, objstore.ErrInvalidRange)
	}
	if n < 0 || off+n > h.Length {
		n = h.Length - off
	}
	if n == 0 {
		return []byte{}, nil
	}
	aead, err := b.open(ctx, ns, key, &h)
	if err != nil {
		return nil, fmt.Errorf("envelope: get %s: %w", key, err)
	}
	from, to, soff, sn := h.pageSpan(off, n)
	stored, err := b.cfg.Bucket.GetRange(ctx, key, soff, sn)
	if err != nil {
		return nil, err
	}
	pt, err := h.openPages(make([]byte, 0, (to-from)*h.PageSize), aead, key, from, to, stored)
	if err != nil {
		b.forgetHeader(key) // replaced since (a new object under the key): read it again
		return nil, fmt.Errorf("envelope: get %s: %w", key, err)
	}
	start := off - from*h.PageSize
	return pt[start : start+n : start+n], nil
}

// Stat answers the plaintext size of a sealed object (its header is read), else the
// stored object's.
func (b *PagesBucket) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	info, err := b.cfg.Bucket.Stat(ctx, key)
	if err != nil {
		return info, err
	}
	if _, ok := SealedNamespace(key); ok {
		h, err := b.header(ctx, key)
		if err != nil {
			return info, err
		}
		info.Size = h.Length
	}
	return info, nil
}

// List lists the stored objects (sealed ones with their stored sizes).
func (b *PagesBucket) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	return b.cfg.Bucket.List(ctx, prefix, fn)
}

// Delete deletes an object.
func (b *PagesBucket) Delete(ctx context.Context, key string) error {
	b.forgetHeader(key)
	return b.cfg.Bucket.Delete(ctx, key)
}

// Close closes the bucket under it.
func (b *PagesBucket) Close() error { return b.cfg.Bucket.Close() }

// Unwrap is the bucket under it.
func (b *PagesBucket) Unwrap() objstore.Bucket { return b.cfg.Bucket }
