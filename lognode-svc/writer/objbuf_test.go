package writer

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/walfmt"
)

// bufBucket records the backing array of every body it is given.
type bufBucket struct {
	objstore.Bucket
	mu    sync.Mutex
	bases map[*byte]int
	fail  int // the next fail Puts fail after storing (an answer lost)
}

func (b *bufBucket) Put(ctx context.Context, key string, body []byte, opts ...objstore.PutOption) error {
	err := b.Bucket.Put(ctx, key, body, opts...)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bases[&body[:1][0]]++
	if b.fail > 0 {
		b.fail--
		return context.DeadlineExceeded
	}
	return err
}

// TestObjectBuffersReused: flushes one after another encode into the buffer of an earlier
// object whose PUT succeeded at once, and every stored object still holds its own
// batches; a buffer whose first PUT attempt failed is never reused.
func TestObjectBuffersReused(t *testing.T) {
	b := &bufBucket{Bucket: objstore.NewMem(), bases: map[*byte]int{}}
	w := newTestWriter(t, b, newFakeMeta(), nil)
	ctx := context.Background()
	var sent [][]byte
	write := func(i int) {
		batch := batchOf(t, 3, string(rune('a'+i)))
		sent = append(sent, bytes.Clone(batch))
		if _, err := w.Write(ctx, []Request{{StreamID: 1, Batches: batch, Records: 3}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		write(i)
	}
	reused := 0
	for _, n := range b.bases {
		reused = max(reused, n)
	}
	if len(b.bases) >= 4 || reused < 2 {
		t.Fatalf("4 flushes one after another used %d buffers (most used %d times): want reuse", len(b.bases), reused)
	}
	// Every object decodes to the batches written into it.
	i := 0
	if err := b.List(ctx, "wal/", func(oi objstore.ObjectInfo) error {
		body, err := b.Get(ctx, oi.Key)
		if err != nil {
			return err
		}
		obj, err := walfmt.Decode(body)
		if err != nil {
			t.Fatalf("object %s: %v", oi.Key, err)
		}
		_, payload, err := walfmt.DecodeChunk(body[obj.Chunks[0].Offset : obj.Chunks[0].Offset+obj.Chunks[0].Length])
		if err != nil {
			t.Fatalf("object %s: %v", oi.Key, err)
		}
		if !bytes.Equal(payload, sent[i]) {
			t.Fatalf("object %s holds other bytes than write %d", oi.Key, i)
		}
		i++
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A PUT whose first attempt failed keeps its buffer out of reuse.
	b.mu.Lock()
	b.bases, b.fail = map[*byte]int{}, 1
	b.mu.Unlock()
	for len(w.objs) > 0 {
		<-w.objs
	}
	write(4) // fails once, retried with the same buffer: not reused
	write(5)
	if len(b.bases) != 2 {
		t.Fatalf("after a failed first attempt the next flush used %d distinct buffers for 2 objects, want 2", len(b.bases))
	}
}
