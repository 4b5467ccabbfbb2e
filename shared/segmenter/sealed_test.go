package segmenter

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/walfmt"
)

// TestSealedChunksStayInWAL: a partition whose chunks are sealed with a namespace key is
// refused with ErrSealedChunk and its index left as it was (its sealed bytes are never
// parsed as batches, nor written into a segment in clear or otherwise); the other
// partition of the same WAL objects is segmented.
func TestSealedChunksStayInWAL(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 2)
	kek := bytes.Repeat([]byte{9}, 32)
	for i := range 4 {
		id := ulid.MustNew(ulid.Timestamp(time.Now()), ulid.DefaultEntropy())
		key := walfmt.ObjectKey(walfmt.ClassStandard, "n1", id)
		var chunks []walfmt.Chunk
		for p := range int32(2) {
			payload, err := recordbatch.Append(nil, records("x", 10, 200, int64(i)), recordbatch.DefaultBuildOptions())
			if err != nil {
				t.Fatal(err)
			}
			c := walfmt.Chunk{StreamID: 1, Partition: p, Encoding: walfmt.EncodingKafka, Records: 10, Payload: payload}
			if p == 1 {
				sealed, err := envelope.Seal(kek, "01JDQ8ZK3M4N5P6Q7R8S9T0V1W", envelope.ChunkID{Object: key, Index: uint32(p), StreamID: 1, Partition: p}, payload)
				if err != nil {
					t.Fatal(err)
				}
				n, _ := envelope.EnvelopeLen(sealed)
				c.Payload, c.Encrypted, c.EnvelopeLen = sealed, true, n
			}
			chunks = append(chunks, c)
		}
		obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: "n1", ULID: id, Class: walfmt.ClassStandard}, chunks)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.bucket.Put(ctx, key, obj, objstore.IfAbsent()); err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			f.meta.Commit(r.StreamID, r.Partition, meta.IndexEntry{Count: r.Records, Kind: meta.KindWAL, Object: key, Offset: r.Offset, Length: r.Length})
		}
	}
	s := f.segmenter(Config{TargetBytes: 1 << 10, MaxAge: time.Hour})
	before := f.meta.Entries(1, 1)
	if _, err := s.Partition(ctx, 1, 1); !errors.Is(err, ErrSealedChunk) {
		t.Fatalf("sealed partition: %v, want ErrSealedChunk", err)
	}
	if k := kinds(f.meta.Entries(1, 1)); k != kinds(before) {
		t.Fatalf("sealed partition's index changed: %s, was %s", k, kinds(before))
	}
	if res, err := s.Partition(ctx, 1, 0); err != nil || res.Segments == 0 {
		t.Fatalf("plaintext partition of the same objects: %+v %v", res, err)
	}
	n := 0
	f.bucket.List(ctx, "seg/1/1/", func(objstore.ObjectInfo) error { n++; return nil })
	if n != 0 {
		t.Fatalf("%d segments of the sealed partition written", n)
	}
}
