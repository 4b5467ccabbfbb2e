package kafka_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// env is a real log node with a Kafka listener on a real in-process sequencer.
type env struct {
	node  *node.Node
	meta  meta.Client
	kafka string // the Kafka listener's address
	http  string // http://ADDR
	grpc  string
}

func start(t testing.TB, opts ...func(*node.Config)) *env {
	t.Helper()
	mc := servertest.Client(t)
	if err := mc.CreateNamespace(context.Background(), meta.DefaultNS); err != nil && !strings.Contains(err.Error(), "exists") {
		t.Fatal(err)
	}
	cfg := node.Config{NodeID: "k-1", HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0",
		Bucket: objstore.NewMem(), Meta: mc, FlushInterval: 5 * time.Millisecond, Logger: testLogger()}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return &env{node: n, meta: mc, kafka: n.KafkaAddr(), http: "http://" + n.Addr(), grpc: n.GRPCAddr()}
}

func (e *env) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.kafka)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (e *env) admin(t testing.TB, opts ...kgo.Opt) *kadm.Client {
	return kadm.NewClient(e.client(t, opts...))
}

func (e *env) createTopic(t testing.TB, name string, partitions int32) {
	t.Helper()
	res, err := e.admin(t).CreateTopic(ctx(t), partitions, 1, nil, name)
	if err != nil || res.Err != nil {
		t.Fatalf("create topic %s: %v %v", name, err, res.Err)
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func testLogger() *slog.Logger {
	if os.Getenv("KAFKA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return quiet()
}
