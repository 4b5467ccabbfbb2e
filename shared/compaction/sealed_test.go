package compaction

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	localkms "github.com/loamhq/loam/local/kms"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
)

// TestCompactSealedSegments, against the embedded local-kms: a keyed namespace's sealed
// segments (ns/<id>/seg/) compact to what compaction means (the model), the new segments
// sealed under the same prefix with no plaintext stored, read back through a cold
// PagesBucket. A compactor without keys refuses them with ErrSealedSegments and changes
// nothing; with the KMS key disabled a cold one answers ErrKeyUnavailable, nothing changed.
func TestCompactSealedSegments(t *testing.T) {
	ctx := context.Background()
	srv, err := localkms.Start(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	raw := kms.New(kms.Options{Region: localkms.Region, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	ck, err := raw.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	// The plaintext segments, written as the compaction tests write them, then stored
	// sealed under the namespace's prefix with the same index.
	plain, pf := objstore.NewMem(), metafake.New()
	pf.AddStream(1, 1)
	now := time.UnixMilli(100 * 3600_000)
	recent := now.Add(-time.Hour).UnixMilli()
	for i := range 3 {
		addSegment(t, plain, pf, [][]rec{{{Key: sp("k1"), Value: sp("secret-v" + string(rune('0'+i))), Ts: recent}, {Key: sp("k2"), Value: sp("secret-w"), Ts: recent}}}, recordbatch.None)
	}
	all := read(t, plain, pf.Entries(1, 0))
	bucket, f := objstore.NewMem(), metafake.New()
	f.AddStream(1, 1)
	nk, err := f.AttachNamespaceKey(ctx, meta.DefaultNS, *ck.KeyMetadata.Arn)
	if err != nil {
		t.Fatal(err)
	}
	keys := func() *envelope.Catalog {
		ring, _ := envelope.NewKeyring(envelope.KeyConfig{KMS: raw, Bucket: bucket})
		cat, _ := envelope.NewCatalog(envelope.CatalogConfig{Meta: f, Keyring: ring})
		return cat
	}
	pages, err := envelope.NewPagesBucket(envelope.PagesConfig{Bucket: bucket, Keys: keys()})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range pf.Entries(1, 0) {
		body, _ := plain.Get(ctx, e.Object)
		e.Object = envelope.SegmentKey(nk.ID, e.Object)
		if err := pages.Put(ctx, e.Object, body); err != nil {
			t.Fatal(err)
		}
		f.Commit(1, 0, e)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	compactor := func(k *envelope.Catalog) *Compactor {
		c, err := New(Config{Bucket: bucket, Meta: f, TargetBytes: 1 << 20, TombstoneRetention: 24 * time.Hour, Keys: k,
			Now: func() time.Time { return now }, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := f.Entries(1, 0)
	if _, err := compactor(nil).Partition(ctx, 1, 0); !errors.Is(err, ErrSealedSegments) {
		t.Fatalf("no keys: %v, want ErrSealedSegments", err)
	}
	if _, err := raw.DisableKey(ctx, &kms.DisableKeyInput{KeyId: ck.KeyMetadata.Arn}); err != nil {
		t.Fatal(err)
	}
	if _, err := compactor(keys()).Partition(ctx, 1, 0); !errors.Is(err, envelope.ErrKeyUnavailable) {
		t.Fatalf("key disabled: %v, want ErrKeyUnavailable", err)
	}
	if len(f.Entries(1, 0)) != len(before) {
		t.Fatal("the index changed though nothing could be read")
	}
	if _, err := raw.EnableKey(ctx, &kms.EnableKeyInput{KeyId: ck.KeyMetadata.Arn}); err != nil {
		t.Fatal(err)
	}
	res, err := compactor(keys()).Partition(ctx, 1, 0)
	if err != nil || res.Segments == 0 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	cold, _ := envelope.NewPagesBucket(envelope.PagesConfig{Bucket: bucket, Keys: keys()})
	es := f.Entries(1, 0)
	if got := read(t, cold, es); !recsEqual(got, model(all, now.Add(-24*time.Hour).UnixMilli())) || len(got) != 2 {
		t.Fatalf("compacted: %v", got)
	}
	for _, e := range es {
		if !strings.HasPrefix(e.Object, envelope.SegmentKey(nk.ID, "seg/")) {
			t.Fatalf("compacted segment %s is not under the namespace's prefix", e.Object)
		}
		if b, _ := bucket.Get(ctx, e.Object); bytes.Contains(b, []byte("secret-")) {
			t.Fatalf("%s holds plaintext", e.Object)
		}
	}
}
