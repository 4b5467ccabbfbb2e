package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
)

type hosts struct {
	t      *testing.T
	hosts  []*Host
	muxes  []*Mux
	voters []raft.Server
}

// newHosts starts n hosts; the first three run members of journal j0.
func newHosts(t *testing.T, n int) *hosts {
	hs := &hosts{t: t}
	base := t.TempDir()
	for i := 0; i < n; i++ {
		mux, err := ListenMux("127.0.0.1:0", "")
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHost(HostConfig{NodeID: fmt.Sprintf("n%d", i), Dir: filepath.Join(base, fmt.Sprintf("n%d", i)), Mux: mux,
			Member: Config{NoSync: true, LogOutput: io.Discard}})
		if err != nil {
			t.Fatal(err)
		}
		hs.hosts, hs.muxes = append(hs.hosts, h), append(hs.muxes, mux)
		if i < 3 {
			hs.voters = append(hs.voters, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i)), Address: mux.MemberAddr("j0")})
		}
	}
	for i, h := range hs.hosts {
		if i < 3 {
			if _, err := h.Start("j0", hs.voters, true); err != nil {
				t.Fatal(err)
			}
		} else {
			h.Know("j0", hs.voters)
		}
	}
	t.Cleanup(func() {
		for i, h := range hs.hosts {
			h.Close()
			hs.muxes[i].Close()
		}
	})
	return hs
}

func (hs *hosts) leader() int {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i := 0; i < 3; i++ {
			if m := hs.hosts[i].Member("j0"); m != nil && m.IsLeader() {
				return i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	hs.t.Fatal("no leader")
	return -1
}

func TestHostForwardsToTheLeader(t *testing.T) {
	hs := newHosts(t, 4)
	l := hs.leader()
	ctx := context.Background()
	next := int64(0)
	// From the leader's node, a follower's node and a node with no member of the journal.
	for _, i := range []int{l, (l + 1) % 3, 3} {
		r, err := hs.hosts[i].Append(ctx, "j0", app(t, p0, meta.ChunkProducer{ID: -1}, fmt.Sprintf("from%d", i), 2))
		if err != nil || r.Base != next || r.Index == 0 {
			t.Fatalf("append from node %d: %+v %v, want base %d", i, r, err, next)
		}
		next += 2
	}
	// A refusal crosses the hop as its sentinel.
	_, err := hs.hosts[3].Append(ctx, "j0", app(t, p0, meta.ChunkProducer{ID: 4, BaseSequence: 3}, "x", 1))
	if !errors.Is(err, meta.ErrOutOfOrderSequence) {
		t.Fatalf("out-of-order append forwarded: %v", err)
	}
	if _, err := hs.hosts[3].Append(ctx, "nope", app(t, p0, meta.ChunkProducer{ID: -1}, "x", 1)); !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("append to an unknown journal: %v", err)
	}
}

func TestHostAppendSurvivesLeaderLoss(t *testing.T) {
	hs := newHosts(t, 4)
	ctx := context.Background()
	prod := meta.ChunkProducer{ID: 8}
	r, err := hs.hosts[3].Append(ctx, "j0", app(t, p0, prod, "a", 2))
	if err != nil {
		t.Fatal(err)
	}
	l := hs.leader()
	if err := hs.hosts[l].Stop("j0"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	// The retry of the first chunk and the next one, from the node without a member: both
	// wait out the election inside Append.
	dup, err := hs.hosts[3].Append(ctx, "j0", app(t, p0, prod, "a", 2))
	if err != nil || !dup.Duplicate || dup.Base != r.Base {
		t.Fatalf("retry across the election: %+v %v", dup, err)
	}
	prod.BaseSequence = 2
	nx, err := hs.hosts[(l+1)%3].Append(ctx, "j0", app(t, p0, prod, "b", 1))
	if err != nil || nx.Base != 2 {
		t.Fatalf("append after the election: %+v %v", nx, err)
	}
	t.Logf("appends resumed %v after the leader stopped", time.Since(t0))
}

func TestHostRetryOfACommittedRequestWritesNothing(t *testing.T) {
	hs := newHosts(t, 4)
	ctx := context.Background()
	a := app(t, p0, meta.ChunkProducer{ID: -1}, "r", 2)
	a.RequestID = 77
	first, err := hs.hosts[3].Append(ctx, "j0", a)
	if err != nil {
		t.Fatal(err)
	}
	// The same request again, as after a forward whose answer was lost.
	again, err := hs.hosts[(hs.leader()+1)%3].Append(ctx, "j0", a)
	if err != nil || again.Base != first.Base {
		t.Fatalf("retry: %+v %v, first %+v", again, err, first)
	}
	if n := hs.hosts[hs.leader()].Member("j0").Next(p0); n != 2 {
		t.Fatalf("next offset %d after a retried request, want 2", n)
	}
}

// lossyConn loses the answer of the first request on it: its first Read waits for the
// server to act on the request, then fails as a broken connection does.
type lossyConn struct {
	net.Conn
	once *sync.Once
}

func (c lossyConn) Read(b []byte) (int, error) {
	lost := false
	c.once.Do(func() { lost = true })
	if lost {
		time.Sleep(300 * time.Millisecond) // the leader commits meanwhile
		c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return c.Conn.Read(b)
}

func TestHostForwardWithLostAnswerWritesOnce(t *testing.T) {
	hs := newHosts(t, 4)
	ctx := context.Background()
	h := hs.hosts[3] // no member: every append is forwarded
	var once sync.Once
	h.client.Transport = &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		c, err := h.cfg.Mux.dial(ctx, addr, forwardService, 5*time.Second)
		if err != nil {
			return nil, err
		}
		return lossyConn{Conn: c, once: &once}, nil
	}}
	// Not an idempotent producer: only the request id keeps the retry from writing twice.
	r, err := h.Append(ctx, "j0", app(t, p0, meta.ChunkProducer{ID: -1}, "once", 1))
	if err != nil || r.Base != 0 {
		t.Fatalf("append whose first answer was lost: %+v %v", r, err)
	}
	m := hs.hosts[hs.leader()].Member("j0")
	if n := m.Next(p0); n != 1 {
		t.Fatalf("next offset %d: the retry wrote the record again", n)
	}
}

// TestHostUnknownOutcomeStaysUnknown: a forward whose answer was lost, then no leader
// reachable until the retries run out: the append may have committed, so its error must
// say the outcome is unknown, not that it was refused (the caller would answer "nothing
// written").
func TestHostUnknownOutcomeStaysUnknown(t *testing.T) {
	hs := newHosts(t, 4)
	ctx := context.Background()
	h := hs.hosts[3] // no member: every append is forwarded
	h.cfg.RetryFor = 500 * time.Millisecond
	var once sync.Once
	lossy := &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		c, err := h.cfg.Mux.dial(ctx, addr, forwardService, 5*time.Second)
		if err != nil {
			return nil, err
		}
		return lossyConn{Conn: c, once: &once}, nil
	}}
	var appends atomic.Int32
	h.client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasPrefix(r.URL.Path, "/append/") && appends.Add(1) > 1 {
			// The leader's node is gone: its connection is refused.
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		return lossy.RoundTrip(r)
	})
	_, err := h.Append(ctx, "j0", app(t, p0, meta.ChunkProducer{ID: -1}, "lost", 1))
	if !errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("append whose answer was lost, then no leader reachable: %v, want ErrCommitUnknown", err)
	}
	if n := hs.hosts[hs.leader()].Member("j0").Next(p0); n > 1 {
		t.Fatalf("next offset %d: written more than once", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
