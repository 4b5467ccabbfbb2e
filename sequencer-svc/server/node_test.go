package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
)

// freeAddr returns a loopback address free now. Ports come from below Linux's ephemeral
// range (32768-60999): a port the kernel hands out for ":0" is also handed to outgoing
// connections, which the many Raft and gRPC clients of a test open, so it may be taken
// again before the test binds it. This package draws from 20000-22999 (servertest,
// local/devcluster and tests/cluster draw above it, so packages run in parallel do not
// pick each other's ports), and never hands out one port twice: a node's address is
// chosen before the node binds it, and a second pick of a port closed a moment ago would
// collide with it.
func freeAddr(t testing.TB) string {
	t.Helper()
	handedMu.Lock()
	defer handedMu.Unlock()
	for range 1000 {
		p := 20000 + rand.IntN(3000)
		if handed[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		handed[p] = true
		return l.Addr().String()
	}
	t.Fatal("no free port in 20000-22999")
	return ""
}

var (
	handedMu sync.Mutex
	handed   = map[int]bool{} // ports freeAddr has returned in this process
)

func testConfig(t testing.TB, dir string) Config {
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.ID = "seq-1"
	cfg.Bootstrap = true
	cfg.RPCAddr = freeAddr(t)
	cfg.RaftAddr = freeAddr(t)
	cfg.FastTimeouts()
	cfg.NoSync = true
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.RaftLogOutput = io.Discard
	return cfg
}

func startNode(t testing.TB, cfg Config) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// clients returns the in-process and the gRPC client of one node.
func clients(t testing.TB, n *Node) map[string]meta.Client {
	t.Helper()
	g, err := metagrpc.Dial(context.Background(), []string{n.RPCAddr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return map[string]meta.Client{"local": NewLocalClient(n), "grpc": g}
}

var t0 = time.Now().UnixMilli()

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestClients runs the same script through both clients of one node: every answer and
// every error class must match.
func TestClients(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	defer n.Close()
	for name, c := range clients(t, n) {
		t.Run(name, func(t *testing.T) { clientScript(t, c, name) })
	}
}

func clientScript(t *testing.T, c meta.Client, ns string) {
	ctx := ctxT(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	is := func(err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("err %v, want %v", err, want)
		}
	}
	must(c.CreateNamespace(ctx, ns))
	must(c.CreateNamespace(ctx, ns)) // idempotent
	is(c.CreateNamespace(ctx, "bad/name"), meta.ErrInvalidArgument)
	nss, err := c.ListNamespaces(ctx)
	must(err)
	if !slices.Contains(nss, ns) || !slices.Contains(nss, meta.DefaultNS) {
		t.Fatalf("namespaces %v", nss)
	}

	s, err := c.CreateStream(ctx, meta.StreamConfig{Namespace: ns, Name: "orders", Partitions: 2})
	must(err)
	if s.ID == 0 || s.Class != meta.ClassStandard || s.Partitions != 2 {
		t.Fatalf("stream %+v", s)
	}
	_, err = c.CreateStream(ctx, meta.StreamConfig{Namespace: ns, Name: "orders", Partitions: 2})
	is(err, meta.ErrStreamExists)
	_, err = c.CreateStream(ctx, meta.StreamConfig{Namespace: "nope", Name: "orders", Partitions: 2})
	is(err, meta.ErrNamespaceNotFound)
	_, err = c.CreateStream(ctx, meta.StreamConfig{Namespace: ns, Name: "x", Partitions: 0})
	is(err, meta.ErrInvalidArgument)
	_, _, err = c.GetStream(ctx, ns, "missing")
	is(err, meta.ErrStreamNotFound)
	_, err = c.ListStreams(ctx, "nope")
	is(err, meta.ErrNamespaceNotFound)

	// Watch from now in the background.
	wctx, wcancel := context.WithCancel(ctx)
	events := make(chan meta.Event, 100)
	werr := make(chan error, 1)
	go func() {
		werr <- c.Watch(wctx, 0, func(ev meta.Event) error { events <- ev; return nil })
	}()
	time.Sleep(50 * time.Millisecond) // let the watch subscribe

	cw := meta.CommitWal{NodeID: "n1", Object: "wal/standard/n1/" + ns + "-1.wal", Class: meta.ClassStandard,
		CreatedMs: time.Now().UnixMilli(), StampMs: time.Now().UnixMilli(), Chunks: []meta.Chunk{
			{StreamID: s.ID, Partition: 0, Records: 3, Offset: 0, Length: 100, MaxTimestamp: 5},
			{StreamID: s.ID, Partition: 1, Records: 2, Offset: 100, Length: 50, MaxTimestamp: 6},
			{StreamID: s.ID, Partition: 0, Records: 1, Offset: 150, Length: 10, MaxTimestamp: 7},
		}}
	res, err := c.CommitWal(ctx, cw)
	must(err)
	if !reflect.DeepEqual(res.BaseOffsets, []int64{0, 0, 3}) || res.Duplicate || res.AppliedIndex == 0 {
		t.Fatalf("commit %+v", res)
	}
	dup, err := c.CommitWal(ctx, cw)
	must(err)
	if !dup.Duplicate || !reflect.DeepEqual(dup.BaseOffsets, res.BaseOffsets) || dup.AppliedIndex != res.AppliedIndex {
		t.Fatalf("duplicate %+v", dup)
	}
	bad := cw
	bad.Object = "wal/other"
	bad.Chunks = []meta.Chunk{{StreamID: s.ID, Partition: 9, Records: 1, Length: 1}}
	bad.AllOrNothing = true // per chunk, the chunk would be refused alone (chunks_test.go)
	_, err = c.CommitWal(ctx, bad)
	is(err, meta.ErrPartitionNotFound)
	bad.CreatedMs = time.Now().Add(-16 * time.Minute).UnixMilli()
	bad.Chunks[0].Partition = 0
	_, err = c.CommitWal(ctx, bad)
	is(err, meta.ErrStaleCommit)
	bad.CreatedMs, bad.StampMs = time.Now().UnixMilli(), time.Now().Add(61*time.Second).UnixMilli()
	_, err = c.CommitWal(ctx, bad)
	is(err, meta.ErrClockAhead)

	es, st, err := c.Lookup(ctx, s.ID, 0, 0, 10)
	must(err)
	if len(es) != 2 || es[1].BaseOffset != 3 || es[1].Offset != 150 || es[0].Object != cw.Object || st.HighWatermark != 4 || st.Bytes != 110 {
		t.Fatalf("lookup %+v %+v", es, st)
	}
	es, _, err = c.Lookup(ctx, s.ID, 0, 4, 10)
	must(err)
	if len(es) != 0 {
		t.Fatalf("lookup at hwm: %+v", es)
	}
	_, _, err = c.Lookup(ctx, s.ID, 0, 5, 10)
	is(err, meta.ErrOffsetOutOfRange)
	_, _, err = c.Lookup(ctx, s.ID+1000, 0, 0, 10)
	is(err, meta.ErrStreamNotFound)

	select {
	case ev := <-events:
		if ev.AppliedIndex != res.AppliedIndex || len(ev.Partitions) != 2 || ev.Partitions[0].HighWatermark != 4 || len(ev.Partitions[0].Added) != 2 {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event")
	}

	parts := int32(3)
	s2, err := c.UpdateStream(ctx, ns, "orders", meta.StreamPatch{Partitions: &parts})
	must(err)
	if s2.Partitions != 3 || s2.ID != s.ID {
		t.Fatalf("update %+v", s2)
	}
	one := int32(1)
	_, err = c.UpdateStream(ctx, ns, "orders", meta.StreamPatch{Partitions: &one})
	is(err, meta.ErrInvalidArgument)
	got, ps, err := c.GetStream(ctx, ns, "orders")
	must(err)
	if got.Partitions != 3 || len(ps) != 3 || ps[0].HighWatermark != 4 || ps[1].HighWatermark != 2 {
		t.Fatalf("get %+v %+v", got, ps)
	}
	list, err := c.ListStreams(ctx, ns)
	must(err)
	if len(list) != 1 || list[0].Name != "orders" {
		t.Fatalf("list %+v", list)
	}
	must(c.DeleteStream(ctx, ns, "orders"))
	is(c.DeleteStream(ctx, ns, "orders"), meta.ErrStreamNotFound)
	_, err = c.CommitWal(ctx, meta.CommitWal{Object: "wal/after-delete", CreatedMs: time.Now().UnixMilli(),
		Chunks: []meta.Chunk{{StreamID: s.ID, Records: 1, Length: 1}}, AllOrNothing: true})
	is(err, meta.ErrStreamNotFound)
	res, err = c.CommitWal(ctx, meta.CommitWal{Object: "wal/after-delete-2", CreatedMs: time.Now().UnixMilli(),
		Chunks: []meta.Chunk{{StreamID: s.ID, Records: 1, Length: 1}}})
	must(err)
	is(res.ChunkErr(0), meta.ErrStreamNotFound)

	wcancel()
	if err := <-werr; !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v", err)
	}
	// A canceled context is ErrUnavailable (and the context error) on both clients.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	_, err = c.CreateStream(cctx, meta.StreamConfig{Namespace: ns, Name: "late", Partitions: 1})
	is(err, meta.ErrUnavailable)
	is(err, context.Canceled)
}

func commitOne(ctx context.Context, c meta.Client, id uint64, obj string) (meta.CommitResult, error) {
	now := time.Now().UnixMilli()
	return c.CommitWal(ctx, meta.CommitWal{NodeID: "n1", Object: obj, CreatedMs: now, StampMs: now,
		Chunks: []meta.Chunk{{StreamID: id, Partition: 0, Records: 10, Offset: 0, Length: 100, MaxTimestamp: now}}})
}

func TestRestartKeepsStateAndWatch(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	n := startNode(t, cfg)
	c := NewLocalClient(n)
	ctx := ctxT(t)
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "s", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	var first meta.CommitResult
	for i := range 5 {
		r, err := commitOne(ctx, c, s.ID, fmt.Sprint("o", i))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = startNode(t, cfg)
	defer n.Close()
	for name, c := range clients(t, n) {
		_, ps, err := c.GetStream(ctx, meta.DefaultNS, "s")
		if err != nil || ps[0].HighWatermark != 50 {
			t.Fatalf("%s after restart: %+v %v", name, ps, err)
		}
	}
	c = NewLocalClient(n)
	// A retry of a committed object still dedupes after the restart.
	if r, err := commitOne(ctx, c, s.ID, "o0"); err != nil || !r.Duplicate || r.BaseOffsets[0] != first.BaseOffsets[0] {
		t.Fatalf("retry after restart: %+v %v", r, err)
	}
	// Watching from before the restart resets (the ring starts empty), then goes live.
	g := clients(t, n)["grpc"]
	evs := make(chan meta.Event, 10)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go g.Watch(wctx, first.AppliedIndex, func(ev meta.Event) error { evs <- ev; return nil })
	ev := <-evs
	if !ev.Reset || ev.AppliedIndex < first.AppliedIndex {
		t.Fatalf("first event after restart %+v", ev)
	}
	r, err := commitOne(ctx, c, s.ID, "o-new")
	if err != nil || r.BaseOffsets[0] != 50 {
		t.Fatalf("%+v %v", r, err)
	}
	select {
	case ev = <-evs:
		if ev.AppliedIndex != r.AppliedIndex || ev.Partitions[0].HighWatermark != 60 {
			t.Fatalf("live event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no live event after restart")
	}
}

func TestSnapshotTruncateRestart(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.SnapshotThreshold = 16
	cfg.TrailingLogs = 4
	n := startNode(t, cfg)
	c := NewLocalClient(n)
	ctx := ctxT(t)
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "s", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := commitOne(ctx, c, s.ID, fmt.Sprint("o", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	first, err := n.store.FirstIndex()
	if err != nil || first <= 10 {
		t.Fatalf("log not truncated: first index %d %v", first, err)
	}
	for i := 40; i < 45; i++ { // entries after the snapshot
		if _, err := commitOne(ctx, c, s.ID, fmt.Sprint("o", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, cfg)
	defer n.Close()
	c = NewLocalClient(n)
	_, ps, err := c.GetStream(ctx, meta.DefaultNS, "s")
	if err != nil || ps[0].HighWatermark != 450 {
		t.Fatalf("after restart: %+v %v", ps, err)
	}
	if r, err := commitOne(ctx, c, s.ID, "next"); err != nil || r.BaseOffsets[0] != 450 {
		t.Fatalf("%+v %v", r, err)
	}
	// A lost state database is rebuilt from the snapshot and the log.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := removeFile(cfg.DataDir + "/state.db"); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, cfg)
	defer n.Close()
	_, ps, err = NewLocalClient(n).GetStream(ctx, meta.DefaultNS, "s")
	if err != nil || ps[0].HighWatermark != 460 {
		t.Fatalf("after losing state.db: %+v %v", ps, err)
	}
	// The state database is not fsynced per apply: after a machine crash (its session
	// marker names another boot) it is discarded and rebuilt the same way.
	if _, err := commitOne(ctx, NewLocalClient(n), s.ID, "after-rebuild"); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.DataDir+"/state.db.session", []byte("boot some-earlier-boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, cfg)
	defer n.Close()
	if n.fsm.Discarded() == nil {
		t.Fatal("state database of another boot not discarded")
	}
	_, ps, err = NewLocalClient(n).GetStream(ctx, meta.DefaultNS, "s")
	if err != nil || ps[0].HighWatermark != 470 {
		t.Fatalf("after a machine crash: %+v %v", ps, err)
	}
}

func TestClockAhead(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	cfg.Now = func() time.Time { return now }
	n := startNode(t, cfg)
	defer n.Close()
	ctx := ctxT(t)
	for name, c := range clients(t, n) {
		s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "s-" + name, Partitions: 1})
		if err != nil {
			t.Fatal(err)
		}
		cw := meta.CommitWal{Object: "o-" + name, CreatedMs: now.UnixMilli(), StampMs: now.Add(60*time.Second + time.Millisecond).UnixMilli(),
			Chunks: []meta.Chunk{{StreamID: s.ID, Records: 1, Length: 1}}}
		if _, err := c.CommitWal(ctx, cw); !errors.Is(err, meta.ErrClockAhead) {
			t.Fatalf("%s: %v", name, err)
		}
		cw.StampMs = now.Add(60 * time.Second).UnixMilli()
		if _, err := c.CommitWal(ctx, cw); err != nil {
			t.Fatalf("%s: exactly 60 s ahead: %v", name, err)
		}
	}
}

// TestConcurrentCommits: many goroutines commit to the same partitions through both
// clients; every partition's offsets come out dense, ordered and unique.
func TestConcurrentCommits(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	defer n.Close()
	cs := clients(t, n)
	ctx := ctxT(t)
	s, err := cs["local"].CreateStream(ctx, meta.StreamConfig{Name: "hot", Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 16, 20
	type span struct{ base, count int64 }
	var mu sync.Mutex
	got := map[int32][]span{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		c := cs[[]string{"local", "grpc"}[w%2]]
		wg.Go(func() {
			for i := range each {
				now := time.Now().UnixMilli()
				var chunks []meta.Chunk
				for p := range int32(4) {
					chunks = append(chunks, meta.Chunk{StreamID: s.ID, Partition: p, Records: int64(1 + (w+i+int(p))%5), Length: 10})
				}
				res, err := c.CommitWal(ctx, meta.CommitWal{Object: fmt.Sprintf("o-%d-%d", w, i), CreatedMs: now, StampMs: now, Chunks: chunks})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for j, ch := range chunks {
					got[ch.Partition] = append(got[ch.Partition], span{res.BaseOffsets[j], ch.Records})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for p, spans := range got {
		slices.SortFunc(spans, func(a, b span) int { return int(a.base - b.base) })
		var next int64
		for _, sp := range spans {
			if sp.base != next {
				t.Fatalf("partition %d: gap or overlap at %d (want %d)", p, sp.base, next)
			}
			next += sp.count
		}
		es, st, err := cs["grpc"].Lookup(ctx, s.ID, p, 0, fsm.MaxLookup)
		if err != nil || st.HighWatermark != next || len(es) != workers*each {
			t.Fatalf("partition %d: hwm %d want %d, %d entries, %v", p, st.HighWatermark, next, len(es), err)
		}
	}
}
