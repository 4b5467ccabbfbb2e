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

// TestFunctionsEmbedded: with small knobs, `loam dev` segments what is produced, retires
// and deletes the WAL objects after grace, and fetch returns the same records before and
// after, also after a restart.
func TestFunctionsEmbedded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fns := FunctionsConfig{SegmentTargetBytes: 4 << 10, SegmentMaxAge: 300 * time.Millisecond, GCGrace: 300 * time.Millisecond,
		SweepInterval: 100 * time.Millisecond, WatchInterval: 50 * time.Millisecond}
	startF := func() *testCluster {
		var c *Cluster
		for try := 0; ; try++ {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			c, err = Start(ctx, Config{DataDir: dir, HTTPListener: ln, FlushInterval: 5 * time.Millisecond, Functions: fns,
				SequencerRPC: freeAddr(t), SequencerRaft: freeAddr(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil && strings.Contains(err.Error(), "address already in use") && try < 3 {
				continue // another test took a port freeAddr found free
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
	if _, err := c.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "f", Partitions: ptr(int32(2))}); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		recs := make([]streamapi.Record, 5)
		for j := range recs {
			recs[j] = streamapi.Record{Value: json.RawMessage(fmt.Sprintf(`{"i":%d,"j":%d,"pad":"%0100d"}`, i, j, 0)), Partition: ptr(int32(i % 2))}
		}
		if _, err := c.client.Produce(ctx, "default", "f", recs); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(c *testCluster, p int32) []string {
		var out []string
		for off := int64(0); ; {
			resp, err := c.client.Fetch(ctx, "default", "f", p, off, 1<<20, 0)
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
	if len(before[0]) != 150 || len(before[1]) != 150 {
		t.Fatalf("%d %d records", len(before[0]), len(before[1]))
	}
	bucket := c.Bucket()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var wal, seg int
		bucket.List(ctx, "wal/", func(objstore.ObjectInfo) error { wal++; return nil })
		bucket.List(ctx, "seg/", func(objstore.ObjectInfo) error { seg++; return nil })
		if wal == 0 && seg >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d WAL objects, %d segments", wal, seg)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
			t.Fatalf("partition %d differs after a restart", p)
		}
	}
	if _, err := filepath.Abs(dir); err != nil {
		t.Fatal(err)
	}
}
