package compaction

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
)

// TestKeyMap checks the map against a Go map and its byte bound, across growth and a
// full map.
func TestKeyMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, limit := range []int64{MinKeyMapBytes, 64 << 10, 1 << 20} {
		m := newKeyMap(limit)
		ref := map[string]int64{}
		full := false
		for off := int64(0); off < 100_000 && !full; off++ {
			k := fmt.Sprint("key-", rng.IntN(50_000), "-", rng.IntN(3))
			_, had := ref[k]
			if m.put([]byte(k), off) {
				ref[k] = off
			} else {
				if had {
					t.Fatalf("limit %d: a present key was refused", limit)
				}
				full = true
			}
			if m.bytes() > limit {
				t.Fatalf("limit %d: map holds %d bytes", limit, m.bytes())
			}
		}
		if !full {
			t.Fatalf("limit %d: never full", limit)
		}
		if m.n != len(ref) {
			t.Fatalf("limit %d: %d keys, want %d", limit, m.n, len(ref))
		}
		for k, off := range ref {
			if got, ok := m.get([]byte(k)); !ok || got != off {
				t.Fatalf("limit %d: %s = %d %v, want %d", limit, k, got, ok, off)
			}
		}
		if _, ok := m.get([]byte("absent")); ok {
			t.Fatal("absent key found")
		}
		t.Logf("limit %d: %d keys (%.1f bytes a key)", limit, m.n, float64(limit)/float64(m.n))
	}
	m := newKeyMap(MinKeyMapBytes)
	if m.fits(MinKeyMapBytes) || !m.fits(100) {
		t.Fatal("fits")
	}
	if m.put(make([]byte, MinKeyMapBytes), 1) {
		t.Fatal("a key larger than the map was taken")
	}
}

// FuzzBatchReader feeds arbitrary bytes as an entry's data region: the reader returns
// batches in order inside the entry, or an error, never panics, and reads every byte of
// a region it accepts whole.
func FuzzBatchReader(f *testing.F) {
	for _, n := range []int{1, 3} {
		var region []byte
		for i := range n {
			opts := recordbatch.DefaultBuildOptions()
			opts.BaseOffset = int64(i * 2)
			raw, err := recordbatch.Append(nil, []recordbatch.Record{{Key: []byte("k"), Value: []byte("v")}, {OffsetDelta: 1, Value: []byte("w")}}, opts)
			if err != nil {
				f.Fatal(err)
			}
			region = append(region, raw...)
		}
		f.Add(region, uint16(7))
		f.Add(region[:len(region)-1], uint16(64))
		f.Add(region[:11], uint16(1))
	}
	f.Add([]byte{}, uint16(1))
	f.Fuzz(func(t *testing.T, region []byte, chunk uint16) {
		ctx := context.Background()
		b := objstore.NewMem()
		if err := b.Put(ctx, "x/obj", append([]byte("head"), region...)); err != nil {
			t.Fatal(err)
		}
		r := batchReader{bucket: b, chunk: int64(chunk%512) + 1}
		e := meta.IndexEntry{BaseOffset: 0, Count: 1 << 20, Kind: meta.KindSegment, Object: "x/obj", Offset: 4, Length: int64(len(region))}
		r.reset(e)
		read, prev := 0, int64(-1)
		for {
			bt, ok, err := r.next(ctx)
			if err != nil {
				return
			}
			if !ok {
				break
			}
			if bt.BaseOffset <= prev || bt.LastOffset() >= e.End() {
				t.Fatalf("batch [%d,%d] after %d", bt.BaseOffset, bt.LastOffset(), prev)
			}
			prev = bt.LastOffset()
			read += len(bt.Raw)
		}
		if read != len(region) {
			t.Fatalf("read %d of %d bytes", read, len(region))
		}
	})
}
