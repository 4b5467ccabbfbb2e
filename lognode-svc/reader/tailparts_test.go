package reader

import (
	"context"
	"testing"

	"github.com/loamhq/loam/shared/meta"
)

// TestTailChunkInParts: a committed chunk given in parts (its requests' bytes, several
// batches each) is served from the tail cache at every offset, in order across the
// parts, and the cache accounts for every part's bytes.
func TestTailChunkInParts(t *testing.T) {
	r, idx, _ := headReader(t, Config{})
	if _, err := r.Fetch(context.Background(), 1, 0, 0, 1<<20, 0); err != nil { // the partition is tracked
		t.Fatal(err)
	}
	bs := batches(t, 10, 6, 5) // offsets [10, 40), 5 per batch
	parts := [][]byte{append(append([]byte(nil), bs[0]...), bs[1]...), bs[2], append(append([]byte(nil), bs[3]...), append(bs[4], bs[5]...)...)}
	e := meta.IndexEntry{BaseOffset: 10, Count: 30, Kind: meta.KindWAL, Object: "wal/standard/w/1.wal"} // never read: served from the tail
	r.Committed(1, 0, e, parts...)
	want := int64(0)
	for _, p := range parts {
		want += int64(len(p))
	}
	if got := r.tail.size(); got != want {
		t.Fatalf("tail cache holds %d bytes, want the parts' %d", got, want)
	}
	before := idx.lookupCount()
	for from := int64(10); from < 40; from++ {
		res, err := r.Fetch(context.Background(), 1, 0, from, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkFrom(t, res, from, int(40-from))
	}
	// A fetch of one byte stops after the first batch, inside a part.
	res, err := r.Fetch(context.Background(), 1, 0, 20, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if checkFrom(t, res, 20, 5); res.NextOffset != 25 {
		t.Fatalf("a one-byte fetch at 20: next offset %d, want 25", res.NextOffset)
	}
	if n := idx.lookupCount() - before; n != 0 {
		t.Fatalf("%d lookups to serve a local commit, want 0", n)
	}
}
