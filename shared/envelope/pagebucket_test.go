package envelope_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
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

// putRecorder records the options of each Put.
type putRecorder struct {
	objstore.Bucket
	mu   sync.Mutex
	opts map[string]objstore.PutOptions
}

func (p *putRecorder) Put(ctx context.Context, key string, body []byte, opts ...objstore.PutOption) error {
	p.mu.Lock()
	p.opts[key] = objstore.ApplyPut(opts)
	p.mu.Unlock()
	return p.Bucket.Put(ctx, key, body, opts...)
}

// TestPagesBucketLocalKMS, on the embedded local-kms: an object under ns/<id>/seg/ is
// stored sealed (no plaintext in the stored bytes, SSE-KMS asked with the namespace's key)
// and reads back whole, by range and by Stat as its plaintext, also through a cold
// bucket and keyring (a cold node); other keys pass through as they are. The KMS key
// disabled: a cold node answers ErrKeyUnavailable naming the namespace, and re-enabled it
// reads again; a shred answers ErrKeyUnavailable at once; a namespace id with no key on
// record too.
func TestPagesBucketLocalKMS(t *testing.T) {
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
	nk, err := mf.AttachNamespaceKey(ctx, meta.DefaultNS, *ck.KeyMetadata.Arn)
	if err != nil {
		t.Fatal(err)
	}
	store := &putRecorder{Bucket: objstore.NewMem(), opts: map[string]objstore.PutOptions{}}
	counted := &countingKMS{KMS: raw}
	open := func(k envelope.KMS) *envelope.PagesBucket {
		ring, _ := envelope.NewKeyring(envelope.KeyConfig{KMS: k, Bucket: store})
		cat, _ := envelope.NewCatalog(envelope.CatalogConfig{Meta: mf, Keyring: ring})
		pb, err := envelope.NewPagesBucket(envelope.PagesConfig{Bucket: store, Keys: cat, PageSize: envelope.MinPageSize, SSEKMS: true})
		if err != nil {
			t.Fatal(err)
		}
		return pb
	}
	w := open(counted)
	key := envelope.SegmentKey(nk.ID, "seg/7/0/00000000000000000000-01JDQ8ZK3M4N5P6Q7R8S9T0V1W.seg")
	if id, ok := envelope.SealedNamespace(key); !ok || id != nk.ID {
		t.Fatalf("SealedNamespace(%s) = %d %v", key, id, ok)
	}
	plain := bytes.Repeat([]byte("tenant secret record "), 2000) // 42 KB: 11 pages
	for i := range 3 {
		if err := w.Put(ctx, envelope.SegmentKey(nk.ID, "seg/7/0/"+strconv.Itoa(i)+".seg"), plain, objstore.IfAbsent()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Put(ctx, key, plain, objstore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(ctx, "seg/9/0/x.seg", []byte("plain segment"), objstore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	if g := counted.generate.Load(); g != 1 {
		t.Fatalf("%d GenerateDataKey for 4 sealed objects, want 1", g)
	}
	stored, _ := store.Bucket.Get(ctx, key)
	if bytes.Contains(stored, []byte("tenant secret")) || len(stored) <= len(plain) {
		t.Fatalf("stored object (%d bytes) holds plaintext or is not sealed", len(stored))
	}
	if o := store.opts[key]; o.SSEKMSKeyID != *ck.KeyMetadata.Arn || !o.IfAbsent {
		t.Fatalf("put options %+v: want IfAbsent and SSE-KMS with the namespace key", o)
	}
	if o := store.opts["seg/9/0/x.seg"]; o.SSEKMSKeyID != "" {
		t.Fatalf("a plain segment's put asked SSE-KMS: %+v", o)
	}
	if b, _ := store.Bucket.Get(ctx, "seg/9/0/x.seg"); string(b) != "plain segment" {
		t.Fatalf("plain key stored as %q", b)
	}
	check := func(what string, pb *envelope.PagesBucket) {
		t.Helper()
		if b, err := pb.Get(ctx, key); err != nil || !bytes.Equal(b, plain) {
			t.Fatalf("%s: get: %d bytes, %v", what, len(b), err)
		}
		for _, r := range [][2]int64{{0, 10}, {4090, 20}, {int64(len(plain)) - 5, -1}, {10000, 20000}, {int64(len(plain)), 5}} {
			want := plain[r[0]:]
			if r[1] >= 0 && r[1] < int64(len(want)) {
				want = want[:r[1]]
			}
			if b, err := pb.GetRange(ctx, key, r[0], r[1]); err != nil || !bytes.Equal(b, want) {
				t.Fatalf("%s: range %v: %d bytes, %v", what, r, len(b), err)
			}
		}
		if _, err := pb.GetRange(ctx, key, int64(len(plain))+1, 1); !errors.Is(err, objstore.ErrInvalidRange) {
			t.Fatalf("%s: range past the end: %v", what, err)
		}
		if st, err := pb.Stat(ctx, key); err != nil || st.Size != int64(len(plain)) {
			t.Fatalf("%s: stat %+v %v", what, st, err)
		}
	}
	check("writer", w)
	countedCold := &countingKMS{KMS: raw}
	check("cold node", open(countedCold))
	if d := countedCold.decrypt.Load(); d != 1 {
		t.Fatalf("a cold node's reads cost %d Decrypt, want 1", d)
	}
	if _, err := raw.DisableKey(ctx, &kms.DisableKeyInput{KeyId: ck.KeyMetadata.Arn}); err != nil {
		t.Fatal(err)
	}
	cold := open(raw)
	if _, err := cold.GetRange(ctx, key, 0, 10); !errors.Is(err, envelope.ErrKeyUnavailable) {
		t.Fatalf("key disabled: %v, want ErrKeyUnavailable", err)
	} else if !bytes.Contains([]byte(err.Error()), []byte("namespace "+meta.DefaultNS)) {
		t.Fatalf("key disabled: %q does not name the namespace", err)
	}
	if b, err := cold.GetRange(ctx, "seg/9/0/x.seg", 0, -1); err != nil || string(b) != "plain segment" {
		t.Fatalf("plain segment while the key is disabled: %q %v", b, err)
	}
	if _, err := raw.EnableKey(ctx, &kms.EnableKeyInput{KeyId: ck.KeyMetadata.Arn}); err != nil {
		t.Fatal(err)
	}
	check("re-enabled", cold)
	if _, err := mf.ShredNamespaceKey(ctx, meta.DefaultNS); err != nil {
		t.Fatal(err)
	}
	shredded := open(raw)
	if _, err := shredded.GetRange(ctx, key, 0, 10); !errors.Is(err, envelope.ErrKeyUnavailable) {
		t.Fatalf("shredded: %v, want ErrKeyUnavailable", err)
	}
	if _, err := shredded.Get(ctx, envelope.SegmentKey(nk.ID+1, "seg/1/0/x.seg")); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("a missing sealed key: %v, want ErrNotFound", err)
	}
	if err := shredded.Put(ctx, envelope.SegmentKey(nk.ID+1, "seg/1/0/x.seg"), plain); !errors.Is(err, envelope.ErrKeyUnavailable) {
		t.Fatalf("put under a namespace id without a key: %v, want ErrKeyUnavailable", err)
	}
}

// TestSealedNamespace: only ns/<canonical id>/seg/... keys are sealed.
func TestSealedNamespace(t *testing.T) {
	for key, want := range map[string]bool{"ns/1/seg/a.seg": true, "ns/12/seg/": true, "ns/1/keys/x.key": false, "seg/1/0/x.seg": false,
		"ns//seg/x": false, "ns/01/seg/x": false, "ns/x/seg/y": false, "ns/1": false, "wal/standard/n/x.wal": false} {
		if _, ok := envelope.SealedNamespace(key); ok != want {
			t.Errorf("SealedNamespace(%q) = %v, want %v", key, ok, want)
		}
	}
}
