package reader

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/walfmt"
)

// TestDropNamespaceDiskCache: a shred drops the disk-cache files of the namespace's objects
// (ns/<id>/...), also those a previous process left (found by name after a restart), and
// nothing else.
func TestDropNamespaceDiskCache(t *testing.T) {
	dir := t.TempDir()
	d, err := openDiskCache(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	d.put("ns/5/seg/1/0/a.seg#0", []byte("tenant five"))
	d.put("ns/50/seg/2/0/a.seg#0", []byte("tenant fifty"))
	d.put("seg/3/0/a.seg#0", []byte("plain"))
	// A restart: the new process knows the files by name only.
	r, err := New(Config{Bucket: objstore.NewMem(), Meta: &fakeIndex{}, DiskCacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.DropNamespace(nil, "ns/5/"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.disk.get("ns/5/seg/1/0/a.seg#0"); ok {
		t.Fatal("the shredded namespace's block is still on disk")
	}
	for _, k := range []string{"ns/50/seg/2/0/a.seg#0", "seg/3/0/a.seg#0"} {
		if _, ok := r.disk.get(k); !ok {
			t.Fatalf("%s was dropped too", k)
		}
	}
}

// kekOpener opens sealed chunks with one fixed key-encryption key.
type kekOpener struct{ kek []byte }

func (o kekOpener) OpenChunk(ctx context.Context, id envelope.ChunkID, sealed []byte) ([]byte, error) {
	return envelope.Open(o.kek, id, sealed)
}

// sealedObject writes a WAL object whose chunks are sealed payloads (as given) of stream 1
// partitions 0.. and returns its key and refs.
func sealedObject(t *testing.T, b objstore.Bucket, payloads [][]byte) (string, []walfmt.ChunkRef) {
	t.Helper()
	id := ulid.MustNew(ulid.Now(), ulid.DefaultEntropy())
	var chunks []walfmt.Chunk
	for p, pl := range payloads {
		n, err := envelope.EnvelopeLen(pl)
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, walfmt.Chunk{StreamID: 1, Partition: int32(p), Encoding: walfmt.EncodingKafka, Records: 3, Payload: pl, Encrypted: true, EnvelopeLen: n})
	}
	obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: "n1", ULID: id, Class: walfmt.ClassStandard}, chunks)
	if err != nil {
		t.Fatal(err)
	}
	key := walfmt.ObjectKey(walfmt.ClassStandard, "n1", id)
	if err := b.Put(context.Background(), key, obj); err != nil {
		t.Fatal(err)
	}
	return key, refs
}

// TestSealedChunkMovedIsRefused: a sealed chunk opens where it was written; the same
// sealed bytes in another object, or at another position of an object (each a valid WAL
// chunk, CRCs and all), are refused with envelope.ErrSealed and nothing is returned; a
// reader without an Opener answers ErrKeyUnavailable.
func TestSealedChunkMovedIsRefused(t *testing.T) {
	ctx := context.Background()
	kek := bytes.Repeat([]byte{3}, 32)
	batch, err := recordbatch.Append(nil, []recordbatch.Record{{Value: []byte("a")}, {OffsetDelta: 1, Value: []byte("b")}, {OffsetDelta: 2, Value: []byte("c")}}, recordbatch.DefaultBuildOptions())
	if err != nil {
		t.Fatal(err)
	}
	bucket := objstore.NewMem()
	// The genuine object: the chunk sealed for its own key and position (0).
	id := ulid.MustNew(ulid.Now(), ulid.DefaultEntropy())
	key := walfmt.ObjectKey(walfmt.ClassStandard, "n1", id)
	sealed, err := envelope.Seal(kek, "01JDQ8ZK3M4N5P6Q7R8S9T0V1W", envelope.ChunkID{Object: key, Index: 0, StreamID: 1, Partition: 0}, batch)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := envelope.EnvelopeLen(sealed)
	obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: "n1", ULID: id, Class: walfmt.ClassStandard},
		[]walfmt.Chunk{{StreamID: 1, Partition: 0, Encoding: walfmt.EncodingKafka, Records: 3, Payload: sealed, Encrypted: true, EnvelopeLen: n}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.Put(ctx, key, obj); err != nil {
		t.Fatal(err)
	}
	fetch := func(opener Opener, key string, ref walfmt.ChunkRef, partition int32) (Result, error) {
		idx := &fakeIndex{entries: []meta.IndexEntry{{BaseOffset: 0, Count: 3, Kind: meta.KindWAL, Object: key, Offset: ref.Offset, Length: ref.Length}}}
		r, err := New(Config{Bucket: bucket, Meta: idx, Opener: opener})
		if err != nil {
			t.Fatal(err)
		}
		return r.Fetch(ctx, 1, partition, 0, 1<<20, 0)
	}
	if res, err := fetch(kekOpener{kek}, key, refs[0], 0); err != nil || len(res.Batches) != 1 {
		t.Fatalf("genuine chunk: %+v %v", res, err)
	}
	// Copied into another object.
	other, orefs := sealedObject(t, bucket, [][]byte{sealed})
	if res, err := fetch(kekOpener{kek}, other, orefs[0], 0); !errors.Is(err, envelope.ErrSealed) || len(res.Batches) != 0 {
		t.Fatalf("chunk copied to another object: %+v %v, want ErrSealed and nothing", res, err)
	}
	// Copied to another position (partition 1's chunk, index 1).
	moved, mrefs := sealedObject(t, bucket, [][]byte{sealed, sealed})
	if res, err := fetch(kekOpener{kek}, moved, mrefs[1], 1); !errors.Is(err, envelope.ErrSealed) || len(res.Batches) != 0 {
		t.Fatalf("chunk copied to another position: %+v %v, want ErrSealed and nothing", res, err)
	}
	// A wrong key.
	if _, err := fetch(kekOpener{bytes.Repeat([]byte{4}, 32)}, key, refs[0], 0); !errors.Is(err, envelope.ErrSealed) {
		t.Fatalf("wrong key: %v", err)
	}
	// No opener at all.
	if _, err := fetch(nil, key, refs[0], 0); !errors.Is(err, envelope.ErrKeyUnavailable) {
		t.Fatalf("no opener: %v", err)
	}
}
