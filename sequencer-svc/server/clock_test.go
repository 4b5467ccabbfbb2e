package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
	"google.golang.org/protobuf/proto"
)

// TestOutlierReelected: the voter an hour fast, made leader again and again, never
// stamps: commits keep succeeding, the state-machine clock stays true.
func TestOutlierReelected(t *testing.T) {
	nodes, offs := skewedCluster(t)
	leader := waitLeader(t, nodes)
	fast := nodes[(indexOf(nodes, leader)+1)%3]
	offs[indexOf(nodes, fast)].Store(int64(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.RPCAddr())
	}
	c, err := metagrpc.Dial(ctx, addrs)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "clock", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	obs := make(chan raft.Observation, 16)
	o := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		lo, ok := o.Data.(raft.LeaderObservation)
		return ok && string(lo.LeaderID) == fast.cfg.ID
	})
	fast.raft.RegisterObserver(o)
	defer fast.raft.DeregisterObserver(o)
	led := 0
	for round := range 3 {
		cur := waitLeader(t, nodes)
		if cur != fast {
			if err := cur.raft.LeadershipTransferToServer(raft.ServerID(fast.cfg.ID), raft.ServerAddress(fast.RaftAddr())).Error(); err != nil {
				t.Logf("round %d: transfer to the fast voter: %v", round, err)
			}
		}
		for i := range 5 {
			commitUntilOK(t, ctx, c, s.ID, fmt.Sprintf("wal/%d-%d", round, i), 5*time.Second)
		}
	drain:
		for {
			select {
			case <-obs:
				led++
			default:
				break drain
			}
		}
		for _, n := range nodes {
			if ms, now := n.fsm.ClockMs(), time.Now().Add(DefaultConfig().MaxClockSkew).UnixMilli(); ms > now {
				t.Fatalf("round %d: voter %s: state-machine clock %d ms ahead of the true clock", round, n.cfg.ID, ms-now)
			}
		}
	}
	if led == 0 {
		t.Fatal("the fast voter never led: the test proved nothing")
	}
	t.Logf("the fast voter led %d times", led)
}

// TestFastFollowerClock: a follower an hour fast changes nothing: the leader keeps
// leading and stamps with its own clock.
func TestFastFollowerClock(t *testing.T) {
	nodes, offs := skewedCluster(t)
	leader := waitLeader(t, nodes)
	f := followersOf(nodes, leader)[0]
	offs[indexOf(nodes, f)].Store(int64(time.Hour))
	time.Sleep(3 * DefaultConfig().ClockReportInterval)
	ctx := ctxT(t)
	lc := NewLocalClient(leader)
	s, err := lc.CreateStream(ctx, meta.StreamConfig{Name: "clock", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := commitOne(ctx, lc, s.ID, fmt.Sprintf("wal/%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if !leader.IsLeader() {
		t.Fatal("the leader handed over because a follower's clock is fast")
	}
	if ms, now := leader.fsm.ClockMs(), time.Now().UnixMilli(); ms > now+DefaultConfig().MaxClockSkew.Milliseconds() {
		t.Fatalf("state-machine clock %d ms ahead", ms-now)
	}
}

// TestLeaderWithoutClockReports: a leader that hears no clock reports (its followers'
// reports cannot reach it) stamps nothing: it answers NotLeader (not proposed) after
// LeaderWait and hands leadership over, and the next leader serves. (Through the routing
// clients the write would be forwarded to the next leader at once.)
func TestLeaderWithoutClockReports(t *testing.T) {
	nodes, _ := skewedCluster(t)
	leader := waitLeader(t, nodes)
	leader.refuseClockReports.Store(true)
	// Reports older than the freshness window: as if none came since.
	leader.clk.mu.Lock()
	for id, r := range leader.clk.reports {
		r.at = r.at.Add(-time.Hour)
		leader.clk.reports[id] = r
	}
	leader.clk.mu.Unlock()
	ctx := ctxT(t)
	start := time.Now()
	err := leader.CreateNamespace(ctx, "ns") // the Node method: no forwarding
	var nl *meta.NotLeaderError
	if !errors.As(err, &nl) {
		t.Fatalf("leader without clock reports: %v", err)
	}
	if d := time.Since(start); d < leader.cfg.LeaderWait || d > 3*leader.cfg.LeaderWait {
		t.Errorf("answered after %s, want about LeaderWait (%s)", d, leader.cfg.LeaderWait)
	}
	t.Logf("answer after %s: %v", time.Since(start), err)
	next := waitLeader(t, nodes)
	if next == leader {
		t.Fatal("the leader without clock reports kept leading")
	}
	if err := NewLocalClient(next).CreateNamespace(ctx, "ns"); err != nil {
		t.Fatal(err)
	}
}

// TestClockReportRefusesNonVoters: the map of reports is bounded by the configuration.
func TestClockReportRefusesNonVoters(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	defer n.Close()
	svc := &clockService{n: n}
	if _, err := svc.Report(context.Background(), &metapb.ClockReport{Id: "stranger", WallUs: time.Now().UnixMicro()}); err == nil {
		t.Fatal("report from a non-voter accepted")
	}
	if _, err := svc.Report(context.Background(), &metapb.ClockReport{Id: n.cfg.ID, WallUs: 0}); err == nil {
		t.Fatal("report without a clock accepted")
	}
	if len(n.clk.reports) != 0 {
		t.Fatalf("reports kept: %v", n.clk.reports)
	}
}

// TestJudge: the guard's rule for 1, 3 and 5 voters.
func TestJudge(t *testing.T) {
	if DefaultConfig().MaxClockSkew != allowedSkew {
		t.Fatalf("allowedSkew %s, default MaxClockSkew %s", allowedSkew, DefaultConfig().MaxClockSkew)
	}
	const skew = 1000
	const now = 1_000_000_000
	vc := func(ms ...int64) []voterClock { // first is self; -1: no fresh report
		var out []voterClock
		for i, m := range ms {
			out = append(out, voterClock{id: raft.ServerID(fmt.Sprint(i)), ms: m, self: i == 0, fresh: m >= 0})
		}
		return out
	}
	h := int64(time.Hour / time.Millisecond)
	cases := []struct {
		name             string
		own              int64
		clocks           []voterClock
		ok, sure, behind bool
		stamp            int64
		target           string
	}{
		{"one voter", now + h, vc(now + h), true, true, false, now + h, ""},
		{"3 in sync", now, vc(now, now-5, now-3), true, true, false, now, "2"},
		{"3, follower fast", now, vc(now, now+h, now-3), true, true, false, now, "2"},
		{"3, follower slow", now, vc(now, now-h, now-3), true, true, false, now, "2"},
		{"3, leader fast", now + h, vc(now+h, now, now-3), false, true, false, 0, "1"},
		{"3, leader within skew", now + 900, vc(now+900, now, now-3), true, true, false, now + 900, "1"},
		{"3, leader slow", now - h, vc(now-h, now, now-3), true, true, true, now - 3, "2"},
		{"3, leader fast, one report", now + h, vc(now+h, now, -1), false, true, false, 0, "1"},
		{"3, no reports", now, vc(now, -1, -1), false, false, false, 0, "1"},
		{"5, leader fast", now + h, vc(now+h, now, now, now-1, now-2), false, true, false, 0, "1"},
		{"5, leader and one follower fast", now + h, vc(now+h, now+h, now, now-1, now-2), false, true, false, 0, "2"},
		{"5, three fast", now + h, vc(now+h, now+h, now+h-1, now-1, now-2), true, true, false, now + h, "2"},
		{"5, two reports", now, vc(now, now, now, -1, -1), true, true, false, now, "1"},
		{"5, one report", now, vc(now, now, -1, -1, -1), false, false, false, 0, "1"},
	}
	for _, c := range cases {
		v := judge(c.own, c.clocks, skew)
		if v.ok != c.ok || v.sure != c.sure || v.behind != c.behind || (c.ok && v.stamp != c.stamp) || string(v.target.id) != c.target {
			t.Errorf("%s: ok %v sure %v behind %v stamp %d target %q; want %v %v %v %d %q",
				c.name, v.ok, v.sure, v.behind, v.stamp-now, v.target.id, c.ok, c.sure, c.behind, c.stamp-now, c.target)
		}
	}
}

// FuzzClockReport: any bytes a peer sends as a ClockReport either fail to decode or are
// recorded or refused by clockBook.record with an error; the book never holds more than
// one report per voter of the configuration.
func FuzzClockReport(f *testing.F) {
	for _, r := range []*metapb.ClockReport{{Id: "a", WallUs: 1}, {Id: "b", WallUs: time.Now().UnixMicro()}, {Id: "x", WallUs: -5}, {}} {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	servers := []raft.Server{{ID: "a", Suffrage: raft.Voter}, {ID: "b", Suffrage: raft.Voter}, {ID: "c", Suffrage: raft.Nonvoter}}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r metapb.ClockReport
		if proto.Unmarshal(data, &r) != nil {
			return
		}
		var b clockBook
		err := b.record(raft.ServerID(r.GetId()), r.GetWallUs(), time.Now(), servers)
		voter := r.GetId() == "a" || r.GetId() == "b"
		if (err == nil) != (voter && r.GetWallUs() > 0) {
			t.Fatalf("record(%q, %d) = %v", r.GetId(), r.GetWallUs(), err)
		}
		if len(b.reports) > 2 {
			t.Fatalf("%d reports", len(b.reports))
		}
	})
}

// TestConfigClock: the clock settings are validated, and ClockOffset shifts Now.
func TestConfigClock(t *testing.T) {
	ok := DefaultConfig()
	ok.DataDir = t.TempDir()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"skew 0":            func(c *Config) { c.MaxClockSkew = 0 },
		"skew 15m":          func(c *Config) { c.MaxClockSkew = meta.StaleAfter },
		"report interval":   func(c *Config) { c.ClockReportInterval = 0 },
		"no rpc, peers":     func(c *Config) { c.DisableRPC, c.Peers = true, []Peer{{ID: "b", RaftAddr: "127.0.0.1:1"}} },
		"no rpc, joining":   func(c *Config) { c.DisableRPC, c.Join = true, []string{"127.0.0.1:1"} },
		"lease > heartbeat": func(c *Config) { c.LeaderLeaseTimeout = 2 * c.HeartbeatTimeout },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	c := ok
	c.ClockOffset = time.Hour
	c.fillRuntime()
	if d := time.Until(c.Now()); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("ClockOffset 1h: Now is %s ahead", d)
	}
}
