package server

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
	"github.com/loamhq/loam/shared/tlsconf"
)

// clusterTLS makes a cluster CA (and another one, of no cluster) and returns the voters'
// source and the files.
func clusterTLS(t *testing.T) (*tlsconf.Source, tlsconf.DevFiles, tlsconf.DevFiles) {
	t.Helper()
	dir := t.TempDir()
	cluster, err := tlsconf.GenerateDev(filepath.Join(dir, "cluster"), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlsconf.GenerateDev(filepath.Join(dir, "other"), nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.Load(cluster.DevConfig())
	if err != nil {
		t.Fatal(err)
	}
	return src, cluster, other
}

func load(t *testing.T, c tlsconf.Config) *tlsconf.Source {
	t.Helper()
	s, err := tlsconf.Load(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTLSRefusesCallersWithoutIdentity: a sequencer with a cluster identity refuses, over
// its real gRPC listener, CommitWal and the admin RPCs of a caller that presents no
// certificate, one of another CA, or plaintext, and serves the cluster's identity.
func TestTLSRefusesCallersWithoutIdentity(t *testing.T) {
	src, cluster, other := clusterTLS(t)
	cfg := testConfig(t, t.TempDir())
	cfg.TLS = src
	n := startNode(t, cfg)
	defer n.Close()

	ctx := ctxT(t)
	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
	}{
		{"plaintext", insecure.NewCredentials()},
		{"TLS without a certificate", load(t, tlsconf.Config{CAFile: cluster.CA}).ClientCredentials()},
		{"a certificate of another CA", load(t, tlsconf.Config{CertFile: other.ClientCert, KeyFile: other.ClientKey, CAFile: cluster.CA}).ClientCredentials()},
	} {
		conn, err := grpc.NewClient(n.RPCAddr(), grpc.WithTransportCredentials(tc.creds))
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = metapb.NewSequencerClient(conn).CommitWal(cctx, &metapb.CommitWalRequest{})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: CommitWal answered %v, want UNAVAILABLE (connection refused by the handshake)", tc.name, err)
		}
		_, err = metapb.NewSequencerClient(conn).Members(cctx, &metapb.MembersRequest{})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: Members answered %v, want UNAVAILABLE", tc.name, err)
		}
		cancel()
		conn.Close()

		// metagrpc with the same credentials fails too, and no stream was created.
		c, err := metagrpc.Dial(ctx, []string{n.RPCAddr()}, metagrpc.WithTransportCredentials(tc.creds),
			metagrpc.WithAttempts(2), metagrpc.WithReadyTimeout(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateStream(ctx, meta.StreamConfig{Name: "intruder", Partitions: 1}); !errors.Is(err, meta.ErrUnavailable) {
			t.Errorf("%s: CreateStream: %v, want ErrUnavailable", tc.name, err)
		}
		c.Close()
	}
	if _, _, err := n.GetStream(ctx, meta.DefaultNS, "intruder"); !errors.Is(err, meta.ErrStreamNotFound) {
		t.Fatalf("a refused caller created a stream: %v", err)
	}

	// The cluster's identity (the client certificate: another cert of the same CA) is served.
	ok := load(t, tlsconf.Config{CertFile: cluster.ClientCert, KeyFile: cluster.ClientKey, CAFile: cluster.CA})
	c, err := metagrpc.Dial(ctx, []string{n.RPCAddr()}, metagrpc.WithTransportCredentials(ok.ClientCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "orders", Partitions: 2})
	if err != nil {
		t.Fatalf("with the cluster's identity: %v", err)
	}
	now := time.Now().UnixMilli()
	res, err := c.CommitWal(ctx, benchCommit(2, "wal/standard/node-1/tls.wal", s.ID, now))
	if err != nil || len(res.BaseOffsets) != 2 || len(res.Status) != 0 {
		t.Fatalf("CommitWal with the cluster's identity: %+v, %v", res, err)
	}
	ms, err := c.(metagrpc.Admin).Members(ctx)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Members with the cluster's identity: %v, %v", ms, err)
	}
}

// TestTLSThreeVoters: voters with a cluster identity elect a leader over Raft on TLS,
// report their clocks to it, and a follower forwards a client's write to the leader.
func TestTLSThreeVoters(t *testing.T) {
	src, cluster, _ := clusterTLS(t)
	var cfgs []Config
	for _, id := range []string{"a", "b", "c"} {
		cfg := testConfig(t, t.TempDir())
		cfg.ID = id
		cfg.Bootstrap = false
		cfg.TLS = src
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 150*time.Millisecond
		cfgs = append(cfgs, cfg)
	}
	cfgs[0].Bootstrap = true
	cfgs[0].Peers = []Peer{{ID: "b", RaftAddr: cfgs[1].RaftAddr}, {ID: "c", RaftAddr: cfgs[2].RaftAddr}}
	var nodes []*Node
	for _, cfg := range cfgs {
		n := startNode(t, cfg)
		defer n.Close()
		nodes = append(nodes, n)
	}
	ctx := ctxT(t)
	var leader, follower *Node
	for leader == nil {
		if ctx.Err() != nil {
			t.Fatal("no leader over Raft on TLS")
		}
		for _, n := range nodes {
			if n.IsLeader() {
				leader = n
			} else {
				follower = n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := leader.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// Clock reports reach the leader: every voter's clock is fresh there.
	for {
		fresh := 0
		for _, c := range leader.clocks(time.Now().UnixMilli(), time.Now()) {
			if c.fresh {
				fresh++
			}
		}
		if fresh == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of 3 voters' clocks fresh at the leader", fresh)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ok := load(t, tlsconf.Config{CertFile: cluster.ClientCert, KeyFile: cluster.ClientKey, CAFile: cluster.CA})
	c, err := metagrpc.Dial(ctx, []string{follower.RPCAddr()}, metagrpc.WithTransportCredentials(ok.ClientCredentials()),
		metagrpc.WithoutLeaderHeader())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := follower.rt.forwarded.Load()
	if _, err := c.CreateStream(ctx, meta.StreamConfig{Name: "orders", Partitions: 1}); err != nil && !strings.Contains(err.Error(), "exists") {
		t.Fatalf("write through a follower: %v", err)
	}
	if follower.rt.forwarded.Load() == before {
		t.Fatal("the follower did not forward the write to the leader")
	}
	if _, _, err := leader.GetStream(ctx, meta.DefaultNS, "orders"); err != nil {
		t.Fatalf("the leader lacks the forwarded write: %v", err)
	}
}

// TestTLSRaftRefusesOutsiders: a voter with a cluster identity refuses Raft RPCs from a
// peer speaking plain TCP and from one presenting a certificate of another CA, and answers
// one presenting the cluster's.
func TestTLSRaftRefusesOutsiders(t *testing.T) {
	src, cluster, other := clusterTLS(t)
	cfg := testConfig(t, t.TempDir())
	cfg.TLS = src
	n := startNode(t, cfg)
	defer n.Close()
	target := raft.ServerAddress(n.RaftAddr())
	// vote asks for a vote in term; an outsider asks with a term and log far ahead, which a
	// voter that answered would follow (stepping down).
	vote := func(trans *raft.NetworkTransport, term uint64) error {
		defer trans.Close()
		var resp raft.RequestVoteResponse
		return trans.RequestVote("seq-1", target, &raft.RequestVoteRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(trans.LocalAddr())},
			Term:      term, LastLogIndex: term, LastLogTerm: term}, &resp)
	}
	quiet := hclog.NewNullLogger()
	plain, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 1, 2*time.Second, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := vote(plain, 1<<40); err == nil {
		t.Error("a plain-TCP Raft peer's RequestVote was answered")
	}
	foreign := load(t, tlsconf.Config{CertFile: other.Cert, KeyFile: other.Key, CAFile: cluster.CA})
	ft, err := newTLSTransport("127.0.0.1:0", nil, foreign, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := vote(ft, 1<<40); err == nil {
		t.Error("a Raft peer with a certificate of another CA was answered")
	}
	if !n.IsLeader() {
		t.Fatal("an outsider's vote request deposed the leader")
	}
	ct, err := newTLSTransport("127.0.0.1:0", nil, load(t, cluster.DevConfig()), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := vote(ct, 0); err != nil {
		t.Errorf("a Raft peer with the cluster's identity: %v", err)
	}
}
