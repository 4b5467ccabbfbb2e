package devcluster

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/tests/testserver"
)

// TestExpressS3Buckets: loam dev --express-buckets s3://a,s3://b,s3://c --s3-endpoint: the
// express class on three buckets of an S3 API (versitygw), created when missing; an
// express produce lands in them, is fetched back, and is segmented.
func TestExpressS3Buckets(t *testing.T) {
	s3 := testserver.StartVersityGW(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPListener: ln, S3Endpoint: s3.URL, S3Region: s3.Region,
		Express:      ExpressConfig{Buckets: []string{"s3://loam-xa", "s3://loam-xb", "s3://loam-xc"}},
		Functions:    FunctionsConfig{SegmentMaxAge: time.Hour, GCGrace: 200 * time.Millisecond, SweepInterval: 100 * time.Millisecond, WatchInterval: 50 * time.Millisecond},
		SequencerRPC: freeAddr(t), SequencerRaft: freeAddr(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	cl, _ := streamapi.NewClient("http://" + c.HTTPAddr())
	if _, err := cl.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "x", Class: "express"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Produce(ctx, "default", "x", []streamapi.Record{{Value: json.RawMessage(`{"a":1}`)}, {Value: json.RawMessage(`{"a":2}`)}}); err != nil {
		t.Fatal(err)
	}
	zone, err := objstore.NewS3(ctx, objstore.S3Config{Bucket: "loam-xb", Endpoint: s3.URL, Region: s3.Region, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer zone.Close()
	fr, err := cl.Fetch(ctx, "default", "x", 0, 0, 1<<20, 0)
	if err != nil || len(fr.Records) != 2 || string(fr.Records[1].Value) != `{"a":2}` {
		t.Fatalf("fetch: %+v %v", fr, err)
	}
	// Within seconds the express object is segmented and its copies deleted from the zones.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		if err := zone.List(ctx, objstore.ExpressPrefix, func(objstore.ObjectInfo) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zone loam-xb still holds %d express WAL objects after 30 s", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if fr, err := cl.Fetch(ctx, "default", "x", 0, 0, 1<<20, 0); err != nil || len(fr.Records) != 2 {
		t.Fatalf("fetch after segmenting: %+v %v", fr, err)
	}
}
