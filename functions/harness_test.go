// Package functions_test runs the background functions' handlers end to end: a real
// single-voter Raft sequencer (sequencer-svc/server), real log nodes (lognode-svc/node)
// serving the native HTTP API, produce and fetch through that API, and the handlers of
// shared/segmenter, shared/gc, shared/retention and shared/compaction in between.
package functions_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/segfmt"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/walfmt"
)

func quiet() *slog.Logger {
	if os.Getenv("LOAM_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func ptr[T any](v T) *T { return &v }

// cluster is a sequencer and a log node on one bucket.
type cluster struct {
	t       testing.TB
	seq     *server.Node
	rpcAddr string
	meta    meta.Client
	bucket  objstore.Bucket
	node    *node.Node
	api     *streamapi.Client
	coord   coord.Store
}

// startCluster starts a sequencer and a log node on bucket (flushing every flush).
func startCluster(t testing.TB, bucket objstore.Bucket, flush time.Duration) *cluster {
	t.Helper()
	ctx := context.Background()
	cfg := server.DefaultConfig()
	cfg.FastTimeouts()
	cfg.ID = "seq-1"
	cfg.DataDir = t.TempDir()
	cfg.RPCAddr = freeAddr(t)
	cfg.RaftAddr = freeAddr(t)
	cfg.Bootstrap = true
	cfg.Logger = quiet()
	cfg.RaftLogOutput = io.Discard
	seq, err := server.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seq.Close() })
	c := &cluster{t: t, seq: seq, rpcAddr: cfg.RPCAddr, meta: server.NewLocalClient(seq), bucket: bucket}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := c.meta.CreateNamespace(ctx, meta.DefaultNS)
		if err == nil || errors.Is(err, meta.ErrInvalidArgument) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c.coord = store
	c.node, c.api = c.startNode("n1", flush)
	return c
}

// startNode starts another log node (fresh caches) on the cluster's sequencer and bucket.
func (c *cluster) startNode(id string, flush time.Duration) (*node.Node, *streamapi.Client) {
	c.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: id, Zone: "local", Listener: ln, Bucket: c.bucket, Meta: c.meta,
		FlushInterval: flush, Logger: quiet()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { n.Close(context.Background()) })
	api, err := streamapi.NewClient("http://" + n.Addr())
	if err != nil {
		c.t.Fatal(err)
	}
	return n, api
}

func (c *cluster) createStream(req streamapi.CreateStreamRequest) meta.Stream {
	c.t.Helper()
	ctx := context.Background()
	if _, err := c.api.CreateStream(ctx, meta.DefaultNS, req); err != nil {
		c.t.Fatal(err)
	}
	st, _, err := c.meta.GetStream(ctx, meta.DefaultNS, req.Name)
	if err != nil {
		c.t.Fatal(err)
	}
	return st
}

// produce sends batches of n records with keys and values tagged by tag to partition p.
func (c *cluster) produce(stream string, p int32, tag string, batches, n, size int) {
	c.t.Helper()
	for b := range batches {
		recs := make([]streamapi.Record, n)
		for i := range recs {
			k := fmt.Sprintf("%s-%d-%d", tag, b, i)
			v := fmt.Sprintf("%q", k+"-"+pad(size))
			recs[i] = streamapi.Record{Key: &k, Value: []byte(v), Partition: ptr(p), Headers: streamapi.Headers{streamapi.StringHeader("h", tag)}}
		}
		if _, err := c.api.Produce(context.Background(), meta.DefaultNS, stream, recs); err != nil {
			c.t.Fatal(err)
		}
	}
}

func pad(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}

// fetchAll reads a partition from offset through api until the high watermark.
func fetchAll(t testing.TB, api *streamapi.Client, stream string, p int32, from int64) []streamapi.Record {
	t.Helper()
	var out []streamapi.Record
	for {
		resp, err := api.Fetch(context.Background(), meta.DefaultNS, stream, p, from, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resp.Records...)
		if resp.NextOffset >= resp.HighWatermark || resp.NextOffset == from {
			return out
		}
		from = resp.NextOffset
	}
}

func sameRecords(t testing.TB, what string, got, want []streamapi.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if *g.Offset != *w.Offset || !ptrEq(g.Key, w.Key) || string(g.Value) != string(w.Value) || string(g.ValueBase64) != string(w.ValueBase64) ||
			!ptrEq(g.Timestamp, w.Timestamp) || fmt.Sprint(g.Headers) != fmt.Sprint(w.Headers) {
			t.Fatalf("%s: record %d differs:\n got %+v\nwant %+v", what, i, g, w)
		}
	}
}

func ptrEq[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// entries returns a partition's whole index.
func (c *cluster) entries(st meta.Stream, p int32) ([]meta.IndexEntry, meta.PartitionState) {
	c.t.Helper()
	ctx := context.Background()
	_, ps, err := c.meta.Lookup(ctx, st.ID, p, 0, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	var out []meta.IndexEntry
	for from := ps.LogStart; from < ps.HighWatermark; {
		es, _, err := c.meta.Lookup(ctx, st.ID, p, from, 1000)
		if err != nil {
			c.t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		out = append(out, es...)
		from = es[len(es)-1].End()
	}
	return out, ps
}

func kinds(es []meta.IndexEntry) (wal, seg int) {
	for _, e := range es {
		if e.Kind == meta.KindSegment {
			seg++
		} else {
			wal++
		}
	}
	return
}

// rawBatches reads a partition's batches straight from the bucket through its index, with
// baseOffsets as fetch serves them.
func rawBatches(t testing.TB, b objstore.Bucket, es []meta.IndexEntry) [][]byte {
	t.Helper()
	var out [][]byte
	for _, e := range es {
		raw, err := b.GetRange(context.Background(), e.Object, e.Offset, e.Length)
		if err != nil {
			t.Fatal(err)
		}
		payload := raw
		if e.Kind == meta.KindWAL {
			if _, payload, err = walfmt.DecodeChunk(raw); err != nil {
				t.Fatal(err)
			}
		} else if _, err := segfmt.ReadInfoAt(context.Background(), b, e.Object, e.Offset+e.Length); err != nil {
			t.Fatal(err)
		}
		off := e.BaseOffset
		for rest := payload; len(rest) > 0; {
			batch, tail, err := recordbatch.Parse(rest)
			if err != nil {
				t.Fatal(err)
			}
			cp := slices.Clone(batch.Raw)
			if e.Kind == meta.KindWAL {
				_ = recordbatch.SetBaseOffset(cp, off)
			}
			off += batch.OffsetCount()
			out = append(out, cp)
			rest = tail
		}
	}
	return out
}

func listKeys(t testing.TB, b objstore.Bucket, prefix string) []string {
	t.Helper()
	var out []string
	if err := b.List(context.Background(), prefix, func(o objstore.ObjectInfo) error { out = append(out, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkNoOrphanSegments fails if an object under seg/ is referenced by no index entry and
// is not in the retired set either (retired ones wait for gc).
func (c *cluster) checkNoOrphanSegments() {
	c.t.Helper()
	retired, err := c.meta.ListRetired(context.Background(), "", 0)
	if err != nil {
		c.t.Fatal(err)
	}
	isRetired := map[string]bool{}
	for _, r := range retired {
		isRetired[r.Key] = true
	}
	var keys []string
	for _, k := range listKeys(c.t, c.bucket, "seg/") {
		if !isRetired[k] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	refd, err := c.meta.Referenced(context.Background(), keys)
	if err != nil {
		c.t.Fatal(err)
	}
	for i, k := range keys {
		if !refd[i] {
			c.t.Errorf("segment %s is referenced by no index entry", k)
		}
	}
}
