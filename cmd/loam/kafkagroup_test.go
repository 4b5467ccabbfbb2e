package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
)

// TestKafkaGroupCommands: kafka-group list names a group the sequencer keeps, and
// kafka-group describe shows its committed offset and lag; an unknown group fails.
func TestKafkaGroupCommands(t *testing.T) {
	mc := servertest.Client(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: "cli-1", Listener: ln, Bucket: objstore.NewMem(), Meta: mc,
		FlushInterval: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	e := &env{t: t, url: srv.URL}
	e.must("", "stream", "create", "s", "--partitions", "1")
	e.must("a\nb\nc\nd\ne\n", "produce", "s")
	ctx := t.Context()
	g, err := mc.AdvanceKafkaGroup(ctx, meta.DefaultNS, "billing", 0, "consumer")
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.CommitKafkaOffsets(ctx, meta.KafkaOffsetCommit{Namespace: meta.DefaultNS, Group: "billing", Generation: g.Generation, Epoch: g.Epoch,
		Offsets: []meta.KafkaOffset{{Topic: "s", Partition: 0, Offset: 2, LeaderEpoch: -1}}}); err != nil {
		t.Fatal(err)
	}
	if r := e.loam("", "kafka-group", "list"); r.code != 0 || !strings.Contains(r.stdout, "billing  1           consumer") {
		t.Fatalf("list:\n%s\n%s", r.stdout, r.stderr)
	}
	r := e.loam("", "kafka-group", "describe", "billing")
	if r.code != 0 || !strings.Contains(r.stdout, "s      0          2          5               3") {
		t.Fatalf("describe:\n%s\n%s", r.stdout, r.stderr)
	}
	if r := e.loam("", "kafka-group", "describe", "billing", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"lag": 3`) {
		t.Fatalf("describe --json:\n%s\n%s", r.stdout, r.stderr)
	}
	if r := e.loam("", "kafka-group", "describe", "nope"); r.code == 0 || !strings.Contains(r.stderr, "kafka_group_not_found") {
		t.Fatalf("unknown group: %+v", r)
	}
}
