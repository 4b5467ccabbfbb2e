package envelope_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	localkms "github.com/loamhq/loam/local/kms"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/objstore"
)

// TestCatalogRotateAndShred, on the embedded local-kms: a keyed namespace's stream is
// sealed, another namespace's is not; a rotation in the metastore makes the next seal
// generate a new key-encryption key while old chunks still open; a shred makes the catalog
// forget the key material, drop the namespace's streams' cached plaintext and then confirm
// the shred in the metastore, once; after the KMS key is disabled nothing opens.
func TestCatalogRotateAndShred(t *testing.T) {
	ctx := context.Background()
	srv, err := localkms.Start(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	raw := kmsClient(srv.URL)
	ck, err := raw.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("tenant-a")})
	if err != nil {
		t.Fatal(err)
	}
	mf := metafake.New() // its streams are all of namespace "default"
	mf.AddStream(7, 1)
	if _, err := mf.AttachNamespaceKey(ctx, meta.DefaultNS, *ck.KeyMetadata.Arn); err != nil {
		t.Fatal(err)
	}
	counted := &countingKMS{KMS: raw}
	ring, _ := envelope.NewKeyring(envelope.KeyConfig{KMS: counted, Bucket: objstore.NewMem()})
	var mu sync.Mutex
	var dropped [][]uint64
	cat, err := envelope.NewCatalog(envelope.CatalogConfig{Meta: mf, Keyring: ring, NodeID: "n1",
		Drop: func(k meta.NamespaceKey, streams []uint64) error {
			mu.Lock()
			defer mu.Unlock()
			dropped = append(dropped, streams)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	id := envelope.ChunkID{Object: "wal/x", Index: 0, StreamID: 7}
	sealed, n, ok, err := cat.SealChunk(ctx, id, []byte("first"))
	if err != nil || !ok || n < 1 || n >= len(sealed) {
		t.Fatalf("seal of a keyed stream: ok %v, envelope %d of %d, %v", ok, n, len(sealed), err)
	}
	if _, _, ok, err := cat.SealChunk(ctx, envelope.ChunkID{Object: "wal/x", StreamID: 99}, []byte("x")); ok || !errors.Is(err, meta.ErrStreamNotFound) {
		t.Fatalf("seal of an unknown stream: ok %v %v, want ErrStreamNotFound", ok, err)
	}
	mf.AddStream(8, 1) // of namespace default too, created after the catalog listed
	if _, _, ok, err := cat.SealChunk(ctx, envelope.ChunkID{Object: "wal/x", Index: 1, StreamID: 8}, []byte("y")); !ok || err != nil {
		t.Fatalf("seal of a stream created since the listing: ok %v %v, want sealed", ok, err)
	}
	if counted.generate.Load() != 1 {
		t.Fatalf("%d GenerateDataKey", counted.generate.Load())
	}
	if _, err := mf.RotateNamespaceKey(ctx, meta.DefaultNS, ""); err != nil {
		t.Fatal(err)
	}
	if err := cat.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	id2 := envelope.ChunkID{Object: "wal/y", Index: 0, StreamID: 7}
	sealed2, _, _, err := cat.SealChunk(ctx, id2, []byte("second"))
	if err != nil || counted.generate.Load() != 2 {
		t.Fatalf("seal after a rotation: %v, %d GenerateDataKey (want 2)", err, counted.generate.Load())
	}
	k1, _ := envelope.KeyID(sealed)
	k2, _ := envelope.KeyID(sealed2)
	if k1 == k2 {
		t.Fatal("the rotation kept the key-encryption key")
	}
	if pt, err := cat.OpenChunk(ctx, id, sealed); err != nil || string(pt) != "first" {
		t.Fatalf("a chunk of the old generation: %q %v", pt, err)
	}
	if _, err := mf.ShredNamespaceKey(ctx, meta.DefaultNS); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.DisableKey(ctx, &kms.DisableKeyInput{KeyId: ck.KeyMetadata.Arn}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := cat.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if len(dropped) != 1 || !slices.Equal(dropped[0], []uint64{7, 8}) {
		t.Fatalf("dropped %v, want streams 7 and 8 once", dropped)
	}
	mu.Unlock()
	ks, _ := mf.ListNamespaceKeys(ctx)
	if !slices.Equal(ks[0].Dropped, []string{"n1"}) {
		t.Fatalf("confirmations %v", ks[0].Dropped)
	}
	// The key material is gone from memory: opening asks KMS, which refuses.
	if _, err := cat.OpenChunk(ctx, id2, sealed2); !errors.Is(err, envelope.ErrKeyUnavailable) {
		t.Fatalf("open after the shred: %v, want ErrKeyUnavailable", err)
	}
	if _, _, _, err := cat.SealChunk(ctx, envelope.ChunkID{Object: "wal/z", StreamID: 7}, []byte("x")); !errors.Is(err, envelope.ErrKeyUnavailable) {
		t.Fatalf("seal after the shred: %v, want ErrKeyUnavailable", err)
	}
	// A node without KMS refuses keyed chunks rather than write them in clear.
	plain, _ := envelope.NewCatalog(envelope.CatalogConfig{Meta: mf, NodeID: "n2"})
	if _, _, ok, err := plain.SealChunk(ctx, id, []byte("x")); ok || !errors.Is(err, envelope.ErrKeyUnavailable) {
		t.Fatalf("seal without KMS: ok %v %v", ok, err)
	}
}

// TestCatalogStreamMissedByAListing: a listing is not atomic across namespaces, so a stream
// with an id below the highest listed can be missing from it (created in a namespace
// listed before it was). Its chunks are still sealed: a stream the map lacks makes the
// catalog list again, whatever its id, and one still unknown is refused, never written as
// plaintext.
func TestCatalogStreamMissedByAListing(t *testing.T) {
	ctx := context.Background()
	srv, err := localkms.Start(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	raw := kmsClient(srv.URL)
	ck, err := raw.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("default")})
	if err != nil {
		t.Fatal(err)
	}
	mf := metafake.New()
	mf.AddStream(7, 1)
	mf.AddStream(9, 1)
	if _, err := mf.AttachNamespaceKey(ctx, meta.DefaultNS, *ck.KeyMetadata.Arn); err != nil {
		t.Fatal(err)
	}
	ring, _ := envelope.NewKeyring(envelope.KeyConfig{KMS: raw, Bucket: objstore.NewMem()})
	cat, _ := envelope.NewCatalog(envelope.CatalogConfig{Meta: mf, Keyring: ring, NodeID: "n1"})
	if _, _, ok, err := cat.SealChunk(ctx, envelope.ChunkID{Object: "wal/a", StreamID: 9}, []byte("x")); !ok || err != nil {
		t.Fatalf("stream 9: ok %v %v", ok, err)
	}
	mf.AddStream(8, 1) // missed by the listing above
	if _, _, ok, err := cat.SealChunk(ctx, envelope.ChunkID{Object: "wal/b", StreamID: 8}, []byte("secret")); !ok || err != nil {
		t.Fatalf("stream 8, missed by a listing: ok %v %v, want sealed", ok, err)
	}
}
