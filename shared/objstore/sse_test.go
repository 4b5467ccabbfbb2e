package objstore_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/tests/testserver"
)

// TestS3SSEKMSMoto: a Put with SSEKMS stores the object with SSE-KMS under that key (the
// PUT carries the headers; moto records them), plain and conditional; one without it does
// not ask for it; the memory bucket ignores the option.
func TestS3SSEKMSMoto(t *testing.T) {
	ctx := context.Background()
	url := testserver.StartMoto(t)
	km := kms.New(kms.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	ck, err := km.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	arn := *ck.KeyMetadata.Arn
	name := bucketName(t)
	b := newS3(t, objstore.S3Config{Bucket: name, Endpoint: url, Region: "us-east-1", AccessKey: "test", SecretKey: "test", PathStyle: true, CreateBucket: true})
	if err := b.Put(ctx, "ns/1/seg/a.seg", []byte("sealed"), objstore.SSEKMS(arn)); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "ns/1/seg/b.seg", []byte("sealed"), objstore.SSEKMS(arn), objstore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "seg/1/0/c.seg", []byte("plain")); err != nil {
		t.Fatal(err)
	}
	raw := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), UsePathStyle: true, Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	for key, want := range map[string]bool{"ns/1/seg/a.seg": true, "ns/1/seg/b.seg": true, "seg/1/0/c.seg": false} {
		h, err := raw.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(name), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		got := h.ServerSideEncryption == s3types.ServerSideEncryptionAwsKms && aws.ToString(h.SSEKMSKeyId) != ""
		if got != want {
			t.Errorf("%s: encryption %q key %q, want SSE-KMS %v", key, h.ServerSideEncryption, aws.ToString(h.SSEKMSKeyId), want)
		}
		if body, err := b.Get(ctx, key); err != nil || len(body) == 0 {
			t.Errorf("%s reads back: %q %v", key, body, err)
		}
	}
	mem := objstore.NewMem()
	if err := mem.Put(ctx, "k", []byte("x"), objstore.SSEKMS(arn)); err != nil {
		t.Fatalf("the memory bucket with SSEKMS: %v", err)
	}
}
