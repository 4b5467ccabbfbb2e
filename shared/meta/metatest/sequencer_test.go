package metatest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/meta/metafake"
	"github.com/loamhq/loam/shared/meta/metatest"
)

// freeAddr returns a loopback address free now, from below Linux's ephemeral port range
// (ports handed out for ":0" are also handed to outgoing connections).
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err != nil {
			continue
		}
		defer l.Close()
		return l.Addr().String()
	}
	t.Fatal("no free port")
	return ""
}

// TestSequencer runs the suite over the real sequencer: the in-process client of a
// single-voter Raft group.
func TestSequencer(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.ID = "seq-1"
	cfg.Bootstrap = true
	cfg.DisableRPC = true
	cfg.RPCAddr = freeAddr(t)
	cfg.RaftAddr = freeAddr(t)
	cfg.FastTimeouts()
	cfg.NoSync = true
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.RaftLogOutput = io.Discard
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := server.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	metatest.Run(t, server.NewLocalClient(n))
}

// TestMetafake runs the suite over the in-memory double.
func TestMetafake(t *testing.T) {
	metatest.Run(t, metafake.New())
}
