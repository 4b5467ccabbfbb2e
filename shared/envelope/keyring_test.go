package envelope_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	localkms "github.com/loamhq/loam/local/kms"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/tests/testserver"
)

func kmsClient(url string) *kms.Client {
	return kms.New(kms.Options{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

// countingKMS counts the calls a keyring makes.
type countingKMS struct {
	envelope.KMS
	generate, decrypt atomic.Int64
	plaintexts        [][]byte
}

func (c *countingKMS) GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	c.generate.Add(1)
	out, err := c.KMS.GenerateDataKey(ctx, in, opts...)
	if err == nil {
		c.plaintexts = append(c.plaintexts, bytes.Clone(out.Plaintext))
	}
	return out, err
}

func (c *countingKMS) Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	c.decrypt.Add(1)
	return c.KMS.Decrypt(ctx, in, opts...)
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestKeyringLocalKMS: chunks of a keyed namespace seal and open through a cold keyring;
// KMS is called once per namespace and rotation period, not per chunk; a disabled key
// answers ErrKeyUnavailable for that namespace only, and access returns when it is enabled
// again; a key object moved to another namespace does not decrypt; no key material is in
// any stored object or error.
func TestKeyringLocalKMS(t *testing.T) {
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
	keyARN := *ck.KeyMetadata.Arn
	bucket := objstore.NewMem()
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	counted := &countingKMS{KMS: raw}
	ring, err := envelope.NewKeyring(envelope.KeyConfig{KMS: counted, Bucket: bucket, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	a := envelope.Namespace{ID: 11, Name: "tenant-a", KeyARN: keyARN}
	var sealed [][]byte
	for i := range 50 {
		id := envelope.ChunkID{Object: "wal/o", Index: uint32(i), StreamID: 3, Partition: 0}
		s, err := ring.Seal(ctx, a, id, []byte(fmt.Sprintf("chunk %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		sealed = append(sealed, s)
	}
	if n := counted.generate.Load(); n != 1 {
		t.Fatalf("%d GenerateDataKey calls for 50 chunks within the hour, want 1", n)
	}
	clk.t = clk.t.Add(61 * time.Minute)
	if _, err := ring.Seal(ctx, a, envelope.ChunkID{Object: "wal/p"}, []byte("later")); err != nil {
		t.Fatal(err)
	}
	if n := counted.generate.Load(); n != 2 {
		t.Fatalf("%d GenerateDataKey calls after the hour, want 2 (rotation)", n)
	}

	// A cold node: one Decrypt per key-encryption key, then from memory.
	coldKMS := &countingKMS{KMS: raw}
	cold, _ := envelope.NewKeyring(envelope.KeyConfig{KMS: coldKMS, Bucket: bucket})
	for i, s := range sealed {
		id := envelope.ChunkID{Object: "wal/o", Index: uint32(i), StreamID: 3, Partition: 0}
		pt, err := cold.Open(ctx, a, id, s)
		if err != nil || string(pt) != fmt.Sprintf("chunk %d", i) {
			t.Fatalf("chunk %d: %q %v", i, pt, err)
		}
	}
	if n := coldKMS.decrypt.Load(); n != 1 {
		t.Fatalf("%d Decrypt calls for 50 chunks of one key, want 1", n)
	}

	// No key material in the bucket.
	bucket.List(ctx, "", func(o objstore.ObjectInfo) error {
		if !strings.HasPrefix(o.Key, "ns/11/keys/") || !strings.HasSuffix(o.Key, ".key") {
			t.Errorf("unexpected object %s", o.Key)
		}
		body, _ := bucket.Get(ctx, o.Key)
		for _, p := range counted.plaintexts {
			if bytes.Contains(body, p) {
				t.Errorf("%s holds a plaintext key", o.Key)
			}
		}
		return nil
	})

	// The key object copied under another namespace does not decrypt there (encryption context).
	b := envelope.Namespace{ID: 12, Name: "tenant-b", KeyARN: keyARN}
	keyID, _ := envelope.KeyID(sealed[0])
	body, _ := bucket.Get(ctx, envelope.KeyObject(11, keyID))
	bucket.Put(ctx, envelope.KeyObject(12, keyID), body)
	other, _ := envelope.NewKeyring(envelope.KeyConfig{KMS: raw, Bucket: bucket})
	if _, err := other.Open(ctx, b, envelope.ChunkID{Object: "wal/o", StreamID: 3}, sealed[0]); err == nil {
		t.Fatal("a key moved to another namespace decrypted")
	}

	// Crypto-shredding: disable the key, forget it: unavailable; enable: back.
	if _, err := raw.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(keyARN)}); err != nil {
		t.Fatal(err)
	}
	cold.Forget(11)
	_, err = cold.Open(ctx, a, envelope.ChunkID{Object: "wal/o", StreamID: 3}, sealed[0])
	if !errors.Is(err, envelope.ErrKeyUnavailable) || !strings.Contains(err.Error(), "tenant-a") {
		t.Fatalf("disabled key: %v (want ErrKeyUnavailable naming the namespace)", err)
	}
	for _, p := range counted.plaintexts {
		if strings.Contains(err.Error(), string(p)) || strings.Contains(err.Error(), fmt.Sprintf("%x", p)) {
			t.Fatal("key material in an error")
		}
	}
	ring.Forget(11)
	clk.t = clk.t.Add(2 * time.Hour)
	if _, err := ring.Seal(ctx, a, envelope.ChunkID{}, []byte("x")); !errors.Is(err, envelope.ErrKeyUnavailable) {
		t.Fatalf("seal with a disabled key: %v", err)
	}
	if _, err := raw.EnableKey(ctx, &kms.EnableKeyInput{KeyId: aws.String(keyARN)}); err != nil {
		t.Fatal(err)
	}
	if pt, err := cold.Open(ctx, a, envelope.ChunkID{Object: "wal/o", StreamID: 3}, sealed[0]); err != nil || string(pt) != "chunk 0" {
		t.Fatalf("re-enabled key: %q %v", pt, err)
	}
}

// TestKeyringMoto: the happy path against moto_server's KMS (which decrypts with a
// disabled key, so only this).
func TestKeyringMoto(t *testing.T) {
	ctx := context.Background()
	url := testserver.StartMoto(t)
	raw := kmsClient(url)
	ck, err := raw.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	bucket := objstore.NewMem()
	ring, _ := envelope.NewKeyring(envelope.KeyConfig{KMS: raw, Bucket: bucket})
	ns := envelope.Namespace{ID: 1, Name: "m", KeyARN: *ck.KeyMetadata.Arn}
	id := envelope.ChunkID{Object: "wal/x", Index: 1}
	s, err := ring.Seal(ctx, ns, id, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	cold, _ := envelope.NewKeyring(envelope.KeyConfig{KMS: raw, Bucket: bucket})
	if pt, err := cold.Open(ctx, ns, id, s); err != nil || string(pt) != "hello" {
		t.Fatalf("%q %v", pt, err)
	}
}
