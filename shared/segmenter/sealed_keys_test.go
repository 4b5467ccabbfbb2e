package segmenter

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/oklog/ulid/v2"

	localkms "github.com/loamhq/loam/local/kms"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/walfmt"
)

type countingKMS struct {
	envelope.KMS
	generate, decrypt atomic.Int64
}

func (c *countingKMS) GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	c.generate.Add(1)
	return c.KMS.GenerateDataKey(ctx, in, opts...)
}

func (c *countingKMS) Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	c.decrypt.Add(1)
	return c.KMS.Decrypt(ctx, in, opts...)
}

// keyedFixture is a fixture whose namespace (default) has a key in an embedded local-kms,
// and writes WAL objects whose partition-1 chunks are sealed with it, as a log node does;
// partition 0's chunks are plaintext (written before the key was attached).
type keyedFixture struct {
	*fixture
	raw    *kms.Client
	keyARN string
	nk     meta.NamespaceKey
	writer *envelope.Catalog // the log node's catalog
	want   map[int32][]string
}

func newKeyedFixture(t *testing.T) *keyedFixture {
	ctx := context.Background()
	srv, err := localkms.Start(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	raw := kms.New(kms.Options{Region: localkms.Region, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	ck, err := raw.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	f := &keyedFixture{fixture: newFixture(t, 2), raw: raw, keyARN: *ck.KeyMetadata.Arn, want: map[int32][]string{}}
	if f.nk, err = f.meta.AttachNamespaceKey(ctx, meta.DefaultNS, f.keyARN); err != nil {
		t.Fatal(err)
	}
	f.writer = f.catalog(raw, "n1")
	return f
}

func (f *keyedFixture) catalog(k envelope.KMS, node string) *envelope.Catalog {
	ring, err := envelope.NewKeyring(envelope.KeyConfig{KMS: k, Bucket: f.bucket})
	if err != nil {
		f.t.Fatal(err)
	}
	cat, err := envelope.NewCatalog(envelope.CatalogConfig{Meta: f.meta, Keyring: ring, NodeID: node, Logger: quiet()})
	if err != nil {
		f.t.Fatal(err)
	}
	return cat
}

func (f *keyedFixture) produce(objects int) {
	ctx := context.Background()
	for i := range objects {
		id := ulid.MustNew(ulid.Timestamp(time.Now()), ulid.DefaultEntropy())
		key := walfmt.ObjectKey(walfmt.ClassStandard, "n1", id)
		var chunks []walfmt.Chunk
		for p := range int32(2) {
			recs := records("secret-p"+string(rune('0'+p))+"-o"+string(rune('a'+i)), 10, 300, int64(i))
			for _, r := range recs {
				f.want[p] = append(f.want[p], string(r.Value))
			}
			payload, err := recordbatch.Append(nil, recs, recordbatch.DefaultBuildOptions())
			if err != nil {
				f.t.Fatal(err)
			}
			c := walfmt.Chunk{StreamID: 1, Partition: p, Encoding: walfmt.EncodingKafka, Records: 10, Payload: payload}
			if p == 1 {
				sealed, n, ok, err := f.writer.SealChunk(ctx, envelope.ChunkID{Object: key, Index: uint32(p), StreamID: 1, Partition: p}, payload)
				if err != nil || !ok {
					f.t.Fatalf("seal: ok %v %v", ok, err)
				}
				c.Payload, c.Encrypted, c.EnvelopeLen = sealed, true, n
			}
			chunks = append(chunks, c)
		}
		obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: "n1", ULID: id, Class: walfmt.ClassStandard}, chunks)
		if err != nil {
			f.t.Fatal(err)
		}
		if err := f.bucket.Put(ctx, key, obj, objstore.IfAbsent()); err != nil {
			f.t.Fatal(err)
		}
		for _, r := range refs {
			f.meta.Commit(r.StreamID, r.Partition, meta.IndexEntry{Count: r.Records, Kind: meta.KindWAL, Object: key, Offset: r.Offset, Length: r.Length})
		}
	}
}

// read reads partition p through a cold PagesBucket (a cold log node) and answers its
// record values.
func (f *keyedFixture) read(p int32) []string {
	f.t.Helper()
	pb, err := envelope.NewPagesBucket(envelope.PagesConfig{Bucket: f.bucket, Keys: f.catalog(f.raw, "reader")})
	if err != nil {
		f.t.Fatal(err)
	}
	_, recs := readPartition(f.t, pb, f.meta.Entries(1, p))
	var vals []string
	for i, r := range recs {
		if r.Offset != int64(i) {
			f.t.Fatalf("partition %d: record %d at offset %d", p, i, r.Offset)
		}
		vals = append(vals, r.Value)
	}
	return vals
}

// TestKeyedSegments, against the embedded local-kms: a namespace with a key is segmented
// from its sealed WAL chunks (and its plaintext ones, written before the key) into
// segments under ns/<id>/seg/ sealed in pages: no plaintext in the stored objects, and
// read through a cold PagesBucket both partitions answer every record at its offset. One
// segmenter invocation costs one GenerateDataKey (the segments' key) and one Decrypt (the
// log node's chunk key). A disabled key leaves the partition in the WAL (KeyUnavailable,
// no error, index unchanged); re-enabled, it is segmented.
func TestKeyedSegments(t *testing.T) {
	ctx := context.Background()
	f := newKeyedFixture(t)
	f.produce(4)
	counted := &countingKMS{KMS: f.raw}
	s := f.segmenter(Config{TargetBytes: 1 << 10, MaxAge: time.Hour, Keys: f.catalog(counted, ""), PageSize: envelope.MinPageSize})
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if g, d := counted.generate.Load(), counted.decrypt.Load(); g != 1 || d != 1 {
		t.Fatalf("one sweep made %d GenerateDataKey and %d Decrypt, want 1 and 1", g, d)
	}
	prefix := envelope.SegmentKey(f.nk.ID, "seg/")
	for p := range int32(2) {
		es := f.meta.Entries(1, p)
		if k := kinds(es); !strings.HasPrefix(k, "S") || strings.Contains(k, "w") {
			t.Fatalf("partition %d: index %s, want segments only", p, k)
		}
		for _, e := range es {
			if !strings.HasPrefix(e.Object, prefix) {
				t.Fatalf("partition %d: segment %s not under %s", p, e.Object, prefix)
			}
		}
		got := f.read(p)
		if strings.Join(got, ",") != strings.Join(f.want[p], ",") {
			t.Fatalf("partition %d: %d records read back, want %d", p, len(got), len(f.want[p]))
		}
	}
	n := 0
	f.bucket.List(ctx, "", func(o objstore.ObjectInfo) error {
		if strings.HasPrefix(o.Key, "seg/") {
			t.Errorf("a plain segment %s of a keyed namespace", o.Key)
		}
		if strings.HasPrefix(o.Key, prefix) {
			n++
			b, _ := f.bucket.Get(ctx, o.Key)
			if bytes.Contains(b, []byte("secret-p")) {
				t.Errorf("%s holds plaintext", o.Key)
			}
		}
		return nil
	})
	if n == 0 {
		t.Fatal("no sealed segments stored")
	}

	// The key disabled: a cold segmenter leaves new data in the WAL, without an error.
	f.produce(2)
	if _, err := f.raw.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(f.keyARN)}); err != nil {
		t.Fatal(err)
	}
	cold := f.segmenter(Config{TargetBytes: 1 << 10, MaxAge: time.Hour, Keys: f.catalog(f.raw, "")})
	before := kinds(f.meta.Entries(1, 1))
	res, err := cold.Partition(ctx, 1, 1)
	if err != nil || !res.KeyUnavailable || res.Segments != 0 {
		t.Fatalf("key disabled: %+v %v, want KeyUnavailable and no error", res, err)
	}
	if k := kinds(f.meta.Entries(1, 1)); k != before {
		t.Fatalf("index changed with the key disabled: %s, was %s", k, before)
	}
	if _, err := f.raw.EnableKey(ctx, &kms.EnableKeyInput{KeyId: aws.String(f.keyARN)}); err != nil {
		t.Fatal(err)
	}
	if res, err := cold.Partition(ctx, 1, 1); err != nil || res.Segments == 0 {
		t.Fatalf("re-enabled: %+v %v", res, err)
	}
	if got := f.read(1); strings.Join(got, ",") != strings.Join(f.want[1], ",") {
		t.Fatalf("after re-enabling: %d records, want %d", len(got), len(f.want[1]))
	}
}

// TestKeyedSegmentsShredded: after a shred the segmenter leaves the namespace's partitions
// in the WAL (its keys forgotten at the next invocation), writing nothing.
func TestKeyedSegmentsShredded(t *testing.T) {
	ctx := context.Background()
	f := newKeyedFixture(t)
	f.produce(2)
	s := f.segmenter(Config{TargetBytes: 1 << 10, MaxAge: time.Hour, Keys: f.catalog(f.raw, "")})
	if _, err := f.meta.ShredNamespaceKey(ctx, meta.DefaultNS); err != nil {
		t.Fatal(err)
	}
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if k := kinds(f.meta.Entries(1, 1)); strings.Contains(k, "S") {
		t.Fatalf("a shredded namespace was segmented: %s", k)
	}
	n := 0
	f.bucket.List(ctx, "ns/", func(o objstore.ObjectInfo) error {
		if strings.HasSuffix(o.Key, ".seg") {
			n++
		}
		return nil
	})
	if n != 0 {
		t.Fatalf("%d segments written for a shredded namespace", n)
	}
}
