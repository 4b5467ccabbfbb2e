package metagrpc

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// hintServer is a sequencer voter that leads only for namespaces named after its index:
// CreateNamespace("k") answers NotLeader naming voter k's address, except on voter k.
type hintServer struct {
	metapb.UnimplementedSequencerServer
	i     int
	addrs []string
	watch chan struct{} // Watch blocks until it is closed
}

func (s *hintServer) CreateNamespace(ctx context.Context, r *metapb.CreateNamespaceRequest) (*metapb.CreateNamespaceResponse, error) {
	k, err := strconv.Atoi(r.GetName())
	if err != nil {
		return nil, Status(fmt.Errorf("%w: %q", meta.ErrInvalidArgument, r.GetName()))
	}
	if k != s.i {
		return nil, Status(&meta.NotLeaderError{Leader: s.addrs[k]})
	}
	return &metapb.CreateNamespaceResponse{}, nil
}

func (s *hintServer) Watch(r *metapb.WatchRequest, stream grpc.ServerStreamingServer[metapb.Event]) error {
	if err := stream.Send(&metapb.Event{AppliedIndex: 1}); err != nil {
		return err
	}
	select {
	case <-s.watch:
	case <-stream.Context().Done():
	}
	return stream.Context().Err()
}

func startHintServers(t *testing.T, n int) ([]string, chan struct{}) {
	t.Helper()
	addrs := make([]string, n)
	lis := make([]net.Listener, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis[i], addrs[i] = l, l.Addr().String()
	}
	watch := make(chan struct{})
	for i := range n {
		srv := grpc.NewServer()
		metapb.RegisterSequencerServer(srv, &hintServer{i: i, addrs: addrs, watch: watch})
		go srv.Serve(lis[i])
		t.Cleanup(srv.Stop)
	}
	return addrs, watch
}

func (c *client) connCount() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns), append([]string(nil), c.addrs...)
}

// TestLearnedAddressesAreBounded: a client that follows leader hints to many addresses
// keeps at most MaxLearned of them (the most recently preferred) with their connections;
// a forgotten address's connection is closed, unless a Watch still uses it, which keeps
// it until the Watch ends.
func TestLearnedAddressesAreBounded(t *testing.T) {
	const voters = 12
	addrs, watch := startHintServers(t, voters)
	mc, err := Dial(context.Background(), addrs[:1], WithBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	c := mc.(*client)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A Watch on voter 1 holds its connection.
	if err := mc.CreateNamespace(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	watched := c.conns[addrs[1]].conn
	c.mu.Unlock()
	wctx, wcancel := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		watchDone <- mc.Watch(wctx, 0, func(meta.Event) error { close(started); return nil })
	}()
	<-started

	made := map[string]*grpc.ClientConn{} // every connection made, by address
	for k := 2; k < voters; k++ {
		if err := mc.CreateNamespace(ctx, strconv.Itoa(k)); err != nil {
			t.Fatalf("voter %d: %v", k, err)
		}
		c.mu.Lock()
		for a, e := range c.conns {
			made[a] = e.conn
		}
		c.mu.Unlock()
		n, known := c.connCount()
		if len(known) > 1+MaxLearned || n > 1+MaxLearned {
			t.Fatalf("after voter %d: %d connections, addresses %v: want at most %d", k, n, known, 1+MaxLearned)
		}
		if known[c.cur] != addrs[k] {
			t.Fatalf("after voter %d: preferring %s", k, known[c.cur])
		}
	}
	_, known := c.connCount()
	if want := append(addrs[:1:1], addrs[voters-MaxLearned:]...); fmt.Sprint(known) != fmt.Sprint(want) {
		t.Fatalf("addresses %v, want the dialed one and the %d most recently learned %v", known, MaxLearned, want)
	}
	for a, conn := range made {
		kept := a == addrs[1] // under its Watch: checked below
		for _, k := range known {
			kept = kept || k == a
		}
		if st := conn.GetState(); !kept && st != connectivity.Shutdown {
			t.Fatalf("connection to forgotten %s left %v", a, st)
		}
	}
	// Voter 1 was forgotten, but its Watch goes on over the open connection.
	if watched.GetState() == connectivity.Shutdown {
		t.Fatal("a forgotten connection was closed under its Watch")
	}
	wcancel()
	<-watchDone
	if watched.GetState() != connectivity.Shutdown {
		t.Fatalf("forgotten connection left %v after its Watch ended", watched.GetState())
	}
	// A forgotten address is learned again when named.
	if err := mc.CreateNamespace(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	close(watch)
}
