package segmenter

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/walfmt"
)

// TestArrowPartitionLeftInWAL: a partition of an arrow stream is not segmented yet; it is
// skipped without an error (an error would fail the notification and have it redelivered
// forever), and the kafka partitions of the same WAL object are segmented as usual.
func TestArrowPartitionLeftInWAL(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 1)
	f.meta.AddStream(2, 1)
	f.produce(3, 1, 50, 0)
	id := ulid.MustNew(ulid.Timestamp(time.Now()), ulid.DefaultEntropy())
	obj, refs, err := walfmt.AppendObject(nil, walfmt.Header{NodeID: "n1", ULID: id, Class: walfmt.ClassStandard},
		[]walfmt.Chunk{{StreamID: 2, Partition: 0, Encoding: walfmt.EncodingArrow, Records: 2, MaxTimestamp: 1, Payload: bytes.Repeat([]byte("LARW frames "), 400)}})
	if err != nil {
		t.Fatal(err)
	}
	key := walfmt.ObjectKey(walfmt.ClassStandard, "n1", id)
	if err := f.bucket.Put(ctx, key, obj, objstore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	f.meta.Commit(2, 0, meta.IndexEntry{Count: refs[0].Records, Kind: meta.KindWAL, Object: key, Offset: refs[0].Offset, Length: refs[0].Length, MaxTimestamp: 1})
	s := f.segmenter(Config{TargetBytes: 1024, MaxAge: time.Hour})
	res, err := s.Partition(ctx, 2, 0)
	if err != nil || res.Segments != 0 || kinds(f.meta.Entries(2, 0)) != "w" {
		t.Fatalf("arrow partition: %+v %v, index %s", res, err, kinds(f.meta.Entries(2, 0)))
	}
	if err := s.Sweep(ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if k := kinds(f.meta.Entries(1, 0)); !strings.HasPrefix(k, "S") {
		t.Fatalf("kafka partition: %s", k)
	}
}
