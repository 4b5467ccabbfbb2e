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
	"github.com/loamhq/loam/shared/objstore"
)

// realEnv is an env on a real log node and sequencer.
func realEnv(t *testing.T) *env {
	t.Helper()
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
	return &env{t: t, url: srv.URL}
}

// TestConsumeNamed: loam consume --consumer resumes where the last run stopped (--max
// commits only what it printed), consumer describe shows offsets and lag, consumer list
// names it, and a follower stops on interrupt having committed what it printed.
func TestConsumeNamed(t *testing.T) {
	e := realEnv(t)
	if r := e.loam("", "stream", "create", "s", "--partitions", "1"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if r := e.loam("a\nb\nc\nd\ne\n", "produce", "s"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	r := e.loam("", "consume", "s", "--consumer", "app", "--max", "2")
	if r.code != 0 || r.stdout != "a\nb\n" {
		t.Fatalf("first run: %+v", r)
	}
	r = e.loam("", "consumer", "describe", "app")
	if r.code != 0 || !strings.Contains(r.stdout, "s       0          2          5               3    -") {
		t.Fatalf("describe:\n%s\n%s", r.stdout, r.stderr)
	}
	r = e.loam("", "consume", "s", "--consumer", "app")
	if r.code != 0 || r.stdout != "c\nd\ne\n" {
		t.Fatalf("second run: %+v", r)
	}
	r = e.loam("", "consume", "s", "--consumer", "app")
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("third run (nothing left): %+v", r)
	}
	if r = e.loam("", "consumer", "list"); r.code != 0 || r.stdout != "app\n" {
		t.Fatalf("list: %+v", r)
	}
	// --follow: prints what arrives, and on interrupt commits it and leaves.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan result)
	go func() {
		done <- e.loamCtx(ctx, strings.NewReader(""), "consume", "s", "--consumer", "app", "--follow", "--session", "1s")
	}()
	time.Sleep(300 * time.Millisecond)
	if r := e.loam("f\ng\n", "produce", "s"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r = e.loam("", "consumer", "describe", "app", "--json")
		if strings.Contains(r.stdout, `"committed": 7`) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	r = <-done
	if r.code != 0 || r.stdout != "f\ng\n" {
		t.Fatalf("follow: %+v", r)
	}
	r = e.loam("", "consumer", "describe", "app", "--json")
	if !strings.Contains(r.stdout, `"committed": 7`) || !strings.Contains(r.stdout, `"lag": 0`) || strings.Contains(r.stdout, `"holder"`) {
		t.Fatalf("after follow: %s", r.stdout)
	}
	// Bad input.
	if r = e.loam("", "consume", "s", "--consumer", "app", "--partition", "0"); r.code != 2 {
		t.Fatalf("--partition with --consumer: %+v", r)
	}
	if r = e.loam("", "consumer", "describe", "nobody"); r.code != 1 || !strings.Contains(r.stderr, "consumer_not_found") {
		t.Fatalf("describe nobody: %+v", r)
	}
	if r = e.loam("", "consumer"); r.code != 2 {
		t.Fatalf("bare consumer: %+v", r)
	}
}
