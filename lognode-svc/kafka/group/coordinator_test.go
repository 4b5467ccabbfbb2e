package group

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
)

// newCoord starts the real in-process sequencer with streams topics and a coordinator
// over it (a second coordinator on the same sequencer: coordOn).
func newCoord(t *testing.T, topics map[string]int32, opts ...func(*Config)) (*Coordinator, meta.Client) {
	return newCoordTB(t, topics, opts...)
}

func newCoordF(f *testing.F) (*Coordinator, meta.Client) {
	return newCoordTB(f, map[string]int32{"orders": 2}, func(cfg *Config) { cfg.MaxGroups, cfg.MaxMembers = 50, 20 })
}

func newCoordTB(t testing.TB, topics map[string]int32, opts ...func(*Config)) (*Coordinator, meta.Client) {
	t.Helper()
	mc := server.NewLocalClient(servertest.Start(t))
	for name, n := range topics {
		if _, err := mc.CreateStream(context.Background(), meta.StreamConfig{Name: name, Partitions: n}); err != nil {
			t.Fatal(err)
		}
	}
	return coordOn(t, mc, opts...), mc
}

func coordOn(t testing.TB, mc meta.Client, opts ...func(*Config)) *Coordinator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Meta = mc
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.MinSessionTimeout = 50 * time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func do[R kmsg.Response](t *testing.T, c *Coordinator, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := c.Handle(ctx, meta.DefaultNS, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(R)
}

func code(t *testing.T, got int16, want *kerr.Error) {
	t.Helper()
	if got != want.Code && !(want == nil && got == 0) {
		t.Fatalf("error code %v, want %v", kerr.ErrorForCode(got), want)
	}
}

var none *kerr.Error // NONE

func codeOK(t *testing.T, got int16) {
	t.Helper()
	if got != 0 {
		t.Fatalf("error code %v, want NONE", kerr.ErrorForCode(got))
	}
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version, m.Topics = 3, topics
	return m.AppendTo(nil)
}

func joinReq(group, member string, session time.Duration, instance *string, topics ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.MemberID, r.InstanceID = 9, group, member, instance
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = int32(session.Milliseconds()), int32(session.Milliseconds())
	r.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", consumerMeta(topics...)
	r.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return r
}

// join joins as a new dynamic member (through MEMBER_ID_REQUIRED) and waits for the
// rebalance to complete.
func join(t *testing.T, c *Coordinator, group string, session time.Duration, topics ...string) *kmsg.JoinGroupResponse {
	t.Helper()
	r := do[*kmsg.JoinGroupResponse](t, c, joinReq(group, "", session, nil, topics...))
	code(t, r.ErrorCode, kerr.MemberIDRequired)
	if r.MemberID == "" {
		t.Fatal("MEMBER_ID_REQUIRED without a member id")
	}
	return do[*kmsg.JoinGroupResponse](t, c, joinReq(group, r.MemberID, session, nil, topics...))
}

func syncReq(group, member string, gen int32, assign map[string][]byte) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 5, group, member, gen
	r.ProtocolType, r.Protocol = strp("consumer"), strp("range")
	for m, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = m, a
		r.GroupAssignment = append(r.GroupAssignment, ga)
	}
	return r
}

func hbReq(group, member string, gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 4, group, member, gen
	return r
}

func describe(t *testing.T, c *Coordinator, group string, version int16) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version, r.Groups = version, []string{group}
	return do[*kmsg.DescribeGroupsResponse](t, c, r).Groups[0]
}

// The classic state machine through join, sync, heartbeat, a second member's join (a
// rebalance), a stale generation, and a leave.
func TestClassicJoinSyncHeartbeatLeave(t *testing.T) {
	c, _ := newCoord(t, map[string]int32{"orders": 4})
	j1 := join(t, c, "g", 10*time.Second, "orders")
	codeOK(t, j1.ErrorCode)
	if j1.LeaderID != j1.MemberID || len(j1.Members) != 1 || j1.Generation < 2 || *j1.Protocol != "range" {
		t.Fatalf("first join: %+v", j1)
	}
	if d := describe(t, c, "g", 5); d.State != "CompletingRebalance" {
		t.Fatalf("state after join: %s", d.State)
	}
	s1 := do[*kmsg.SyncGroupResponse](t, c, syncReq("g", j1.MemberID, j1.Generation, map[string][]byte{j1.MemberID: []byte("a1")}))
	codeOK(t, s1.ErrorCode)
	if string(s1.MemberAssignment) != "a1" || *s1.Protocol != "range" {
		t.Fatalf("sync: %+v", s1)
	}
	if d := describe(t, c, "g", 5); d.State != "Stable" || len(d.Members) != 1 || string(d.Members[0].MemberAssignment) != "a1" {
		t.Fatalf("describe stable: %+v", d)
	}
	codeOK(t, do[*kmsg.HeartbeatResponse](t, c, hbReq("g", j1.MemberID, j1.Generation)).ErrorCode)
	code(t, do[*kmsg.HeartbeatResponse](t, c, hbReq("g", j1.MemberID, j1.Generation+1)).ErrorCode, kerr.IllegalGeneration)
	code(t, do[*kmsg.HeartbeatResponse](t, c, hbReq("g", "nobody", j1.Generation)).ErrorCode, kerr.UnknownMemberID)
	code(t, do[*kmsg.HeartbeatResponse](t, c, hbReq("other", j1.MemberID, j1.Generation)).ErrorCode, kerr.UnknownMemberID)

	// A second member joins: the first is told to rejoin, and both get the next generation.
	j2c := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { j2c <- join(t, c, "g", 10*time.Second, "orders") }()
	waitFor(t, "a rebalance", 5*time.Second, func() bool {
		return do[*kmsg.HeartbeatResponse](t, c, hbReq("g", j1.MemberID, j1.Generation)).ErrorCode == kerr.RebalanceInProgress.Code
	})
	code(t, do[*kmsg.SyncGroupResponse](t, c, syncReq("g", j1.MemberID, j1.Generation, nil)).ErrorCode, kerr.RebalanceInProgress)
	j1b := do[*kmsg.JoinGroupResponse](t, c, joinReq("g", j1.MemberID, 10*time.Second, nil, "orders"))
	j2 := <-j2c
	codeOK(t, j1b.ErrorCode)
	codeOK(t, j2.ErrorCode)
	if j1b.Generation != j1.Generation+1 || j2.Generation != j1b.Generation || j1b.LeaderID != j1.MemberID || len(j1b.Members) != 2 || len(j2.Members) != 0 {
		t.Fatalf("rebalance: leader %+v follower %+v", j1b, j2)
	}
	// The follower waits in SyncGroup for the leader's assignments.
	s2c := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { s2c <- do[*kmsg.SyncGroupResponse](t, c, syncReq("g", j2.MemberID, j2.Generation, nil)) }()
	code(t, do[*kmsg.SyncGroupResponse](t, c, syncReq("g", j1.MemberID, j1.Generation, nil)).ErrorCode, kerr.IllegalGeneration)
	s1 = do[*kmsg.SyncGroupResponse](t, c, syncReq("g", j1.MemberID, j1b.Generation, map[string][]byte{j1.MemberID: []byte("x"), j2.MemberID: []byte("y")}))
	if s2 := <-s2c; s2.ErrorCode != 0 || string(s2.MemberAssignment) != "y" || string(s1.MemberAssignment) != "x" {
		t.Fatalf("syncs: leader %+v follower %+v", s1, s2)
	}
	// The follower leaves: the leader rebalances alone.
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version, lr.Group = 5, "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = j2.MemberID
	lm2 := kmsg.NewLeaveGroupRequestMember()
	lm2.MemberID = "nobody"
	lr.Members = []kmsg.LeaveGroupRequestMember{lm, lm2}
	lresp := do[*kmsg.LeaveGroupResponse](t, c, lr)
	codeOK(t, lresp.Members[0].ErrorCode)
	code(t, lresp.Members[1].ErrorCode, kerr.UnknownMemberID)
	code(t, do[*kmsg.HeartbeatResponse](t, c, hbReq("g", j1.MemberID, j1b.Generation)).ErrorCode, kerr.RebalanceInProgress)
	j1c := do[*kmsg.JoinGroupResponse](t, c, joinReq("g", j1.MemberID, 10*time.Second, nil, "orders"))
	if j1c.ErrorCode != 0 || j1c.Generation != j1b.Generation+1 || len(j1c.Members) != 1 {
		t.Fatalf("after leave: %+v", j1c)
	}
}

func TestJoinGroupErrors(t *testing.T) {
	c, _ := newCoord(t, map[string]int32{"orders": 1}, func(cfg *Config) { cfg.MaxMembers = 1 })
	r := joinReq("", "", time.Second, nil)
	code(t, do[*kmsg.JoinGroupResponse](t, c, r).ErrorCode, kerr.InvalidGroupID)
	code(t, do[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", time.Millisecond, nil)).ErrorCode, kerr.InvalidSessionTimeout)
	r = joinReq("g", "", time.Second, nil)
	r.Protocols = nil
	code(t, do[*kmsg.JoinGroupResponse](t, c, r).ErrorCode, kerr.InconsistentGroupProtocol)
	r = joinReq("g", "", time.Second, nil)
	r.Protocols[0].Metadata = make([]byte, 65<<10)
	code(t, do[*kmsg.JoinGroupResponse](t, c, r).ErrorCode, kerr.InvalidRequest)
	code(t, do[*kmsg.JoinGroupResponse](t, c, joinReq("g", "made-up", time.Second, nil)).ErrorCode, kerr.UnknownMemberID)
	j := join(t, c, "g", 10*time.Second, "orders")
	codeOK(t, j.ErrorCode)
	// The bound of members per group (pending ids included).
	code(t, do[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", time.Second, nil)).ErrorCode, kerr.GroupMaxSizeReached)
	// Another protocol type cannot join.
	r = joinReq("g", j.MemberID, 10*time.Second, nil)
	r.ProtocolType = "connect"
	c2, _ := newCoord(t, map[string]int32{"orders": 1})
	j = join(t, c2, "h", 10*time.Second, "orders")
	r = joinReq("h", "", time.Second, nil)
	r.ProtocolType = "connect"
	code(t, do[*kmsg.JoinGroupResponse](t, c2, r).ErrorCode, kerr.InconsistentGroupProtocol)
	_ = j
}

// A member that stops heartbeating is removed at its session's end: the group is Empty at
// the next generation. A member that does not rejoin within the rebalance timeout is
// dropped and the others complete the join without it.
func TestSessionAndRebalanceTimeouts(t *testing.T) {
	c, mc := newCoord(t, map[string]int32{"orders": 1})
	j := join(t, c, "g", 150*time.Millisecond, "orders")
	codeOK(t, j.ErrorCode)
	codeOK(t, do[*kmsg.SyncGroupResponse](t, c, syncReq("g", j.MemberID, j.Generation, nil)).ErrorCode)
	waitFor(t, "the session to expire", 5*time.Second, func() bool { return describe(t, c, "g", 5).State == "Empty" })
	st, err := mc.DescribeKafkaGroup(context.Background(), meta.DefaultNS, "g")
	if err != nil || st.Generation <= j.Generation {
		t.Fatalf("generation after expiry: %+v %v (joined at %d)", st, err, j.Generation)
	}
	code(t, do[*kmsg.HeartbeatResponse](t, c, hbReq("g", j.MemberID, j.Generation)).ErrorCode, kerr.UnknownMemberID)

	a := join(t, c, "r", 2*time.Second, "orders")
	codeOK(t, do[*kmsg.SyncGroupResponse](t, c, syncReq("r", a.MemberID, a.Generation, nil)).ErrorCode)
	start := time.Now()
	// a keeps heartbeating but never rejoins: b's join completes at a's rebalance timeout.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				do[*kmsg.HeartbeatResponse](t, c, hbReq("r", a.MemberID, a.Generation))
			}
		}
	}()
	b := join(t, c, "r", 2*time.Second, "orders")
	close(stop)
	codeOK(t, b.ErrorCode)
	if el := time.Since(start); el < 1500*time.Millisecond || len(b.Members) != 1 || b.LeaderID != b.MemberID {
		t.Fatalf("join completed after %s: %+v", el, b)
	}
	code(t, do[*kmsg.HeartbeatResponse](t, c, hbReq("r", a.MemberID, a.Generation)).ErrorCode, kerr.UnknownMemberID)
}

// Static members keep their assignment across a restart without a rebalance; the old
// incarnation is fenced.
func TestStaticMembership(t *testing.T) {
	// Both members join the first generation: the initial delay waits for the second.
	c, _ := newCoord(t, map[string]int32{"orders": 2}, func(cfg *Config) { cfg.InitialRebalanceDelay = 300 * time.Millisecond })
	ia, ib := strp("a"), strp("b")
	bc := make(chan *kmsg.JoinGroupResponse, 1)
	ac := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ac <- do[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", 10*time.Second, ia, "orders")) }()
	go func() { bc <- do[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", 10*time.Second, ib, "orders")) }()
	a, b := <-ac, <-bc
	codeOK(t, a.ErrorCode)
	codeOK(t, b.ErrorCode)
	leader, follower := a, b
	fi := ib
	if b.LeaderID == b.MemberID {
		leader, follower, fi = b, a, ia
	}
	fc := make(chan *kmsg.SyncGroupResponse, 1)
	go func() {
		fc <- do[*kmsg.SyncGroupResponse](t, c, syncReq("g", follower.MemberID, follower.Generation, nil))
	}()
	do[*kmsg.SyncGroupResponse](t, c, syncReq("g", leader.MemberID, leader.Generation,
		map[string][]byte{leader.MemberID: []byte("L"), follower.MemberID: []byte("F")}))
	if s := <-fc; string(s.MemberAssignment) != "F" {
		t.Fatalf("follower sync: %+v", s)
	}
	// The follower restarts: a new member id, the same generation, no rebalance.
	again := do[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", 10*time.Second, fi, "orders"))
	codeOK(t, again.ErrorCode)
	if again.MemberID == follower.MemberID || again.Generation != follower.Generation {
		t.Fatalf("static rejoin: %+v (was %s at %d)", again, follower.MemberID, follower.Generation)
	}
	s := do[*kmsg.SyncGroupResponse](t, c, syncReq("g", again.MemberID, again.Generation, nil))
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "F" {
		t.Fatalf("static member's assignment after restart: %+v", s)
	}
	codeOK(t, do[*kmsg.HeartbeatResponse](t, c, hbReq("g", leader.MemberID, leader.Generation)).ErrorCode)
	old := hbReq("g", follower.MemberID, follower.Generation)
	old.InstanceID = fi
	code(t, do[*kmsg.HeartbeatResponse](t, c, old).ErrorCode, kerr.FencedInstanceID)
	// Leaving by instance id with the old member id is fenced; with the current one it leaves.
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version, lr.Group = 4, "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID, lm.InstanceID = follower.MemberID, fi
	lr.Members = []kmsg.LeaveGroupRequestMember{lm}
	code(t, do[*kmsg.LeaveGroupResponse](t, c, lr).Members[0].ErrorCode, kerr.FencedInstanceID)
	lr.Members[0].MemberID = again.MemberID
	codeOK(t, do[*kmsg.LeaveGroupResponse](t, c, lr).Members[0].ErrorCode)
}

func commitReq(group, member string, gen int32, topic string, offs map[int32]int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 9, group, member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p := range int32(len(offs) + 10) {
		o, ok := offs[p]
		if !ok {
			continue
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, o, 3, strp("md")
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	return r
}

func fetchOffsets(t *testing.T, c *Coordinator, group string, topic string, parts ...int32) map[int32]kmsg.OffsetFetchResponseGroupTopicPartition {
	t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	if topic != "" {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, parts
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
	}
	r.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	resp := do[*kmsg.OffsetFetchResponse](t, c, r)
	codeOK(t, resp.Groups[0].ErrorCode)
	out := map[int32]kmsg.OffsetFetchResponseGroupTopicPartition{}
	for _, rt := range resp.Groups[0].Topics {
		for _, p := range rt.Partitions {
			out[p.Partition] = p
		}
	}
	return out
}

func TestOffsetCommitFetch(t *testing.T) {
	c, _ := newCoord(t, map[string]int32{"orders": 3, "other": 1})
	// An admin commit to a group nobody joined.
	r := commitReq("g", "", -1, "orders", map[int32]int64{0: 5, 1: 7})
	for _, p := range do[*kmsg.OffsetCommitResponse](t, c, r).Topics[0].Partitions {
		codeOK(t, p.ErrorCode)
	}
	got := fetchOffsets(t, c, "g", "orders", 0, 1, 2)
	if got[0].Offset != 5 || got[1].Offset != 7 || got[2].Offset != -1 || *got[0].Metadata != "md" || got[0].LeaderEpoch != 3 {
		t.Fatalf("fetched %+v", got)
	}
	if all := fetchOffsets(t, c, "g", ""); len(all) != 2 {
		t.Fatalf("fetch of all topics: %+v", all)
	}
	// Per-partition refusals; the valid partitions commit.
	r = commitReq("g", "", -1, "orders", map[int32]int64{0: 6, 3: 1})
	ps := do[*kmsg.OffsetCommitResponse](t, c, r).Topics[0].Partitions
	codeOK(t, ps[0].ErrorCode)
	code(t, ps[1].ErrorCode, kerr.UnknownTopicOrPartition)
	r = commitReq("g", "", -1, "nope", map[int32]int64{0: 1})
	code(t, do[*kmsg.OffsetCommitResponse](t, c, r).Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	r = commitReq("g", "", -1, "orders", map[int32]int64{1: 1})
	r.Topics[0].Partitions[0].Metadata = strp(string(make([]byte, 4097)))
	code(t, do[*kmsg.OffsetCommitResponse](t, c, r).Topics[0].Partitions[0].ErrorCode, kerr.OffsetMetadataTooLarge)
	if got := fetchOffsets(t, c, "g", "orders", 0, 1); got[0].Offset != 6 || got[1].Offset != 7 {
		t.Fatalf("after partial commits: %+v", got)
	}
	// Member commits: generation and state checked.
	j := join(t, c, "g", 10*time.Second, "orders")
	code(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("g", j.MemberID, j.Generation, "orders", map[int32]int64{0: 9})).Topics[0].Partitions[0].ErrorCode,
		kerr.RebalanceInProgress)
	do[*kmsg.SyncGroupResponse](t, c, syncReq("g", j.MemberID, j.Generation, nil))
	code(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("g", j.MemberID, j.Generation-1, "orders", map[int32]int64{0: 9})).Topics[0].Partitions[0].ErrorCode,
		kerr.IllegalGeneration)
	code(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("g", "", -1, "orders", map[int32]int64{0: 9})).Topics[0].Partitions[0].ErrorCode,
		kerr.UnknownMemberID)
	codeOK(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("g", j.MemberID, j.Generation, "orders", map[int32]int64{0: 9})).Topics[0].Partitions[0].ErrorCode)
	if got := fetchOffsets(t, c, "g", "orders", 0); got[0].Offset != 9 {
		t.Fatalf("member commit: %+v", got)
	}
	// v1: errors per partition, offsets from the sequencer.
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version, f.Group = 1, "g"
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "orders", []int32{0, 2}
	f.Topics = []kmsg.OffsetFetchRequestTopic{ft}
	fr := do[*kmsg.OffsetFetchResponse](t, c, f)
	if p := fr.Topics[0].Partitions; p[0].Offset != 9 || p[1].Offset != -1 {
		t.Fatalf("v1 fetch: %+v", fr)
	}
}

// A coordinator that lost a group to another node cannot commit: the sequencer refuses
// its generation, it answers NOT_COORDINATOR and drops the group; the new coordinator
// resumes from the offsets in the sequencer. A group Owns says is not this node's is
// answered NOT_COORDINATOR.
func TestCoordinatorFailoverFencesStaleCommit(t *testing.T) {
	a, mc := newCoord(t, map[string]int32{"orders": 2})
	b := coordOn(t, mc)
	j := join(t, a, "g", 10*time.Second, "orders")
	do[*kmsg.SyncGroupResponse](t, a, syncReq("g", j.MemberID, j.Generation, nil))
	codeOK(t, do[*kmsg.OffsetCommitResponse](t, a, commitReq("g", j.MemberID, j.Generation, "orders", map[int32]int64{0: 10})).Topics[0].Partitions[0].ErrorCode)
	// The group moves to b (a membership change): a member joins there, which claims it.
	jb := join(t, b, "g", 10*time.Second, "orders")
	codeOK(t, jb.ErrorCode)
	if jb.Generation <= j.Generation {
		t.Fatalf("b's generation %d not past a's %d", jb.Generation, j.Generation)
	}
	code(t, do[*kmsg.OffsetCommitResponse](t, a, commitReq("g", j.MemberID, j.Generation, "orders", map[int32]int64{0: 99})).Topics[0].Partitions[0].ErrorCode,
		kerr.NotCoordinator)
	waitFor(t, "a to drop the group", time.Second, func() bool { return a.Groups() == 0 })
	if got := fetchOffsets(t, b, "g", "orders", 0); got[0].Offset != 10 {
		t.Fatalf("b resumes from %+v, want 10", got)
	}
	// a's member rejoins at a: not a's any more per Owns.
	var owned atomic.Bool
	c := coordOn(t, mc, func(cfg *Config) { cfg.Owns = func(ns, g string) bool { return owned.Load() } })
	code(t, do[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", 10*time.Second, nil)).ErrorCode, kerr.NotCoordinator)
	code(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("g", "", -1, "orders", map[int32]int64{0: 1})).Topics[0].Partitions[0].ErrorCode, kerr.NotCoordinator)
	owned.Store(true)
	codeOK(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("g", "", -1, "orders", map[int32]int64{1: 1})).Topics[0].Partitions[0].ErrorCode)
	// That admin commit claimed the group from b: b's member is fenced at its next commit.
	do[*kmsg.SyncGroupResponse](t, b, syncReq("g", jb.MemberID, jb.Generation, nil))
	code(t, do[*kmsg.OffsetCommitResponse](t, b, commitReq("g", jb.MemberID, jb.Generation, "orders", map[int32]int64{0: 98})).Topics[0].Partitions[0].ErrorCode,
		kerr.NotCoordinator)
	if got := fetchOffsets(t, c, "g", "orders", 0, 1); got[0].Offset != 10 || got[1].Offset != 1 {
		t.Fatalf("offsets after the fenced commits: %+v", got)
	}
}

func TestDeleteGroupsAndOffsets(t *testing.T) {
	c, mc := newCoord(t, map[string]int32{"orders": 2, "other": 1})
	codeOK(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("e", "", -1, "orders", map[int32]int64{0: 1})).Topics[0].Partitions[0].ErrorCode)
	j := join(t, c, "busy", 10*time.Second, "orders")
	dr := kmsg.NewPtrDeleteGroupsRequest()
	dr.Version, dr.Groups = 2, []string{"e", "busy", "missing"}
	resp := do[*kmsg.DeleteGroupsResponse](t, c, dr)
	codeOK(t, resp.Groups[0].ErrorCode)
	code(t, resp.Groups[1].ErrorCode, kerr.NonEmptyGroup)
	code(t, resp.Groups[2].ErrorCode, kerr.GroupIDNotFound)
	if _, err := mc.DescribeKafkaGroup(context.Background(), meta.DefaultNS, "e"); !errors.Is(err, meta.ErrKafkaGroupNotFound) {
		t.Fatalf("deleted group still stored: %v", err)
	}
	if got := fetchOffsets(t, c, "e", "orders", 0); got[0].Offset != -1 {
		t.Fatalf("offsets of a deleted group: %+v", got)
	}
	// OffsetDelete: a topic the members subscribe to is kept.
	do[*kmsg.SyncGroupResponse](t, c, syncReq("busy", j.MemberID, j.Generation, nil))
	codeOK(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("busy", j.MemberID, j.Generation, "orders", map[int32]int64{0: 4})).Topics[0].Partitions[0].ErrorCode)
	codeOK(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("busy", j.MemberID, j.Generation, "other", map[int32]int64{0: 2})).Topics[0].Partitions[0].ErrorCode)
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "busy"
	for _, topic := range []string{"orders", "other"} {
		ot := kmsg.NewOffsetDeleteRequestTopic()
		ot.Topic = topic
		op := kmsg.NewOffsetDeleteRequestTopicPartition()
		ot.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{op}
		od.Topics = append(od.Topics, ot)
	}
	or := do[*kmsg.OffsetDeleteResponse](t, c, od)
	codeOK(t, or.ErrorCode)
	code(t, or.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	codeOK(t, or.Topics[1].Partitions[0].ErrorCode)
	if got := fetchOffsets(t, c, "busy", "orders", 0); got[0].Offset != 4 {
		t.Fatalf("subscribed offset deleted: %+v", got)
	}
	if got := fetchOffsets(t, c, "busy", "other", 0); got[0].Offset != -1 {
		t.Fatalf("unsubscribed offset kept: %+v", got)
	}
	od.Group = "missing"
	code(t, do[*kmsg.OffsetDeleteResponse](t, c, od).ErrorCode, kerr.GroupIDNotFound)
}

func TestListAndDescribeGroups(t *testing.T) {
	c, _ := newCoord(t, map[string]int32{"orders": 1})
	codeOK(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("stored", "", -1, "orders", map[int32]int64{0: 1})).Topics[0].Partitions[0].ErrorCode)
	j := join(t, c, "live", 10*time.Second, "orders")
	do[*kmsg.SyncGroupResponse](t, c, syncReq("live", j.MemberID, j.Generation, nil))
	c.Close() // "stored" is only in the sequencer now; "live" lost its members
	c2 := coordOn(t, c.cfg.Meta)
	j = join(t, c2, "live", 10*time.Second, "orders")
	do[*kmsg.SyncGroupResponse](t, c2, syncReq("live", j.MemberID, j.Generation, nil))
	lr := kmsg.NewPtrListGroupsRequest()
	lr.Version = 5
	got := map[string]string{}
	for _, g := range do[*kmsg.ListGroupsResponse](t, c2, lr).Groups {
		got[g.Group] = g.GroupState + "/" + g.GroupType + "/" + g.ProtocolType
	}
	// A group that only ever had offsets committed has no protocol type, as Kafka lists it.
	if got["stored"] != "Empty/classic/" || got["live"] != "Stable/classic/consumer" || len(got) != 2 {
		t.Fatalf("list: %v", got)
	}
	lr.StatesFilter = []string{"stable"}
	if gs := do[*kmsg.ListGroupsResponse](t, c2, lr).Groups; len(gs) != 1 || gs[0].Group != "live" {
		t.Fatalf("list stable: %+v", gs)
	}
	lr.StatesFilter, lr.TypesFilter = nil, []string{"consumer"}
	if gs := do[*kmsg.ListGroupsResponse](t, c2, lr).Groups; len(gs) != 0 {
		t.Fatalf("list consumer groups: %+v", gs)
	}
	if d := describe(t, c2, "stored", 5); d.ErrorCode != 0 || d.State != "Empty" {
		t.Fatalf("describe stored: %+v", d)
	}
	if d := describe(t, c2, "missing", 5); d.ErrorCode != 0 || d.State != "Dead" {
		t.Fatalf("describe missing v5: %+v", d)
	}
	code(t, describe(t, c2, "missing", 6).ErrorCode, kerr.GroupIDNotFound)
}

// The bound of groups in memory: an empty group makes room, groups with members do not.
func TestMaxGroupsBound(t *testing.T) {
	c, _ := newCoord(t, map[string]int32{"orders": 1}, func(cfg *Config) { cfg.MaxGroups = 2 })
	join(t, c, "a", 10*time.Second, "orders")
	codeOK(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("empty", "", -1, "orders", map[int32]int64{0: 1})).Topics[0].Partitions[0].ErrorCode)
	if c.Groups() != 2 {
		t.Fatalf("%d groups", c.Groups())
	}
	j := join(t, c, "b", 10*time.Second, "orders") // evicts "empty"
	codeOK(t, j.ErrorCode)
	if c.Groups() != 2 {
		t.Fatalf("%d groups after eviction", c.Groups())
	}
	code(t, do[*kmsg.JoinGroupResponse](t, c, joinReq("c", "", time.Second, nil)).ErrorCode, kerr.CoordinatorNotAvailable)
	if got := fetchOffsets(t, c, "empty", "orders", 0); got[0].Offset != 1 {
		t.Fatalf("an evicted group's offsets: %+v", got)
	}
}

func TestVersionsAreServed(t *testing.T) {
	c, _ := newCoord(t, nil)
	for key, v := range c.Versions() {
		for ver := v[0]; ver <= v[1]; ver++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(ver)
			if _, err := c.Handle(context.Background(), meta.DefaultNS, req); err != nil {
				t.Errorf("key %d v%d: %v", key, ver, err)
			}
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(v[1] + 1)
		if _, err := c.Handle(context.Background(), meta.DefaultNS, req); !errors.Is(err, ErrUnsupported) {
			t.Errorf("key %d v%d past the max: %v", key, v[1]+1, err)
		}
	}
	if _, err := c.Handle(context.Background(), meta.DefaultNS, kmsg.NewPtrProduceRequest()); !errors.Is(err, ErrUnsupported) {
		t.Errorf("produce: %v", err)
	}
}

// A group's protocol type reaches the sequencer with its generation, so a node that does
// not hold the group (after a restart) lists it with the type its members joined with.
func TestListGroupsKeepsProtocolTypeAcrossRestart(t *testing.T) {
	c, mc := newCoord(t, map[string]int32{"orders": 1})
	r := joinReq("connect-cluster", "", 10*time.Second, nil)
	r.ProtocolType = "connect"
	first := do[*kmsg.JoinGroupResponse](t, c, r)
	r.MemberID = first.MemberID
	codeOK(t, do[*kmsg.JoinGroupResponse](t, c, r).ErrorCode)
	c.Close()
	lr := kmsg.NewPtrListGroupsRequest()
	lr.Version = 5
	gs := do[*kmsg.ListGroupsResponse](t, coordOn(t, mc), lr).Groups
	if len(gs) != 1 || gs[0].ProtocolType != "connect" {
		t.Fatalf("listed after a restart: %+v", gs)
	}
}

// A static leader restarting in a Stable group: v9 keeps the generation and answers the
// members with SkipAssignment (KIP-814); v8 rebalances.
func TestStaticLeaderRestart(t *testing.T) {
	c, _ := newCoord(t, map[string]int32{"orders": 2})
	il := strp("lead")
	j := do[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", 10*time.Second, il, "orders"))
	codeOK(t, j.ErrorCode)
	do[*kmsg.SyncGroupResponse](t, c, syncReq("g", j.MemberID, j.Generation, map[string][]byte{j.MemberID: []byte("L")}))
	again := do[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", 10*time.Second, il, "orders"))
	if again.ErrorCode != 0 || again.Generation != j.Generation || !again.SkipAssignment || again.LeaderID != again.MemberID || len(again.Members) != 1 {
		t.Fatalf("v9 leader restart: %+v", again)
	}
	if s := do[*kmsg.SyncGroupResponse](t, c, syncReq("g", again.MemberID, again.Generation, nil)); string(s.MemberAssignment) != "L" {
		t.Fatalf("assignment after the restart: %+v", s)
	}
	old := joinReq("g", "", 10*time.Second, il, "orders")
	old.Version = 8
	r := do[*kmsg.JoinGroupResponse](t, c, old)
	if r.ErrorCode != 0 || r.Generation != j.Generation+1 || r.SkipAssignment {
		t.Fatalf("v8 leader restart: %+v", r)
	}
}
