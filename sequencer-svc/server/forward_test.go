package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/sequencer-svc/fsm"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// clusterConfigs returns the configs of a group of size voters bootstrapped by the first,
// with Raft timeouts a loaded two-core machine keeps (300 ms).
func clusterConfigs(t testing.TB, size int) []Config {
	var cfgs []Config
	for i := range size {
		cfg := testConfig(t, t.TempDir())
		cfg.ID = string(rune('a' + i))
		cfg.Bootstrap = i == 0
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
		cfgs = append(cfgs, cfg)
	}
	for _, c := range cfgs[1:] {
		cfgs[0].Peers = append(cfgs[0].Peers, Peer{ID: c.ID, RaftAddr: c.RaftAddr})
	}
	return cfgs
}

func startAll(t testing.TB, cfgs []Config) []*Node {
	nodes := make([]*Node, len(cfgs))
	for i, cfg := range cfgs {
		nodes[i] = startNode(t, cfg)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	})
	return nodes
}

// waitLeader returns the leader among the running nodes once it is ready to serve reads
// and every other running node knows its RPC address.
func waitLeader(t testing.TB, nodes []*Node) *Node {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		var leader *Node
		for _, n := range nodes {
			if n != nil && n.IsLeader() {
				leader = n
			}
		}
		if leader == nil || !leader.leaderReady() || leader.fsm.NodeAddr(leader.cfg.ID) != leader.RPCAddr() {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		known := true
		for _, n := range nodes {
			if n != nil && n.fsm.NodeAddr(leader.cfg.ID) != leader.RPCAddr() {
				known = false
			}
		}
		if known {
			return leader
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no ready leader")
	return nil
}

func followersOf(nodes []*Node, leader *Node) []*Node {
	var out []*Node
	for _, n := range nodes {
		if n != nil && n != leader {
			out = append(out, n)
		}
	}
	return out
}

// TestFollowerClients runs the client script and the background-work script (every write
// kind, with their exact answers and errors) through followers only: the in-process client
// of one follower, and a gRPC client pinned to another.
func TestFollowerClients(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	fs := followersOf(nodes, leader)
	g, err := metagrpc.Dial(context.Background(), []string{fs[1].RPCAddr()}, metagrpc.WithoutLeaderHeader())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cs := map[string]meta.Client{"local": NewLocalClient(fs[0]), "grpc": g}
	for name, c := range cs {
		t.Run(name, func(t *testing.T) {
			clientScript(t, c, "f"+name)
			backgroundScript(t, c, "b"+name)
		})
	}
	for _, f := range fs {
		if f.rt.forwarded.Load() == 0 {
			t.Errorf("follower %s forwarded nothing", f.cfg.ID)
		}
	}
}

// TestFollowerWriteKinds: each write RPC sent (raw gRPC) to a follower lands on the leader,
// and the follower's answer names the leader in LeaderHeader; a request marked as
// forwarded is never forwarded again.
func TestFollowerWriteKinds(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	f := followersOf(nodes, leader)[0]
	conn, err := grpc.NewClient(f.RPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := metapb.NewSequencerClient(conn)
	ctx := ctxT(t)
	var hdr metadata.MD
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, metagrpc.FromStatus(err))
		}
		if v := hdr.Get(metagrpc.LeaderHeader); len(v) != 1 || v[0] != leader.RPCAddr() {
			t.Fatalf("%s: leader header %v, leader at %s", what, v, leader.RPCAddr())
		}
		hdr = nil
	}
	_, err = c.CreateNamespace(ctx, &metapb.CreateNamespaceRequest{Name: "kinds"}, grpc.Header(&hdr))
	must("create namespace", err)
	cs, err := c.CreateStream(ctx, &metapb.CreateStreamRequest{Config: &metapb.StreamConfig{Namespace: "kinds", Name: "s", Partitions: 2}}, grpc.Header(&hdr))
	must("create stream", err)
	id := cs.GetStream().GetId()
	parts := int32(3)
	_, err = c.UpdateStream(ctx, &metapb.UpdateStreamRequest{Namespace: "kinds", Name: "s", Patch: metapb.FromStreamPatch(meta.StreamPatch{Partitions: &parts})}, grpc.Header(&hdr))
	must("update stream", err)
	now := time.Now().UnixMilli()
	cw, err := c.CommitWal(ctx, &metapb.CommitWalRequest{Object: "wal/kinds/1", CreatedMs: now, StampMs: now,
		Chunks: metapb.FromChunks([]meta.Chunk{{StreamID: id, Partition: 2, Records: 4, Length: 40}})}, grpc.Header(&hdr))
	must("commit wal", err)
	if cw.GetBaseOffsets()[0] != 0 || cw.GetDuplicate() {
		t.Fatalf("commit %+v", cw)
	}
	al, err := c.AcquireLease(ctx, &metapb.AcquireLeaseRequest{StreamId: id, Partition: 2, Kind: meta.LeaseSegment, Holder: "h", TtlMs: 60_000}, grpc.Header(&hdr))
	must("acquire lease", err)
	old, _, err := leader.Lookup(ctx, id, 2, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	seg := []meta.IndexEntry{{BaseOffset: 0, Count: 4, Kind: meta.KindSegment, Object: "seg/kinds/0", Length: 30}}
	_, err = c.SwapIndex(ctx, &metapb.SwapIndexRequest{Lease: al.GetLease(), Old: metapb.FromIndexEntries(old), New: metapb.FromIndexEntries(seg), StampMs: now}, grpc.Header(&hdr))
	must("swap index", err)
	_, err = c.ReleaseLease(ctx, &metapb.ReleaseLeaseRequest{Lease: al.GetLease()}, grpc.Header(&hdr))
	must("release lease", err)
	_, err = c.TrimPartition(ctx, &metapb.TrimPartitionRequest{StreamId: id, Partition: 2, LogStart: 4}, grpc.Header(&hdr))
	must("trim partition", err)
	_, err = c.ForgetRetired(ctx, &metapb.ForgetRetiredRequest{Keys: []string{"wal/kinds/1"}}, grpc.Header(&hdr))
	must("forget retired", err)
	_, err = c.DeleteStream(ctx, &metapb.DeleteStreamRequest{Namespace: "kinds", Name: "s"}, grpc.Header(&hdr))
	must("delete stream", err)

	// The leader applied each of them (its own state, read directly).
	if _, _, err := leader.GetStream(ctx, "kinds", "s"); !errors.Is(err, meta.ErrStreamNotFound) {
		t.Fatalf("leader after forwarded delete: %v", err)
	}
	if refs, err := leader.Referenced(ctx, []string{"wal/kinds/1", "seg/kinds/0"}); err != nil || refs[0] || refs[1] {
		t.Fatalf("referenced after swap, trim, delete: %v %v", refs, err)
	}
	if rs, _ := leader.ListRetired(ctx, "", 0); slices.ContainsFunc(rs, func(r meta.RetiredObject) bool { return r.Key == "wal/kinds/1" }) {
		t.Fatalf("forgotten object still retired: %+v", rs)
	}

	// Marked as forwarded: the follower answers NotLeader with the hint, itself.
	fctx := metadata.AppendToOutgoingContext(ctx, metagrpc.ForwardedHeader, "test")
	_, err = c.CreateNamespace(fctx, &metapb.CreateNamespaceRequest{Name: "twice"})
	var nl *meta.NotLeaderError
	if err = metagrpc.FromStatus(err); !errors.As(err, &nl) || nl.Leader != leader.RPCAddr() {
		t.Fatalf("forwarded request on a follower: %v", err)
	}
	if nss, _ := leader.ListNamespaces(ctx); slices.Contains(nss, "twice") {
		t.Fatal("a request marked as forwarded was forwarded again")
	}
}

// TestFollowerReadsAfterWrite: a write acknowledged by the leader is visible at once to
// reads on every follower, whether the follower waits for its state (long ReadWait) or
// forwards the read (ReadWait 0).
func TestFollowerReadsAfterWrite(t *testing.T) {
	cfgs := clusterConfigs(t, 3)
	cfgs[1].ReadWait = 0
	cfgs[2].ReadWait = time.Second
	nodes := startAll(t, cfgs)
	leader := waitLeader(t, nodes)
	ctx := ctxT(t)
	lc := NewLocalClient(leader)
	var grpcs []meta.Client
	for _, f := range followersOf(nodes, leader) {
		g, err := metagrpc.Dial(ctx, []string{f.RPCAddr()}, metagrpc.WithoutLeaderHeader())
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		grpcs = append(grpcs, g, NewLocalClient(f))
	}
	s, err := lc.CreateStream(ctx, meta.StreamConfig{Name: "ryw", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		name := fmt.Sprintf("ryw-%d", i)
		if _, err := lc.CreateStream(ctx, meta.StreamConfig{Name: name, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
		res, err := commitOne(ctx, lc, s.ID, fmt.Sprintf("wal/ryw/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		for j, c := range grpcs {
			if _, _, err := c.GetStream(ctx, meta.DefaultNS, name); err != nil {
				t.Fatalf("round %d reader %d: GetStream right after CreateStream: %v", i, j, err)
			}
			_, st, err := c.Lookup(ctx, s.ID, 0, 0, 0)
			if err != nil || st.HighWatermark != res.BaseOffsets[0]+10 {
				t.Fatalf("round %d reader %d: lookup right after commit at %d: %+v %v", i, j, res.BaseOffsets[0], st, err)
			}
		}
	}
}

// TestForwardedClockGuard: the clock guard is the leader's: a follower whose clock runs
// 2 minutes fast still forwards a commit stamped 90 s ahead of the leader, which refuses
// it, and a follower 2 minutes slow forwards a commit stamped 30 s ahead, which lands.
func TestForwardedClockGuard(t *testing.T) {
	cfgs := clusterConfigs(t, 3)
	skew := make([]atomic.Int64, len(cfgs))
	for i := range cfgs {
		cfgs[i].Now = func() time.Time { return time.Now().Add(time.Duration(skew[i].Load())) }
	}
	nodes := startAll(t, cfgs)
	leader := waitLeader(t, nodes)
	fs := followersOf(nodes, leader)
	for i, n := range nodes {
		switch n {
		case fs[0]:
			skew[i].Store(int64(2 * time.Minute))
		case fs[1]:
			skew[i].Store(int64(-2 * time.Minute))
		}
	}
	ctx := ctxT(t)
	s, err := NewLocalClient(leader).CreateStream(ctx, meta.StreamConfig{Name: "clock", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(c meta.Client, obj string, ahead time.Duration) error {
		now := time.Now()
		_, err := c.CommitWal(ctx, meta.CommitWal{Object: obj, CreatedMs: now.UnixMilli(), StampMs: now.Add(ahead).UnixMilli(),
			Chunks: []meta.Chunk{{StreamID: s.ID, Records: 1, Length: 1}}})
		return err
	}
	for i, f := range fs {
		g, err := metagrpc.Dial(ctx, []string{f.RPCAddr()}, metagrpc.WithoutLeaderHeader())
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		for name, c := range map[string]meta.Client{"local": NewLocalClient(f), "grpc": g} {
			if err := commit(c, fmt.Sprintf("wal/clock/%d-%s-ahead", i, name), 90*time.Second); !errors.Is(err, meta.ErrClockAhead) {
				t.Fatalf("follower %d (%s): 90 s ahead of the leader: %v", i, name, err)
			}
			if err := commit(c, fmt.Sprintf("wal/clock/%d-%s-ok", i, name), 30*time.Second); err != nil {
				t.Fatalf("follower %d (%s): 30 s ahead of the leader: %v", i, name, err)
			}
		}
	}
}

// fakeVoter is a Sequencer server whose CommitWal the test scripts.
type fakeVoter struct {
	metapb.UnimplementedSequencerServer
	calls  atomic.Int64
	commit func(ctx context.Context) (*metapb.CommitWalResponse, error)
	srv    *grpc.Server
	addr   string
}

func (f *fakeVoter) CommitWal(ctx context.Context, _ *metapb.CommitWalRequest) (*metapb.CommitWalResponse, error) {
	f.calls.Add(1)
	return f.commit(ctx)
}

func startFake(t *testing.T, commit func(ctx context.Context) (*metapb.CommitWalResponse, error)) *fakeVoter {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeVoter{commit: commit, srv: grpc.NewServer(), addr: l.Addr().String()}
	metapb.RegisterSequencerServer(f.srv, f)
	go f.srv.Serve(l)
	t.Cleanup(f.srv.Stop)
	return f
}

// viaFakeLeader makes follower f believe the leader's RPC address is fake's (a stale
// registration), then runs call through f. The leader re-registers its real address within
// a second, so the attempt is repeated until the fake was called.
func viaFakeLeader(t *testing.T, leader, f *Node, fake *fakeVoter, call func() error) error {
	t.Helper()
	ctx := ctxT(t)
	for range 10 {
		before := fake.calls.Load()
		if _, err := leader.propose(ctx, fsm.RegisterNode(leader.cfg.ID, fake.addr)); err != nil {
			t.Fatal(err)
		}
		for f.fsm.NodeAddr(leader.cfg.ID) != fake.addr {
			if ctx.Err() != nil {
				t.Fatal("the follower never applied the fake registration")
			}
			time.Sleep(time.Millisecond)
		}
		err := call()
		if fake.calls.Load() > before {
			return err
		}
	}
	t.Fatal("the follower never called the fake leader")
	return nil
}

// TestForwardToStaleLeader: a forwarded write answered NotLeader by a stale leader is
// retried once with the leader it names; a second NotLeader is answered as NotLeader with
// the hint, and nothing is committed.
func TestForwardToStaleLeader(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	f := followersOf(nodes, leader)[0]
	ctx := ctxT(t)
	s, err := NewLocalClient(leader).CreateStream(ctx, meta.StreamConfig{Name: "stale", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	stale := startFake(t, func(context.Context) (*metapb.CommitWalResponse, error) {
		return nil, metagrpc.Status(&meta.NotLeaderError{Leader: leader.RPCAddr()})
	})
	var res meta.CommitResult
	err = viaFakeLeader(t, leader, f, stale, func() (err error) {
		res, err = commitOne(ctx, NewLocalClient(f), s.ID, fmt.Sprintf("wal/stale/%d", stale.calls.Load()))
		return err
	})
	if err != nil || res.Duplicate || len(res.BaseOffsets) != 1 {
		t.Fatalf("retry with the named leader: %+v %v", res, err)
	}

	// Two stale voters naming each other: NotLeader, with a hint.
	var other *fakeVoter
	first := startFake(t, func(context.Context) (*metapb.CommitWalResponse, error) {
		return nil, metagrpc.Status(&meta.NotLeaderError{Leader: other.addr})
	})
	other = startFake(t, func(context.Context) (*metapb.CommitWalResponse, error) {
		return nil, metagrpc.Status(&meta.NotLeaderError{Leader: first.addr})
	})
	_, st0, _ := leader.Lookup(ctx, s.ID, 0, 0, 0)
	err = viaFakeLeader(t, leader, f, first, func() error {
		_, err := commitOne(ctx, NewLocalClient(f), s.ID, "wal/stale/never")
		return err
	})
	var nl *meta.NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != first.addr || other.calls.Load() != 1 {
		t.Fatalf("two stale leaders: %v (second called %d times)", err, other.calls.Load())
	}
	if _, st, _ := leader.Lookup(ctx, s.ID, 0, 0, 0); st.HighWatermark != st0.HighWatermark {
		t.Fatalf("a refused commit moved the partition: %+v -> %+v", st0, st)
	}
}

// TestForwardOutcomeUnknown: when the leader's connection breaks after a forwarded commit
// was sent, the follower answers meta.ErrUnavailable (outcome unknown), never NotLeader
// or another refusal.
func TestForwardOutcomeUnknown(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	f := followersOf(nodes, leader)[0]
	ctx := ctxT(t)
	received := make(chan struct{}, 10)
	var fake *fakeVoter
	fake = startFake(t, func(ctx context.Context) (*metapb.CommitWalResponse, error) {
		received <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	errc := make(chan error, 1)
	go func() {
		errc <- viaFakeLeader(t, leader, f, fake, func() error {
			_, err := commitOne(ctx, NewLocalClient(f), 1, "wal/unknown/1")
			return err
		})
	}()
	<-received
	fake.srv.Stop() // the leader dies with the request in flight
	err := <-errc
	if !errors.Is(err, meta.ErrUnavailable) || errors.Is(err, meta.ErrNotLeader) {
		t.Fatalf("outcome unknown answered %v", err)
	}
}

type outcome int

const (
	committed outcome = iota
	unknown
	refused
)

// TestForwardedCommitsUnderLeaderLoss: committers write through the followers (in-process
// and raw gRPC, one attempt each, no client retries) while the leader crashes. Every
// answer is then checked by committing the same object again through the new leader
// (dedupe by object path): an acknowledged commit must come back as a duplicate with the
// same offsets, a refused one (NotLeader or any other error but ErrUnavailable) must not
// have been committed; ErrUnavailable may be either. Offsets stay dense.
func TestForwardedCommitsUnderLeaderLoss(t *testing.T) {
	cfgs := clusterConfigs(t, 3)
	for i := range cfgs {
		cfgs[i].ApplyTimeout = 3 * time.Second
	}
	nodes := startAll(t, cfgs)
	leader := waitLeader(t, nodes)
	ctx := ctxT(t)
	s, err := NewLocalClient(leader).CreateStream(ctx, meta.StreamConfig{Name: "loss", Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	fs := followersOf(nodes, leader)
	var clients []meta.Client
	for _, f := range fs {
		g, err := metagrpc.Dial(ctx, []string{f.RPCAddr()}, metagrpc.WithoutLeaderHeader(), metagrpc.WithAttempts(1))
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		clients = append(clients, NewLocalClient(f), g)
	}
	type attempt struct {
		cw  meta.CommitWal
		out outcome
		res meta.CommitResult
		err error
	}
	var mu sync.Mutex
	var attempts []attempt
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		c := clients[w%len(clients)]
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				now := time.Now().UnixMilli()
				cw := meta.CommitWal{NodeID: "n", Object: fmt.Sprintf("wal/loss/%d-%d", w, i), CreatedMs: now, StampMs: now,
					Chunks: []meta.Chunk{{StreamID: s.ID, Partition: int32(i % 4), Records: 3, Length: 30}, {StreamID: s.ID, Partition: int32((i + 1) % 4), Records: 2, Length: 20}}}
				cctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
				res, err := c.CommitWal(cctx, cw)
				cancel()
				a := attempt{cw: cw, res: res, err: err}
				switch {
				case err == nil:
					a.out = committed
				case errors.Is(err, meta.ErrUnavailable):
					a.out = unknown
				default:
					a.out = refused
				}
				mu.Lock()
				attempts = append(attempts, a)
				mu.Unlock()
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	leader.crash()
	for i, n := range nodes {
		if n == leader {
			nodes[i] = nil
		}
	}
	newLeader := waitLeader(t, nodes)
	t.Logf("new leader %s after %s", newLeader.cfg.ID, time.Since(killed).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	counts := map[outcome]int{}
	committedAfter := 0
	lc := NewLocalClient(newLeader)
	for _, a := range attempts {
		counts[a.out]++
		again, err := lc.CommitWal(ctx, a.cw)
		if err != nil {
			t.Fatalf("recommit %s: %v", a.cw.Object, err)
		}
		switch a.out {
		case committed:
			if !again.Duplicate || !slices.Equal(again.BaseOffsets, a.res.BaseOffsets) {
				t.Errorf("%s acknowledged at %v, recommit answered %+v", a.cw.Object, a.res.BaseOffsets, again)
			}
		case refused:
			if again.Duplicate {
				t.Errorf("%s refused (%v) but it was committed at %v", a.cw.Object, a.err, again.BaseOffsets)
			}
		case unknown:
			if again.Duplicate {
				committedAfter++
			}
		}
	}
	t.Logf("%d attempts: %d acknowledged, %d unknown (%d of them committed), %d refused", len(attempts), counts[committed], counts[unknown], committedAfter, counts[refused])
	if counts[committed] == 0 {
		t.Fatal("nothing was acknowledged")
	}
	var refusals []string
	for _, a := range attempts {
		if a.out == refused {
			refusals = append(refusals, a.err.Error())
		}
	}
	if len(refusals) > 0 {
		t.Logf("refusals (nothing committed): %s", strings.Join(refusals[:min(3, len(refusals))], "; "))
	}
	for p := range int32(4) {
		es, st, err := lc.Lookup(ctx, s.ID, p, 0, fsm.MaxLookup)
		if err != nil {
			t.Fatal(err)
		}
		next := int64(0)
		for _, e := range es {
			if e.BaseOffset != next {
				t.Fatalf("partition %d: entry at %d, want %d", p, e.BaseOffset, next)
			}
			next = e.End()
		}
		if next != st.HighWatermark {
			t.Fatalf("partition %d: entries end at %d, high watermark %d", p, next, st.HighWatermark)
		}
	}
}

// TestMetagrpcFollowsLeaderHeader: a metagrpc client given only a follower's address moves
// to the leader after the first forwarded call; later calls are not forwarded.
func TestMetagrpcFollowsLeaderHeader(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	f := followersOf(nodes, leader)[0]
	ctx := ctxT(t)
	g, err := metagrpc.Dial(ctx, []string{f.RPCAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	s, err := g.CreateStream(ctx, meta.StreamConfig{Name: "hdr", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	before := f.rt.forwarded.Load()
	for i := range 10 {
		if _, err := commitOne(ctx, g, s.ID, fmt.Sprintf("wal/hdr/%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if after := f.rt.forwarded.Load(); after != before {
		t.Fatalf("the follower forwarded %d more calls after naming the leader", after-before)
	}
}

// TestLocalClientIgnoresForeignMetadata: the in-process client called from another gRPC
// server's handler (whose incoming metadata happens to carry the forwarded header) still
// forwards from a follower.
func TestLocalClientIgnoresForeignMetadata(t *testing.T) {
	nodes := startAll(t, clusterConfigs(t, 3))
	leader := waitLeader(t, nodes)
	f := followersOf(nodes, leader)[0]
	ctx := metadata.NewIncomingContext(ctxT(t), metadata.Pairs(metagrpc.ForwardedHeader, "someone"))
	if err := NewLocalClient(f).CreateNamespace(ctx, "foreign"); err != nil {
		t.Fatal(err)
	}
	if nss, _ := leader.ListNamespaces(ctx); !slices.Contains(nss, "foreign") {
		t.Fatal("not created")
	}
}
