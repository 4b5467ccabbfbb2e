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
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startSequencer starts a real single-voter Raft sequencer in a temporary directory and
// returns its in-process client.
func startSequencer(t testing.TB) meta.Client { return servertest.Client(t) }

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
	return startNodeOn(t, lim, reg, objstore.NewMem())
}

// startNodeOn is startNodeWith on the given bucket.
func startNodeOn(t testing.TB, lim httpapi.Limits, reg *coord.Registry, bucket objstore.Bucket) *testNode {
	t.Helper()
	mc := startSequencer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: "test-1", Listener: ln, Bucket: bucket, Meta: mc,
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
