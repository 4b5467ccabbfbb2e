package devcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestExpressEmbedded: loam dev serves class express on three directories by default;
// express WAL objects go there only, reach segments within seconds although the segment
// max age is an hour, every copy is deleted after grace, and fetch returns the same records
// before, after, and from a restarted (cold) node.
func TestExpressEmbedded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fns := FunctionsConfig{SegmentTargetBytes: 1 << 20, SegmentMaxAge: time.Hour, GCGrace: 300 * time.Millisecond,
		SweepInterval: 100 * time.Millisecond, WatchInterval: 50 * time.Millisecond}
	startF := func() *testCluster {
		var c *Cluster
		for try := 0; ; try++ {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			c, err = Start(ctx, Config{DataDir: dir, HTTPListener: ln, FlushInterval: time.Hour, Functions: fns,
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
	c := startF()
	var banner strings.Builder
	c.PrintBanner(&banner)
	if !strings.Contains(banner.String(), "express class     5 ms flush, two of three zonal buckets: "+filepath.Join(dir, "express", "zone-a")) {
		t.Fatalf("banner does not name the express buckets:\n%s", banner.String())
	}
	if _, err := c.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "x", Class: "express", Partitions: ptr(int32(2))}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 40 {
		recs := make([]streamapi.Record, 3)
		for j := range recs {
			recs[j] = streamapi.Record{Value: json.RawMessage(fmt.Sprintf(`{"i":%d,"j":%d}`, i, j)), Partition: ptr(int32(i % 2))}
		}
		if _, err := c.client.Produce(ctx, "default", "x", recs); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("40 express produces (the standard flush interval is an hour) took %v", time.Since(start))
	if time.Since(start) > 20*time.Second {
		t.Fatalf("40 express produces took %v", time.Since(start))
	}
	zones := make([]objstore.Bucket, 3)
	for i, z := range ExpressZones {
		b, err := objstore.NewFS(filepath.Join(dir, "express", z))
		if err != nil {
			t.Fatal(err)
		}
		zones[i] = b
	}
	count := func(b objstore.Bucket, prefix string) (n int) {
		b.List(ctx, prefix, func(objstore.ObjectInfo) error { n++; return nil })
		return n
	}
	fsBucket, err := objstore.NewFS(filepath.Join(dir, "bucket"))
	if err != nil {
		t.Fatal(err)
	}
	if n := count(fsBucket, "wal/"); n != 0 {
		t.Fatalf("%d WAL objects on the cluster's bucket for express produces", n)
	}
	fetch := func(c *testCluster, p int32) []string {
		var out []string
		for off := int64(0); ; {
			resp, err := c.client.Fetch(ctx, "default", "x", p, off, 1<<20, 0)
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
	if len(before[0]) != 60 || len(before[1]) != 60 {
		t.Fatalf("%d %d records", len(before[0]), len(before[1]))
	}
	produced := time.Now()
	deadline := produced.Add(30 * time.Second)
	for {
		wal := count(zones[0], "wal/") + count(zones[1], "wal/") + count(zones[2], "wal/")
		seg := count(fsBucket, "seg/")
		if wal == 0 && seg >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d express WAL copies in the zones, %d segments", wal, seg)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("segmented and every zonal copy deleted %v after the last produce", time.Since(produced))
	for p := range int32(2) {
		if got := fetch(c, p); fmt.Sprint(got) != fmt.Sprint(before[p]) {
			t.Fatalf("partition %d differs after segmenting", p)
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c2 := startF()
	for p := range int32(2) {
		if got := fetch(c2, p); fmt.Sprint(got) != fmt.Sprint(before[p]) {
			t.Fatalf("partition %d differs on a restarted node", p)
		}
	}
}

func TestExpressURLs(t *testing.T) {
	urls, err := ExpressURLs(ExpressConfig{}, "", "", "/data")
	if err != nil || fmt.Sprint(urls) != "[/data/express/zone-a /data/express/zone-b /data/express/zone-c]" {
		t.Fatalf("default: %q %v", urls, err)
	}
	urls, err = ExpressURLs(ExpressConfig{Buckets: []string{"s3://a", "s3://b", "s3://c"}}, "http://127.0.0.1:7000", "r1", "/data")
	if err != nil || urls[1] != "s3://b?create_bucket=true&endpoint=http%3A%2F%2F127.0.0.1%3A7000&path_style=true&region=r1" {
		t.Fatalf("buckets: %q %v", urls, err)
	}
	for _, bad := range []ExpressConfig{
		{Buckets: []string{"s3://a", "s3://b"}},
		{Dirs: []string{"a", "b", "c", "d"}},
		{Buckets: []string{"s3://a", "b", "s3://c"}},
		{Buckets: []string{"s3://a?x=1", "s3://b", "s3://c"}},
		{Buckets: []string{"s3://a", "s3://b", "s3://c"}, Dirs: []string{"a", "b", "c"}},
	} {
		if _, err := ExpressURLs(bad, "", "", "/data"); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
