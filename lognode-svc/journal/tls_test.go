package journal

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/tlsconf"
)

func identity(t *testing.T, f tlsconf.DevFiles) *tlsconf.Source {
	src, err := tlsconf.Load(tlsconf.Config{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA, CheckInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestMuxTLS: with the cluster identity, members of one CA form the journal and forward to
// each other; a node with another CA's certificate is refused and cannot append.
func TestMuxTLS(t *testing.T) {
	dir := t.TempDir()
	good, err := tlsconf.GenerateDev(filepath.Join(dir, "good"), nil)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := tlsconf.GenerateDev(filepath.Join(dir, "bad"), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := identity(t, good)
	var hosts []*Host
	var voters []raft.Server
	var muxes []*Mux
	for i := 0; i < 4; i++ {
		src := id
		if i == 3 {
			src = identity(t, bad)
		}
		mux, err := ListenMuxTLS("127.0.0.1:0", "", src.ServerConfig(), src.PeerClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHost(HostConfig{NodeID: fmt.Sprintf("n%d", i), Dir: filepath.Join(dir, fmt.Sprintf("n%d", i)), Mux: mux,
			Member: Config{NoSync: true, LogOutput: io.Discard}, RetryFor: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close(); mux.Close() })
		hosts, muxes = append(hosts, h), append(muxes, mux)
		if i < 3 {
			voters = append(voters, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i)), Address: mux.MemberAddr("j0")})
		}
	}
	for i := 0; i < 3; i++ {
		if _, err := hosts[i].Start("j0", voters, true); err != nil {
			t.Fatal(err)
		}
	}
	hosts[3].Know("j0", voters)
	ctx := context.Background()
	for i := 0; i < 3; i++ { // through every member: two of them forward over TLS
		if r, err := hosts[i].Append(ctx, "j0", app(t, p0, meta.ChunkProducer{ID: -1}, "tls", 1)); err != nil || r.Base != int64(i) {
			t.Fatalf("append through member %d: %+v %v", i, r, err)
		}
	}
	_, err = hosts[3].Append(ctx, "j0", app(t, p0, meta.ChunkProducer{ID: -1}, "intruder", 1))
	if err == nil {
		t.Fatal("a node of another CA appended to the journal")
	}
	t.Logf("the other CA's node: %v", err)
	if n := hosts[0].Member("j0").Next(p0); n != 3 {
		t.Fatalf("next offset %d, want 3", n)
	}
	if _, err := ListenMuxTLS("127.0.0.1:0", "", id.ServerConfig(), nil); err == nil {
		t.Fatal("a mux with a server TLS configuration and no client one")
	}
}
