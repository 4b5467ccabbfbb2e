package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/walfmt"
)

// testSealer seals stream 1's chunks under a fixed key, refuses stream 3's (its key is
// unavailable) and leaves the others alone.
type testSealer struct{ kek []byte }

func (s testSealer) Keyed(_ context.Context, stream uint64) (bool, error) {
	return stream == 1 || stream == 3, nil
}

func (s testSealer) SealChunk(ctx context.Context, id envelope.ChunkID, pt []byte) ([]byte, int, bool, error) {
	switch id.StreamID {
	case 1:
		sealed, err := envelope.Seal(s.kek, "01JDQ8ZK3M4N5P6Q7R8S9T0V1W", id, pt)
		if err != nil {
			return nil, 0, false, err
		}
		n, err := envelope.EnvelopeLen(sealed)
		return sealed, n, true, err
	case 3:
		return nil, 0, false, fmt.Errorf("%w: namespace tenant-c: KMS refused", envelope.ErrKeyUnavailable)
	}
	return nil, 0, false, nil
}

// TestSealedChunks: a keyed stream's chunk is written sealed (chunk version 2, bound to its
// object and position) beside another stream's plaintext chunk of the same object, the
// tail cache gets the plaintext, and a stream whose key is unavailable has only its own
// requests refused.
func TestSealedChunks(t *testing.T) {
	b, m := objstore.NewMem(), newFakeMeta()
	s := testSealer{kek: bytes.Repeat([]byte{7}, 32)}
	var mu sync.Mutex
	var committed []Committed
	w := newTestWriter(t, b, m, func(c *Config) {
		c.FlushInterval = 200 * time.Millisecond
		c.Sealer = s
		c.OnCommit = func(cs []Committed) { mu.Lock(); committed = append(committed, cs...); mu.Unlock() }
	})
	batches := map[uint64][]byte{1: batchOf(t, 2, "secret"), 2: batchOf(t, 2, "plain"), 3: batchOf(t, 1, "shredded")}
	records := map[uint64]int64{1: 2, 2: 2, 3: 1}
	errs := make(map[uint64]error)
	var wg sync.WaitGroup
	var emu sync.Mutex
	for id, bt := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := w.Write(context.Background(), []Request{{StreamID: id, Batches: bt, Records: records[id]}})
			emu.Lock()
			errs[id] = err
			emu.Unlock()
		}()
	}
	wg.Wait()
	if errs[1] != nil || errs[2] != nil {
		t.Fatalf("keyed and plain writes: %v, %v", errs[1], errs[2])
	}
	if !errors.Is(errs[3], envelope.ErrKeyUnavailable) || !errors.Is(errs[3], ErrCommitFailed) {
		t.Fatalf("write of a namespace whose key is unavailable: %v, want ErrCommitFailed wrapping envelope.ErrKeyUnavailable", errs[3])
	}
	var key string
	b.List(context.Background(), "wal/", func(o objstore.ObjectInfo) error { key = o.Key; return nil })
	if n := countObjects(t, b); n != 1 {
		t.Fatalf("%d WAL objects, want 1", n)
	}
	body, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(body, []byte("secret-0")) || !bytes.Contains(body, []byte("plain-0")) || bytes.Contains(body, []byte("shredded")) {
		t.Fatal("object holds the keyed stream's plaintext, lacks the plain stream's, or holds the refused stream's")
	}
	o, err := walfmt.Decode(body)
	if err != nil || o.Version != walfmt.Version2 || len(o.Chunks) != 2 || !o.Chunks[0].Encrypted || o.Chunks[1].Encrypted {
		t.Fatalf("decoded %+v %v: want a v2 object, stream 1 sealed, stream 2 plain", o, err)
	}
	ref, payload, err := walfmt.DecodeChunk(body[o.Chunks[0].Offset : o.Chunks[0].Offset+o.Chunks[0].Length])
	if err != nil || !ref.Encrypted {
		t.Fatal(err)
	}
	pt, err := envelope.Open(s.kek, envelope.ChunkID{Object: key, Index: 0, StreamID: 1}, payload)
	if err != nil || !bytes.Equal(pt, batches[1]) {
		t.Fatalf("open: %v", err)
	}
	if _, err := envelope.Open(s.kek, envelope.ChunkID{Object: key, Index: 1, StreamID: 1}, payload); !errors.Is(err, envelope.ErrSealed) {
		t.Fatalf("opened at another position: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(committed) != 2 {
		t.Fatalf("%d committed, want 2", len(committed))
	}
	for _, c := range committed {
		if c.StreamID == 1 && !bytes.Contains(bytes.Join(c.Batches, nil), []byte("secret-0")) {
			t.Fatal("the tail cache got the sealed bytes, want the plaintext")
		}
	}
}

// TestSealedChunkOfSeveralRequests: a keyed stream's chunk built from several requests is
// sealed as their concatenation (its parts joined for sealing only), opens to it, and the
// tail cache gets that plaintext with the offsets patched in order.
func TestSealedChunkOfSeveralRequests(t *testing.T) {
	b, m := objstore.NewMem(), newFakeMeta()
	s := testSealer{kek: bytes.Repeat([]byte{7}, 32)}
	var mu sync.Mutex
	var committed []Committed
	w := newTestWriter(t, b, m, func(c *Config) {
		c.FlushInterval = 2 * time.Second
		c.Sealer = s
		c.OnCommit = func(cs []Committed) { mu.Lock(); committed = append(committed, cs...); mu.Unlock() }
	})
	parts := [][]byte{batchOf(t, 2, "first"), batchOf(t, 3, "second")}
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	for i, bt := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = w.Write(context.Background(), []Request{{StreamID: 1, Batches: bt, Records: int64(2 + i)}})
		}()
		time.Sleep(20 * time.Millisecond) // in order, within one flush
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("writes: %v", errs)
	}
	if n := countObjects(t, b); n != 1 {
		t.Fatalf("the two writes, 20 ms apart, went into %d objects, want 1 (one 2 s flush)", n)
	}
	var key string
	b.List(context.Background(), "wal/", func(o objstore.ObjectInfo) error { key = o.Key; return nil })
	body, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	o, err := walfmt.Decode(body)
	if err != nil || len(o.Chunks) != 1 || !o.Chunks[0].Encrypted {
		t.Fatalf("decoded %+v %v: want one sealed chunk", o, err)
	}
	_, payload, err := walfmt.DecodeChunk(body[o.Chunks[0].Offset : o.Chunks[0].Offset+o.Chunks[0].Length])
	if err != nil {
		t.Fatal(err)
	}
	pt, err := envelope.Open(s.kek, envelope.ChunkID{Object: key, Index: 0, StreamID: 1}, payload)
	if err != nil || len(pt) != len(parts[0])+len(parts[1]) || !bytes.Contains(pt, []byte("first-0")) || !bytes.Contains(pt, []byte("second-2")) {
		t.Fatalf("open: %v; %d bytes, want both requests' %d", err, len(pt), len(parts[0])+len(parts[1]))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(committed) != 1 {
		t.Fatalf("%d committed chunks, want 1", len(committed))
	}
	tail := bytes.Join(committed[0].Batches, nil)
	if !bytes.Contains(tail, []byte("first-0")) || !bytes.Contains(tail, []byte("second-2")) {
		t.Fatal("the tail cache lacks the plaintext of both requests")
	}
	next := committed[0].Entry.BaseOffset
	for rest := tail; len(rest) > 0; {
		bt, r, err := recordbatch.Parse(rest)
		if err != nil {
			t.Fatal(err)
		}
		if bt.BaseOffset != next {
			t.Fatalf("tail batch at offset %d, want %d", bt.BaseOffset, next)
		}
		next, rest = bt.LastOffset()+1, r
	}
}
