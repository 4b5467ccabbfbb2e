package grpcapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
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

// startSequencer starts a real single-voter Raft sequencer and returns its in-process client.
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

// env is a real log node on a real sequencer, reached through a real gRPC client.
type env struct {
	node    *node.Node
	conn    *grpc.ClientConn
	streams loamv1pb.StreamServiceClient
	records loamv1pb.RecordServiceClient
	grpc    string // the gRPC address
	http    string // http://ADDR
}

func start(t testing.TB, lim httpapi.Limits, dial ...grpc.DialOption) *env {
	t.Helper()
	mc := startSequencer(t)
	if err := mc.CreateNamespace(context.Background(), meta.DefaultNS); err != nil && !strings.Contains(err.Error(), "exists") {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: "g-1", HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
		Bucket: objstore.NewMem(), Meta: mc, FlushInterval: 5 * time.Millisecond, Limits: lim, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	e := &env{node: n, grpc: n.GRPCAddr(), http: "http://" + n.Addr()}
	e.conn = e.dial(t, dial...)
	e.streams = loamv1pb.NewStreamServiceClient(e.conn)
	e.records = loamv1pb.NewRecordServiceClient(e.conn)
	return e
}

func (e *env) dial(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(e.grpc, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (e *env) createStream(t testing.TB, name string, partitions int32) *loamv1pb.Stream {
	t.Helper()
	res, err := e.streams.CreateStream(ctx(t), &loamv1pb.CreateStreamRequest{Namespace: "default", Name: name, Partitions: &partitions})
	if err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	return res.Stream
}

// metric scrapes one unlabelled metric of the node's /metrics.
func (e *env) metric(t testing.TB, name string) float64 {
	t.Helper()
	resp, err := http.Get(e.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("metric %s: %q: %v", name, v, err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not served", name)
	return 0
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func ptr[T any](v T) *T { return &v }
