package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestExpressSupervised: in the multi-process cluster the log nodes get the express buckets
// (three directories), serve a stream of class express, and the supervisor's functions
// segment its WAL objects and delete all three zonal copies after their grace.
func TestExpressSupervised(t *testing.T) {
	zones := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	c := Start(t, bins, Options{Sequencers: 1, Nodes: 2, Functions: true, DevArgs: []string{"--express-dirs", strings.Join(zones, ",")}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const stream = "fast"
	if _, err := c.Client(0).CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: stream, Partitions: ptr(int32(1)), Class: "express"}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		for {
			if _, err := c.Client(i).GetStream(ctx, ns, stream); err == nil {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("node %d never saw the stream: %v", i, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var want []string
	for i := range 40 {
		v := fmt.Sprintf(`{"i":%d}`, i)
		want = append(want, v)
		if _, err := c.Client(i%2).Produce(ctx, ns, stream, []streamapi.Record{{Partition: ptr(int32(0)), Value: json.RawMessage(v)}}); err != nil {
			t.Fatalf("produce %d through node-%d: %v", i, i%2+1, err)
		}
	}
	walKeys := func(dir string) []string {
		b, err := objstore.Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		var keys []string
		b.List(ctx, objstore.ExpressPrefix, func(o objstore.ObjectInfo) error { keys = append(keys, o.Key); return nil })
		return keys
	}
	for i, z := range zones {
		if len(walKeys(z)) == 0 {
			t.Fatalf("zone %d's bucket %s holds no express WAL object after 40 produces", i, z)
		}
	}
	bucket, err := objstore.Open(ctx, filepath.Join(c.Dir, "bucket"))
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	for {
		var segs, left int
		bucket.List(ctx, "seg/", func(o objstore.ObjectInfo) error { segs++; return nil })
		for _, z := range zones {
			left += len(walKeys(z))
		}
		if segs > 0 && left == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d segment objects, %d express WAL copies left in the zones; supervisor output:\n%s", segs, left, c.SupervisorOutput())
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got := fetchAll(ctx, t, c.Client(1), stream, 0, len(want)); !slices.Equal(got, want) {
		t.Fatalf("after offload node-2 fetched %q, want %q", got, want)
	}
}
