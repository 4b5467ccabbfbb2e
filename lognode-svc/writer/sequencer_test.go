package writer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/gc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/objstore"
)

// startSequencer starts a real single-voter sequencer in-process.
func startSequencer(t *testing.T) *server.Node { return servertest.Start(t) }

// TestDeletedStreamSharingAFlush runs the write path on a real sequencer, through the
// in-process client and over gRPC: streams a and b share one flush, b is deleted while its
// writes are buffered. Every write to a commits at dense offsets; every write to b fails
// with stream-not-found; the WAL object is referenced by a's chunks only (trimming a's
// partitions retires it), and an object holding b's chunks only is retired at once and
// deleted by GC after its grace.
func TestDeletedStreamSharingAFlush(t *testing.T) {
	node := startSequencer(t)
	clients := map[string]meta.Client{"local": server.NewLocalClient(node)}
	gcl, err := metagrpc.Dial(context.Background(), []string{node.RPCAddr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gcl.Close() })
	clients["grpc"] = gcl
	for _, name := range []string{"local", "grpc"} {
		t.Run(name, func(t *testing.T) { deletedStreamSharingAFlush(t, clients[name], name) })
	}
}

func deletedStreamSharingAFlush(t *testing.T, mc meta.Client, prefix string) {
	ctx := context.Background()
	a, err := mc.CreateStream(ctx, meta.StreamConfig{Name: prefix + "-a", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mc.CreateStream(ctx, meta.StreamConfig{Name: prefix + "-b", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	bucket := objstore.NewMem()
	w := newTestWriter(t, bucket, mc, func(c *Config) {
		c.FlushInterval = 700 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})

	const writes = 6
	type out struct {
		p   int32
		res []Result
		err error
	}
	var wg sync.WaitGroup
	outA, outB := make([]out, writes), make([]out, writes)
	for i := range writes {
		wg.Add(2)
		go func() {
			defer wg.Done()
			p := int32(i % 2)
			res, err := w.Write(ctx, []Request{{StreamID: a.ID, Partition: p, Batches: batchOf(t, 3, "a"), Records: 3, MaxTimestamp: 1000}})
			outA[i] = out{p, res, err}
		}()
		go func() {
			defer wg.Done()
			res, err := w.Write(ctx, []Request{{StreamID: b.ID, Batches: batchOf(t, 2, "b"), Records: 2, MaxTimestamp: 1000}})
			outB[i] = out{0, res, err}
		}()
	}
	time.Sleep(100 * time.Millisecond) // the writes are buffered, the flush not cut yet
	if err := mc.DeleteStream(ctx, "default", b.Name); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	var keys []string
	if err := bucket.List(ctx, "wal/", func(o objstore.ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Fatalf("%d WAL objects, want a's and b's writes in one flush", len(keys))
	}
	obj := keys[0]
	offsets := map[int32][]int64{}
	for i, o := range outA {
		if o.err != nil || len(o.res) != 1 {
			t.Fatalf("write %d to a: %v: b's deletion failed it", i, o.err)
		}
		offsets[o.p] = append(offsets[o.p], o.res[0].BaseOffset)
	}
	for p, offs := range offsets {
		slices.Sort(offs)
		for j, off := range offs {
			if off != int64(3*j) {
				t.Fatalf("a/%d offsets %v, want dense 0, 3, 6", p, offs)
			}
		}
	}
	for i, o := range outB {
		if !errors.Is(o.err, meta.ErrStreamNotFound) || !errors.Is(o.err, ErrCommitFailed) || errors.Is(o.err, ErrCommitUnknown) {
			t.Fatalf("write %d to deleted b: %v, want ErrCommitFailed wrapping meta.ErrStreamNotFound", i, o.err)
		}
	}

	// a's partitions hold one entry each, in the object; its references are theirs only.
	for p := range int32(2) {
		es, st, err := mc.Lookup(ctx, a.ID, p, 0, 100)
		if err != nil || len(es) != 1 || es[0].Object != obj || st.HighWatermark != 9 {
			t.Fatalf("a/%d: %+v %+v %v", p, es, st, err)
		}
	}
	if ref, err := mc.Referenced(ctx, []string{obj}); err != nil || !ref[0] {
		t.Fatalf("referenced %v %v", ref, err)
	}
	if _, err := mc.TrimPartition(ctx, a.ID, 0, 9); err != nil {
		t.Fatal(err)
	}
	if isRetired(t, mc, obj) {
		t.Fatal("retired with a/1's chunk still in the index")
	}
	if _, err := mc.TrimPartition(ctx, a.ID, 1, 9); err != nil {
		t.Fatal(err)
	}
	if !isRetired(t, mc, obj) {
		t.Fatal("not retired once a's chunks were trimmed: the refused chunk holds a reference")
	}

	// A flush of b's writes only commits nothing: its object is retired at once.
	if _, err := w.Write(ctx, []Request{{StreamID: b.ID, Batches: batchOf(t, 1, "b"), Records: 1}}); !errors.Is(err, meta.ErrStreamNotFound) || !errors.Is(err, ErrCommitFailed) {
		t.Fatalf("write to deleted b alone: %v", err)
	}
	var only string
	bucket.List(ctx, "wal/", func(o objstore.ObjectInfo) error {
		if o.Key != obj {
			only = o.Key
		}
		return nil
	})
	if only == "" || !isRetired(t, mc, only) {
		t.Fatalf("object %q of refused chunks only is not retired", only)
	}
	if ref, err := mc.Referenced(ctx, []string{only}); err != nil || ref[0] {
		t.Fatalf("referenced %v %v", ref, err)
	}
	// GC deletes both after the grace, not before.
	cs, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	now := time.Now()
	g, err := gc.New(gc.Config{Bucket: bucket, Meta: mc, Coord: cs, Grace: time.Minute, OrphanInterval: -1,
		Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := g.Run(ctx); err != nil || st.Deleted != 0 {
		t.Fatalf("gc within the grace: %+v %v", st, err)
	}
	now = now.Add(2 * time.Minute)
	if st, err := g.Run(ctx); err != nil || st.Deleted != 2 {
		t.Fatalf("gc after the grace: %+v %v", st, err)
	}
	for _, k := range []string{obj, only} {
		if _, err := bucket.Get(ctx, k); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("%s after gc: %v", k, err)
		}
	}
}

func isRetired(t *testing.T, mc meta.Client, key string) bool {
	t.Helper()
	rs, err := mc.ListRetired(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Key == key {
			return true
		}
	}
	return false
}
