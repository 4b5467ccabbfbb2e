package objstore_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/objstore/objstoretest"
	"github.com/loamhq/loam/tests/testserver"
)

var bucketSeq atomic.Int64

// bucketName returns a bucket name unique within this test binary and valid for S3.
func bucketName(t *testing.T) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	name = fmt.Sprintf("t%d-%s", bucketSeq.Add(1), name)
	if len(name) > 63 {
		name = name[:63]
	}
	return strings.TrimRight(name, "-")
}

func newS3(t *testing.T, cfg objstore.S3Config) *objstore.S3 {
	t.Helper()
	b, err := objstore.NewS3(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestS3VersityGWConformance(t *testing.T) {
	t.Parallel() // overlaps with the moto suite: each server is its own bottleneck
	ep := testserver.StartVersityGW(t)
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return newS3(t, objstore.S3Config{
			Bucket: bucketName(t), Endpoint: ep.URL, Region: ep.Region,
			AccessKey: ep.AccessKey, SecretKey: ep.SecretKey,
			PathStyle: true, CreateBucket: true,
		})
	}, objstoretest.SkipObjectAndPrefix("versitygw posix: a key cannot be both an object and a prefix (409 ExistingObjectIsDirectory)"))
}

func TestS3MotoConformance(t *testing.T) {
	t.Parallel()
	url := testserver.StartMoto(t)
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return newS3(t, objstore.S3Config{
			Bucket: bucketName(t), Endpoint: url, Region: "us-east-1",
			AccessKey: "test", SecretKey: "test",
			PathStyle: true, CreateBucket: true,
		})
	}, objstoretest.SkipIfAbsentRace("moto_server: the conditional create is checked and written without a lock; under load two racers both win (versitygw and the FS bucket pass it)"))
}

// TestS3OpenPrefixAndEnv opens S3 buckets through Open, with credentials, region and
// endpoint from the SDK's default chain (AWS_* variables), and checks that a key prefix
// isolates one bucket from another in the same S3 bucket.
func TestS3OpenPrefixAndEnv(t *testing.T) {
	url := testserver.StartMoto(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ENDPOINT_URL", url)
	ctx := t.Context()
	open := func(u string) objstore.Bucket {
		t.Helper()
		b, err := objstore.Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%s): %v", u, err)
		}
		return b
	}
	root := open("s3://shared?path_style=true&create_bucket=true")
	p1 := open("s3://shared/p1?path_style=true")   // "/" appended
	p2 := open("s3://shared/p1x/?path_style=true") // a sibling whose name extends p1
	for _, put := range []struct {
		b    objstore.Bucket
		k, v string
	}{{root, "outside", "r"}, {p1, "k", "one"}, {p1, "d/k", "one-d"}, {p2, "k", "two"}} {
		if err := put.b.Put(ctx, put.k, []byte(put.v), objstore.IfAbsent()); err != nil {
			t.Fatalf("Put(%s): %v", put.k, err)
		}
	}
	for _, c := range []struct {
		b    objstore.Bucket
		k, v string
	}{{root, "p1/k", "one"}, {root, "p1/d/k", "one-d"}, {root, "p1x/k", "two"}, {p1, "k", "one"}, {p2, "k", "two"}} {
		got, err := c.b.Get(ctx, c.k)
		if err != nil || string(got) != c.v {
			t.Errorf("Get(%s) = %q, %v; want %q", c.k, got, err, c.v)
		}
	}
	var keys []string
	if err := p1.List(ctx, "", func(info objstore.ObjectInfo) error {
		keys = append(keys, info.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"d/k", "k"}; !slices.Equal(keys, want) {
		t.Errorf("List under p1 = %q, want %q", keys, want)
	}
	if _, err := p1.Stat(ctx, "outside"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Stat(outside) under p1: err = %v, want ErrNotFound", err)
	}
}

func TestS3NoSuchBucketIsNotNotFound(t *testing.T) {
	ep := testserver.StartVersityGW(t)
	b := newS3(t, objstore.S3Config{
		Bucket: "does-not-exist", Endpoint: ep.URL, Region: ep.Region,
		AccessKey: ep.AccessKey, SecretKey: ep.SecretKey, PathStyle: true,
	})
	_, err := b.Get(t.Context(), "k")
	if err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get from a missing bucket: err = %v, want an error other than ErrNotFound", err)
	}
	t.Logf("Get from a missing bucket: %v", err)
}

func TestS3WrongCredentials(t *testing.T) {
	ep := testserver.StartVersityGW(t)
	good := newS3(t, objstore.S3Config{
		Bucket: "creds", Endpoint: ep.URL, Region: ep.Region,
		AccessKey: ep.AccessKey, SecretKey: ep.SecretKey, PathStyle: true, CreateBucket: true,
	})
	if err := good.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	bad := newS3(t, objstore.S3Config{
		Bucket: "creds", Endpoint: ep.URL, Region: ep.Region,
		AccessKey: ep.AccessKey, SecretKey: "wrong-secret", PathStyle: true,
	})
	if _, err := bad.Get(t.Context(), "k"); err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get with a wrong secret: err = %v, want a signature error", err)
	}
}

// TestS3ChecksumsOnRealServers: versitygw and moto accept the CRC32 checksum every PUT
// (plain and conditional) carries. versitygw, as AWS, also stores it (HeadObject with
// checksum mode answers it, and the SDK verifies whole-object GETs against it) and
// rejects a PUT whose checksum does not match its body; moto 5.2.1 ignores it.
func TestS3ChecksumsOnRealServers(t *testing.T) {
	servers := map[string]struct {
		start    func(t *testing.T) objstore.S3Config
		verifies bool // stores and checks checksums
	}{
		"versitygw": {func(t *testing.T) objstore.S3Config {
			ep := testserver.StartVersityGW(t)
			return objstore.S3Config{Endpoint: ep.URL, Region: ep.Region, AccessKey: ep.AccessKey, SecretKey: ep.SecretKey}
		}, true},
		"moto": {func(t *testing.T) objstore.S3Config {
			return objstore.S3Config{Endpoint: testserver.StartMoto(t), Region: "us-east-1", AccessKey: "test", SecretKey: "test"}
		}, false},
	}
	for name, server := range servers {
		t.Run(name, func(t *testing.T) {
			cfg := server.start(t)
			cfg.Bucket, cfg.PathStyle, cfg.CreateBucket = bucketName(t), true, true
			b := newS3(t, cfg)
			ctx := t.Context()
			body := []byte("checksummed payload")
			for i, opts := range [][]objstore.PutOption{nil, {objstore.IfAbsent()}} {
				key := fmt.Sprintf("k%d", i)
				if err := b.Put(ctx, key, body, opts...); err != nil {
					t.Fatalf("Put %s: %v", key, err)
				}
				if got, err := b.Get(ctx, key); err != nil || string(got) != string(body) {
					t.Errorf("Get %s = %q, %v", key, got, err)
				}
				if !server.verifies {
					continue
				}
				var crc [4]byte
				binary.BigEndian.PutUint32(crc[:], crc32.ChecksumIEEE(body))
				head, err := b.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(cfg.Bucket), Key: aws.String(key),
					ChecksumMode: s3types.ChecksumModeEnabled})
				if err != nil {
					t.Fatal(err)
				}
				if got, want := aws.ToString(head.ChecksumCRC32), base64.StdEncoding.EncodeToString(crc[:]); got != want {
					t.Errorf("%s: stored CRC32 %q, want %q (the PUT's checksum)", key, got, want)
				}
			}
			if !server.verifies {
				return
			}
			_, err := b.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(cfg.Bucket), Key: aws.String("bad"),
				Body: bytes.NewReader(body), ChecksumCRC32: aws.String("AAAAAA==")})
			if err == nil {
				t.Fatal("a PUT whose CRC32 does not match its body was accepted")
			}
			t.Logf("wrong checksum: %v", err)
			if _, err := b.Stat(ctx, "bad"); !errors.Is(err, objstore.ErrNotFound) {
				t.Errorf("Stat of the refused PUT: %v, want ErrNotFound", err)
			}
		})
	}
}
