package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startSequencer starts a real single-voter Raft sequencer in a temporary directory and
// returns its in-process client.
func startSequencer(t testing.TB) meta.Client {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.Bootstrap = "seq-1", t.TempDir(), true
	cfg.RPCAddr, cfg.RaftAddr = freeAddr(t), freeAddr(t)
	cfg.FastTimeouts()
	cfg.NoSync = true
	cfg.Logger, cfg.RaftLogOutput = quiet(), io.Discard
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seq, err := server.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := seq.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	mc := server.NewLocalClient(seq)
	t.Cleanup(func() { mc.Close(); seq.Close() })
	return mc
}

// testNode is a real log node (real writer, reader and watch) on a real sequencer and an
// in-memory bucket, its HTTP API served by httptest.
type testNode struct {
	node *node.Node
	api  *httpapi.Server
	srv  *httptest.Server
	meta meta.Client
}

func startNode(t testing.TB, lim httpapi.Limits) *testNode { return startNodeWith(t, lim, nil) }

func startNodeWith(t testing.TB, lim httpapi.Limits, reg *coord.Registry) *testNode {
	t.Helper()
	mc := startSequencer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: "test-1", Listener: ln, Bucket: objstore.NewMem(), Meta: mc,
		FlushInterval: 5 * time.Millisecond, Limits: lim, Logger: quiet(), Registry: reg, Zone: "z1"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return &testNode{node: n, api: n.Handler().(*httpapi.Server), srv: srv, meta: mc}
}
