package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestQuorumLeaderZone: three log nodes in placement mode, in zones az-a, az-b, az-c,
// make one journal. A quorum stream created over HTTP with the zone of a member that does
// not lead (leader_zone) ends with the journal's leadership on that member, and produce
// and fetch work through every node after the hand-over; a PATCH of the hint to a third
// zone moves the leadership again (after the hold), and the HTTP answers show the hint.
func TestQuorumLeaderZone(t *testing.T) {
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := &coord.Registry{Store: store}
	mc := servertest.Client(t, func(c *server.Config) {
		c.Placement = server.PlacementConfig{Nodes: registryNodes(reg), Interval: 100 * time.Millisecond}
	})
	c := &placedCluster{t: t, mc: mc, reg: reg, bucket: objstore.NewMem(), dir: t.TempDir(), nodes: map[string]*node.Node{}, urls: map[string]string{}}
	zoneOf := map[string]string{}
	for i, zone := range []string{"az-a", "az-b", "az-c"} {
		id := fmt.Sprintf("z-%d", i)
		zoneOf[id] = zone
		c.startPlaced(id, zone, func(q *node.QuorumConfig) { q.LeaderZoneHold = 300 * time.Millisecond })
	}
	c.waitJournal("journal of three", func(j meta.Journal) bool { return len(j.Members) == 3 })
	leader := func() string {
		for id, n := range c.nodes {
			if n.QuorumLeader() {
				return id
			}
		}
		return ""
	}
	waitLeader := func(what string, ok func(string) bool) (string, time.Duration) {
		t.Helper()
		start := time.Now()
		for deadline := start.Add(30 * time.Second); ; {
			if id := leader(); id != "" && ok(id) {
				return id, time.Since(start)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: leader %q", what, leader())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	first, _ := waitLeader("a first leader", func(string) bool { return true })
	hint := ""
	for id, z := range zoneOf {
		if id != first {
			hint = z
			break
		}
	}
	a := do(t, "POST", c.urls[first]+"/v1/namespaces/default/streams", "application/json", fmt.Sprintf(`{"name":"q","class":"quorum","leader_zone":%q}`, hint), "")
	var st streamapi.Stream
	if a.status != 201 || json.Unmarshal(a.body, &st) != nil || st.LeaderZone != hint {
		t.Fatalf("create a quorum stream with leader_zone %s: %d %s", hint, a.status, a.body)
	}
	// A hint on a standard stream is refused, naming the field.
	if a := do(t, "POST", c.urls[first]+"/v1/namespaces/default/streams", "application/json", `{"name":"s","leader_zone":"az-a"}`, ""); a.status != 400 ||
		!strings.Contains(string(a.body), `"invalid_argument"`) || !strings.Contains(string(a.body), "leader_zone") {
		t.Fatalf("a standard stream with leader_zone: %d %s", a.status, a.body)
	}
	now, took := waitLeader("leadership in the hinted zone", func(id string) bool { return zoneOf[id] == hint })
	t.Logf("leader %s (%s) handed the journal to %s (%s) %v after the stream was created", first, zoneOf[first], now, hint, took.Round(time.Millisecond))
	// It stays there: the hint holds and the rule has nothing to move.
	time.Sleep(time.Second)
	if id := leader(); id != now {
		t.Fatalf("leadership moved on to %q without a change of hint", id)
	}
	// Produce and fetch through every node after the hand-over.
	for i := 0; i < 9; i++ {
		id := fmt.Sprintf("z-%d", i%3)
		if p := produceQ(t, c.urls[id], fmt.Sprintf(`{"records":[{"value":"v%d"}]}`, i)); len(p.Offsets) != 1 || p.Offsets[0].Offset != int64(i) {
			t.Fatalf("produce %d through %s: %+v", i, id, p)
		}
	}
	for id, u := range c.urls {
		f := fetchQ(t, u, "offset=0&max_wait_ms=2000&token="+produceQ(t, c.urls[now], `{"records":[{"value":"tail"}]}`).Token)
		if len(f.Records) < 9 || string(f.Records[8].Value) != `"v8"` {
			t.Fatalf("fetch through %s: %+v", id, f)
		}
	}
	// A new hint: the leadership follows it.
	third := ""
	for id, z := range zoneOf {
		if id != first && id != now {
			third = z
		}
	}
	a = do(t, "PATCH", c.urls[first]+"/v1/namespaces/default/streams/q", "application/json", fmt.Sprintf(`{"leader_zone":%q}`, third), "")
	if a.status != 200 || !strings.Contains(string(a.body), fmt.Sprintf(`"leader_zone":%q`, third)) {
		t.Fatalf("patch the hint: %d %s", a.status, a.body)
	}
	next, took := waitLeader("leadership in the new zone", func(id string) bool { return zoneOf[id] == third })
	t.Logf("after the hint changed to %s, %s leads (%v)", third, next, took.Round(time.Millisecond))
	if p := produceQ(t, c.urls[first], `{"records":[{"value":"after"}]}`); len(p.Offsets) != 1 || p.Offsets[0].Offset != 12 { // 9, then a tail per node

		t.Fatalf("produce after the second hand-over: %+v", p)
	}
	if g := do(t, "GET", c.urls[next]+"/v1/namespaces/default/streams", "", "", ""); !strings.Contains(string(g.body), fmt.Sprintf(`"leader_zone":%q`, third)) {
		t.Fatalf("list: %s", g.body)
	}
}

// TestQuorumLeaderZoneGRPC: gRPC CreateStream takes leader_zone on a quorum stream
// (GetStream and ListStreams answer it) and refuses it on a standard one with
// INVALID_ARGUMENT naming the field; so does UpdateStream.
func TestQuorumLeaderZoneGRPC(t *testing.T) {
	nodes, _ := quorumNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gc, err := streamapi.DialGRPC(nodes[0].GRPCAddr(), []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	st, err := gc.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "q", Class: "quorum", LeaderZone: "use1-az1"})
	if err != nil || st.LeaderZone != "use1-az1" {
		t.Fatalf("create: %+v %v", st, err)
	}
	if st, err := gc.GetStream(ctx, "default", "q"); err != nil || st.LeaderZone != "use1-az1" {
		t.Fatalf("get: %+v %v", st, err)
	}
	if l, err := gc.ListStreams(ctx, "default"); err != nil || len(l) != 1 || l[0].LeaderZone != "use1-az1" {
		t.Fatalf("list: %+v %v", l, err)
	}
	invalid := func(what string, err error) {
		t.Helper()
		if err == nil || streamapi.ErrorCode(err) != streamapi.CodeInvalidArgument || !strings.Contains(err.Error(), "leader_zone") {
			t.Fatalf("%s: %v (code %q), want INVALID_ARGUMENT naming leader_zone", what, err, streamapi.ErrorCode(err))
		}
	}
	_, err = gc.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "s", LeaderZone: "use1-az1"})
	invalid("create a standard stream with a leader zone", err)
	if _, err := gc.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "s"}); err != nil {
		t.Fatal(err)
	}
	z := "use1-az2"
	_, err = gc.PatchStream(ctx, "default", "s", streamapi.PatchStreamRequest{LeaderZone: &z})
	invalid("update a standard stream's leader zone", err)
	if st, err := gc.PatchStream(ctx, "default", "q", streamapi.PatchStreamRequest{LeaderZone: &z}); err != nil || st.LeaderZone != z {
		t.Fatalf("update: %+v %v", st, err)
	}
}
