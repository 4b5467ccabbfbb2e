// Package servertest starts a real sequencer for tests of the packages that use one: a
// single-voter Raft group on loopback, its state in the test's temporary directory, with
// loopback timeouts and no fsync (a test's data need not survive a machine crash).
//
// It is a real sequencer, not a fake: the same server.Node a deployment runs. Tests that
// need several voters, fsync or a restart on the same directory build a server.Config
// themselves.
package servertest

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
	"github.com/loamhq/loam/shared/meta"
)

// FreeAddr returns a loopback address that is free now, from below Linux's ephemeral port
// range (a port handed out for ":0" may also be handed to an outgoing connection before
// the server binds it). Ports come from 23000-25999, which no other package's tests draw
// from; Start tries again with new ones when one was taken meanwhile.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 23000+rand.IntN(3000)))
		if err != nil {
			continue
		}
		defer l.Close()
		return l.Addr().String()
	}
	t.Fatal("servertest: no free loopback port")
	return ""
}

// Start starts a single-voter sequencer and returns it once it leads; it is closed when
// the test ends. Each option may change the configuration before the start.
func Start(t testing.TB, opts ...func(*server.Config)) *server.Node {
	t.Helper()
	var lastErr error
	// A port found free can be taken before the server binds it (other test processes
	// pick ports too): try again with new ones.
	for range 3 {
		cfg := server.DefaultConfig()
		cfg.ID, cfg.DataDir, cfg.Bootstrap = "seq-1", t.TempDir(), true
		cfg.RPCAddr, cfg.RaftAddr = FreeAddr(t), FreeAddr(t)
		cfg.FastTimeouts()
		cfg.NoSync = true
		cfg.Logger, cfg.RaftLogOutput = slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard
		for _, o := range opts {
			o(&cfg)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		n, err := server.Start(ctx, cfg)
		if err == nil {
			err = n.WaitLeader(ctx)
			if err != nil {
				n.Close()
			}
		}
		cancel()
		if err == nil {
			t.Cleanup(func() { n.Close() })
			return n
		}
		lastErr = err
	}
	t.Fatalf("servertest: start a sequencer: %v", lastErr)
	return nil
}

// Client starts a sequencer (see Start) and returns its in-process client, closed when
// the test ends.
func Client(t testing.TB, opts ...func(*server.Config)) meta.Client {
	t.Helper()
	mc := server.NewLocalClient(Start(t, opts...))
	t.Cleanup(func() { mc.Close() })
	return mc
}
