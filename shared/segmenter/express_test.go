package segmenter

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/walfmt"
)

// expressFixture: the fixture over a Routed bucket whose express side is three zonal Mem
// buckets; the producer writes express WAL objects.
func expressFixture(t *testing.T) (*fixture, [3]*objstore.Mem) {
	f := newFixture(t, 1)
	var zs [3]*objstore.Mem
	var zones []objstore.Zone
	for i := range zs {
		zs[i] = objstore.NewMem()
		zones = append(zones, objstore.Zone{Name: string(rune('a' + i)), Bucket: zs[i]})
	}
	e, err := objstore.NewExpress(objstore.ExpressConfig{Zones: zones, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	r, err := objstore.NewRouted(f.bucket, e)
	if err != nil {
		t.Fatal(err)
	}
	f.prod.bucket = r
	f.prod.class = walfmt.ClassExpress
	return f, zs
}

// TestExpressSegmentedByExpressAge: express WAL objects far below the target size are
// segmented once past ExpressAge (MaxAge is an hour), into a segment on the cluster's
// bucket, with the records unchanged; younger ones wait.
func TestExpressSegmentedByExpressAge(t *testing.T) {
	ctx := context.Background()
	f, zs := expressFixture(t)
	now := time.Now()
	f.prod.at = now
	f.produce(5, 1, 50, 0)
	keys := walKeys(t, f.prod.bucket)
	if len(keys) != 5 || !strings.HasPrefix(keys[0], objstore.ExpressPrefix) {
		t.Fatalf("express WAL keys %q", keys)
	}
	if n := len(walKeys(t, f.bucket)); n != 0 {
		t.Fatalf("%d express objects on the cluster's bucket", n)
	}
	if n := len(walKeys(t, zs[2])); n == 0 {
		t.Fatal("no express object in zone c")
	}
	before, beforeRecs := readPartition(t, f.prod.bucket, f.meta.Entries(1, 0))
	clock := now.Add(time.Second)
	s := f.segmenter(Config{Bucket: f.prod.bucket, TargetBytes: 1 << 20, MaxAge: time.Hour, ExpressAge: 2 * time.Second,
		Now: func() time.Time { return clock }})
	if res, err := s.Partition(ctx, 1, 0); err != nil || res.Segments != 0 {
		t.Fatalf("express data younger than ExpressAge: %+v %v", res, err)
	}
	clock = now.Add(2 * time.Second)
	if res, err := s.Partition(ctx, 1, 0); err != nil || res.Segments != 1 || kinds(f.meta.Entries(1, 0)) != "S" {
		t.Fatalf("express data past ExpressAge: %+v %v, index %s", res, err, kinds(f.meta.Entries(1, 0)))
	}
	seg := f.meta.Entries(1, 0)[0].Object
	if _, err := f.bucket.Stat(ctx, seg); err != nil {
		t.Fatalf("segment %s not on the cluster's bucket: %v", seg, err)
	}
	after, afterRecs := readPartition(t, f.prod.bucket, f.meta.Entries(1, 0))
	if len(after) != len(before) || len(afterRecs) != len(beforeRecs) {
		t.Fatalf("segment holds %d batches / %d records, the WAL objects %d / %d", len(after), len(afterRecs), len(before), len(beforeRecs))
	}
	for i := range after {
		if string(after[i]) != string(before[i]) {
			t.Fatalf("batch %d differs after segmenting", i)
		}
	}
	// Standard WAL objects older than the express ones ride along in the same segment.
	f.prod.class = walfmt.ClassStandard
	f.prod.at = now.Add(3 * time.Second)
	f.produce(2, 1, 50, 0)
	f.prod.class = walfmt.ClassExpress
	f.prod.at = now.Add(4 * time.Second)
	f.produce(1, 1, 50, 0)
	clock = now.Add(5 * time.Second)
	if res, err := s.Partition(ctx, 1, 0); err != nil || res.Segments != 0 {
		t.Fatalf("young express object after standard ones: %+v %v", res, err)
	}
	clock = now.Add(6 * time.Second)
	if res, err := s.Partition(ctx, 1, 0); err != nil || res.Segments != 1 || kinds(f.meta.Entries(1, 0)) != "SS" {
		t.Fatalf("run with an express object past ExpressAge: %+v %v, index %s", res, err, kinds(f.meta.Entries(1, 0)))
	}
}

// TestExpressNotificationPastAge: with the coordination store counting pending bytes, a
// notification of an express object past ExpressAge (the node's delayed notification)
// segments its partition at once, far below the target size.
func TestExpressNotificationPastAge(t *testing.T) {
	ctx := context.Background()
	f, _ := expressFixture(t)
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now()
	clock := now
	s := f.segmenter(Config{Bucket: f.prod.bucket, Coord: store, TargetBytes: 1 << 20, MaxAge: time.Hour, ExpressAge: 2 * time.Second,
		Now: func() time.Time { return clock }})
	f.prod.at = now
	f.produce(3, 1, 50, 0)
	keys := walKeys(t, f.prod.bucket)
	if _, err := s.Handler().Invoke(ctx, s3Event(t, f.prod.bucket, keys[0])); err != nil {
		t.Fatal(err)
	}
	if k := kinds(f.meta.Entries(1, 0)); k != "www" {
		t.Fatalf("notification of a young express object: index %s, want www", k)
	}
	clock = now.Add(2 * time.Second)
	if _, err := s.Handler().Invoke(ctx, s3Event(t, f.prod.bucket, keys[2])); err != nil {
		t.Fatal(err)
	}
	if k := kinds(f.meta.Entries(1, 0)); k != "S" {
		t.Fatalf("notification of an express object past ExpressAge: index %s, want S", k)
	}
}
