package devcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/tests/testserver"
)

// TestAWSModeOnMoto: `loam dev --aws` on moto_server keeps the data in an S3 bucket and the
// coordination store in a DynamoDB table, and the segmenter runs only from S3's
// object-created notifications delivered through SQS (the wal/ listing watcher is off):
// segments appear, WAL objects go after grace, and fetch returns the same records before
// and after, also from a cluster started again on the same endpoint.
func TestAWSModeOnMoto(t *testing.T) {
	ctx := context.Background()
	endpoint := testserver.StartMoto(t)
	fns := FunctionsConfig{SegmentTargetBytes: 4 << 10, SegmentMaxAge: 500 * time.Millisecond, GCGrace: 500 * time.Millisecond,
		SweepInterval: 200 * time.Millisecond}
	startA := func(dir string) *testCluster {
		var c *Cluster
		for try := 0; ; try++ {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			c, err = Start(ctx, Config{DataDir: dir, HTTPListener: ln, FlushInterval: 20 * time.Millisecond, Functions: fns,
				AWS:          &AWS{Endpoint: endpoint},
				SequencerRPC: freeAddr(t), SequencerRaft: freeAddr(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil && strings.Contains(err.Error(), "address already in use") && try < 3 {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		cl, _ := streamapi.NewClient("http://" + c.HTTPAddr())
		t.Cleanup(func() { c.Close(ctx) })
		return &testCluster{Cluster: c, url: "http://" + c.HTTPAddr(), client: cl}
	}
	dir := t.TempDir()
	c := startA(dir)
	var banner strings.Builder
	c.PrintBanner(&banner)
	if !strings.Contains(banner.String(), "s3://loam-dev at "+endpoint) || !strings.Contains(banner.String(), "through SQS") {
		t.Errorf("banner does not say where the data and the notifications go:\n%s", banner.String())
	}
	if _, err := c.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "a", Partitions: ptr(int32(2))}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		recs := make([]streamapi.Record, 5)
		for j := range recs {
			recs[j] = streamapi.Record{Value: json.RawMessage(fmt.Sprintf(`{"i":%d,"j":%d,"pad":"%0100d"}`, i, j, 0)), Partition: ptr(int32(i % 2))}
		}
		if _, err := c.client.Produce(ctx, "default", "a", recs); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(c *testCluster, p int32) []string {
		var out []string
		for off := int64(0); ; {
			resp, err := c.client.Fetch(ctx, "default", "a", p, off, 1<<20, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range resp.Records {
				out = append(out, fmt.Sprint(*r.Offset, string(r.Value)))
			}
			if resp.NextOffset >= resp.HighWatermark {
				return out
			}
			off = resp.NextOffset
		}
	}
	before := [2][]string{fetch(c, 0), fetch(c, 1)}
	if len(before[0]) != 100 || len(before[1]) != 100 {
		t.Fatalf("%d %d records", len(before[0]), len(before[1]))
	}
	bucket := c.Bucket()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var wal, seg int
		bucket.List(ctx, "wal/", func(objstore.ObjectInfo) error { wal++; return nil })
		bucket.List(ctx, "seg/", func(objstore.ObjectInfo) error { seg++; return nil })
		if wal == 0 && seg >= 2 && c.Notifications() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %d WAL objects, %d segments, %d notifications handled", wal, seg, c.Notifications())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for p := range int32(2) {
		if got := fetch(c, p); fmt.Sprint(got) != fmt.Sprint(before[p]) {
			t.Fatalf("partition %d differs after segmenting", p)
		}
	}
	t.Logf("%d notifications handled through SQS", c.Notifications())
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The sequencer's state is in dir; bucket, table and queue stay on moto.
	c2 := startA(dir)
	for p := range int32(2) {
		if got := fetch(c2, p); fmt.Sprint(got) != fmt.Sprint(before[p]) {
			t.Fatalf("partition %d differs after a restart", p)
		}
	}
}
