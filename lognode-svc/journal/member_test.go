package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
)

// cluster is three members of journal "j1", each with its own mux on 127.0.0.1.
type cluster struct {
	t       testing.TB
	dirs    []string
	muxes   []*Mux
	members []*Member
	voters  []raft.Server
	noSync  bool
}

func newCluster(t testing.TB, noSync bool) *cluster {
	c := &cluster{t: t, noSync: noSync}
	base := t.TempDir()
	for i := 0; i < 3; i++ {
		mux, err := ListenMux("127.0.0.1:0", "")
		if err != nil {
			t.Fatal(err)
		}
		c.muxes = append(c.muxes, mux)
		c.dirs = append(c.dirs, filepath.Join(base, fmt.Sprintf("m%d", i)))
		c.voters = append(c.voters, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprintf("n%d", i)), Address: mux.MemberAddr("j1")})
	}
	c.members = make([]*Member, 3)
	for i := range c.members {
		c.start(i)
	}
	t.Cleanup(func() {
		for i, m := range c.members {
			if m != nil {
				m.Close()
			}
			c.muxes[i].Close()
		}
	})
	return c
}

func (c *cluster) start(i int) {
	m, err := Open(Config{Journal: "j1", ID: fmt.Sprintf("n%d", i), Dir: c.dirs[i], Mux: c.muxes[i], Bootstrap: true,
		Voters: c.voters, NoSync: c.noSync, LogOutput: io.Discard, SnapshotThreshold: 64, TrailingLogs: 16})
	if err != nil {
		c.t.Fatal(err)
	}
	c.members[i] = m
}

func (c *cluster) stop(i int) {
	if err := c.members[i].Close(); err != nil {
		c.t.Fatal(err)
	}
	c.members[i] = nil
}

// leader waits for a leader among the running members.
func (c *cluster) leader() int {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, m := range c.members {
			if m != nil && m.IsLeader() {
				return i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("no leader within 10 s")
	return -1
}

// append retries on the current leader until the append is answered (not-leader and
// unknown outcomes retried, as a node forwarding a produce does).
func (c *cluster) append(a Append) (Result, error) {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		r, err := c.members[c.leader()].Append(ctx, a)
		cancel()
		if err == nil || !(errors.Is(err, raft.ErrNotLeader) || errors.Is(err, ErrCommitUnknown) || errors.Is(err, context.DeadlineExceeded)) || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitNext(t testing.TB, m *Member, p Partition, next int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.WaitOffset(ctx, p, next-1); err != nil {
		t.Fatalf("member %s: partition at %d, want %d: %v", m.ID(), m.Next(p), next, err)
	}
}

func TestJournalProduceAndFollowerRead(t *testing.T) {
	c := newCluster(t, true)
	l := c.leader()
	var want []string
	for i := 0; i < 5; i++ {
		r, err := c.append(app(t, p0, meta.ChunkProducer{ID: -1}, fmt.Sprintf("b%d", i), 2))
		if err != nil || r.Base != int64(2*i) {
			t.Fatalf("append %d: %+v %v", i, r, err)
		}
		want = append(want, fmt.Sprintf("%d:b%d-0", 2*i, i), fmt.Sprintf("%d:b%d-1", 2*i+1, i))
	}
	f := (l + 1) % 3
	waitNext(t, c.members[f], p0, 10)
	rr, err := c.members[f].Read(p0, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, rr.Batches); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower read %v, want %v", got, want)
	}
	// A follower refuses appends, naming the leader.
	_, err = c.members[f].Append(context.Background(), app(t, p0, meta.ChunkProducer{ID: -1}, "x", 1))
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderID != fmt.Sprintf("n%d", l) || !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("append on a follower: %v", err)
	}
	// Read-your-writes through another member: the commit's index is the token.
	r, err := c.append(app(t, p1, meta.ChunkProducer{ID: -1}, "ryw", 1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.members[f].WaitApplied(ctx, r.Index); err != nil {
		t.Fatal(err)
	}
	if rr, err := c.members[f].Read(p1, r.Base, 1<<20); err != nil || values(t, rr.Batches)[0] != "0:ryw-0" {
		t.Fatalf("read-your-writes on a follower: %+v %v", rr, err)
	}
}

func TestJournalLeaderFailoverAndCatchUp(t *testing.T) {
	c := newCluster(t, false)
	prod := meta.ChunkProducer{ID: 11, Epoch: 0}
	seq := int32(0)
	next := int64(0)
	produce := func(tag string) {
		t.Helper()
		p := prod
		p.BaseSequence = seq
		// c.append retries an attempt whose outcome was unknown (a timeout on a loaded
		// machine): the retry of one that committed is answered as a duplicate at the
		// same base, which is the idempotence asked for.
		r, err := c.append(app(t, p0, p, tag, 3))
		if err != nil || r.Base != next {
			t.Fatalf("%s: %+v %v, want base %d", tag, r, err, next)
		}
		seq += 3
		next += 3
	}
	for i := 0; i < 4; i++ {
		produce(fmt.Sprintf("pre%d", i))
	}
	old := c.leader()
	c.stop(old)
	start := time.Now()
	produce("after-kill")
	t.Logf("produce resumed %v after the leader stopped", time.Since(start))
	// An idempotent retry of the last chunk before the kill, across the leader change.
	p := prod
	p.BaseSequence = seq - 6
	if r, err := c.append(app(t, p0, p, "pre3", 3)); err != nil || !r.Duplicate || r.Base != next-6 {
		t.Fatalf("retry across the leader change: %+v %v, want duplicate at %d", r, err, next-6)
	}
	for i := 0; i < 100; i++ { // past the snapshot threshold: the restarted member needs a snapshot or the log
		produce(fmt.Sprintf("more%d", i))
	}
	// Compact the leader's log: the restarted member catches up from a snapshot install.
	if err := c.members[c.leader()].Snapshot(); err != nil {
		t.Fatal(err)
	}
	c.start(old)
	waitNext(t, c.members[old], p0, next)
	rr, err := c.members[old].Read(p0, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	got := values(t, rr.Batches)
	if int64(len(got)) != next {
		t.Fatalf("restarted member holds %d records, want %d", len(got), next)
	}
	for i, v := range got {
		if want := fmt.Sprintf("%d:", i); v[:len(want)] != want {
			t.Fatalf("record %d is %s: offsets not dense", i, v)
		}
	}
	leaderRead, _ := c.members[c.leader()].Read(p0, 0, 1<<30)
	if !reflect.DeepEqual(values(t, leaderRead.Batches), got) {
		t.Fatal("the restarted member's records differ from the leader's")
	}
}

func TestJournalRestartAllFromSnapshot(t *testing.T) {
	c := newCluster(t, true)
	for i := 0; i < 80; i++ {
		if _, err := c.append(app(t, p0, meta.ChunkProducer{ID: 5, BaseSequence: int32(i)}, "v", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.members[c.leader()].Snapshot(); err != nil {
		t.Fatal(err)
	}
	for i := range c.members {
		c.stop(i)
	}
	for i := range c.members {
		c.start(i)
	}
	r, err := c.append(app(t, p0, meta.ChunkProducer{ID: 5, BaseSequence: 79}, "v", 1))
	if err != nil || !r.Duplicate || r.Base != 79 {
		t.Fatalf("retry after a full restart: %+v %v", r, err)
	}
	r, err = c.append(app(t, p0, meta.ChunkProducer{ID: 5, BaseSequence: 80}, "v", 1))
	if err != nil || r.Base != 80 {
		t.Fatalf("append after a full restart: %+v %v", r, err)
	}
}

func TestJournalFullAndTooLarge(t *testing.T) {
	mux, err := ListenMux("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	m, err := Open(Config{Journal: "solo", ID: "a", Dir: t.TempDir(), Mux: mux, Bootstrap: true, NoSync: true, LogOutput: io.Discard,
		Voters: []raft.Server{{ID: "a", Address: mux.MemberAddr("solo")}}, MaxRetainedBytes: 200, MaxEntryBytes: 150})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for !m.IsLeader() {
		time.Sleep(10 * time.Millisecond)
	}
	ctx := context.Background()
	if _, err := m.Append(ctx, app(t, p0, meta.ChunkProducer{ID: -1}, "v", 20)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized append: %v", err)
	}
	var full error
	for i := 0; i < 10 && full == nil; i++ {
		_, full = m.Append(ctx, app(t, p0, meta.ChunkProducer{ID: -1}, "v", 1))
	}
	if !errors.Is(full, ErrJournalFull) {
		t.Fatalf("appends past the retained bound: %v", full)
	}
	if r := m.Stats().Retained; r < 200 || r > 200+150 {
		t.Fatalf("retained %d, bound 200 + one entry", r)
	}
}
