package group

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

func cghb(group, member string, epoch int32, topics []string, owned map[[16]byte][]int32) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, group, member, epoch
	r.RebalanceTimeoutMillis = 5000
	r.SubscribedTopicNames = topics
	if owned != nil {
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for id, ps := range owned {
			t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			t.TopicID, t.Partitions = id, ps
			r.Topics = append(r.Topics, t)
		}
	}
	return r
}

func owned(r *kmsg.ConsumerGroupHeartbeatResponse) map[[16]byte][]int32 {
	if r.Assignment == nil {
		return nil
	}
	out := map[[16]byte][]int32{}
	for _, t := range r.Assignment.Topics {
		out[t.TopicID] = t.Partitions
	}
	return out
}

func count848(a map[[16]byte][]int32) int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// KIP-848 reconciliation: a second member's join bumps the group epoch; the first revokes
// half its partitions (keeping its epoch) before the second may take them, then both reach
// the group epoch with two partitions each.
func TestConsumerGroupHeartbeatReconciles(t *testing.T) {
	c, mc := newCoord(t, map[string]int32{"orders": 4})
	r1 := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m1", 0, []string{"orders"}, map[[16]byte][]int32{}))
	codeOK(t, r1.ErrorCode)
	a1 := owned(r1)
	if count848(a1) != 4 || r1.MemberEpoch < 1 || *r1.MemberID != "m1" || r1.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("first join: %+v %v", r1, a1)
	}
	e1 := r1.MemberEpoch
	// A heartbeat with nothing new answers no assignment.
	if r := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m1", e1, nil, nil)); r.ErrorCode != 0 || r.Assignment != nil || r.MemberEpoch != e1 {
		t.Fatalf("keepalive: %+v", r)
	}
	r2 := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m2", 0, []string{"orders"}, map[[16]byte][]int32{}))
	codeOK(t, r2.ErrorCode)
	if count848(owned(r2)) != 0 || r2.MemberEpoch <= e1 {
		t.Fatalf("second join takes nothing m1 still holds: %+v", r2)
	}
	e2 := r2.MemberEpoch
	// m1 is told to give up two partitions, at its old epoch.
	r1 = do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m1", e1, nil, nil))
	if r1.ErrorCode != 0 || r1.MemberEpoch != e1 || count848(owned(r1)) != 2 {
		t.Fatalf("revocation: %+v %v", r1, owned(r1))
	}
	kept := owned(r1)
	// m2 still gets nothing while m1 has not confirmed.
	if r := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m2", e2, nil, nil)); count848(owned(r)) != 0 && r.Assignment != nil {
		t.Fatalf("m2 got partitions m1 still owns: %v", owned(r))
	}
	// An offset commit of m1 at the new epoch is stale; at its own epoch it passes.
	id := c.cfg.TopicID(meta.DefaultNS, mustStream(t, mc, "orders"))
	code(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("g", "m1", e2, "orders", map[int32]int64{kept[id][0]: 1})).Topics[0].Partitions[0].ErrorCode,
		kerr.StaleMemberEpoch)
	codeOK(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("g", "m1", e1, "orders", map[int32]int64{kept[id][0]: 1})).Topics[0].Partitions[0].ErrorCode)
	// m1 confirms (its Topics list only what it kept): it moves to the group epoch.
	r1 = do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m1", e1, nil, kept))
	if r1.ErrorCode != 0 || r1.MemberEpoch != e2 {
		t.Fatalf("after revoking: %+v", r1)
	}
	r2 = do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m2", e2, nil, nil))
	a2 := owned(r2)
	if r2.ErrorCode != 0 || count848(a2) != 2 {
		t.Fatalf("m2 after m1 revoked: %+v %v", r2, a2)
	}
	for _, p := range a2[id] {
		if slices.Contains(kept[id], p) {
			t.Fatalf("partition %d assigned twice: m1 %v m2 %v", p, kept, a2)
		}
	}
	// Describe shows both at the group epoch, Stable.
	dr := kmsg.NewPtrConsumerGroupDescribeRequest()
	dr.Version, dr.Groups = 1, []string{"g", "missing"}
	d := do[*kmsg.ConsumerGroupDescribeResponse](t, c, dr)
	if g := d.Groups[0]; g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != e2 || g.AssignmentEpoch != e2 || len(g.Members) != 2 || g.AssignorName != "uniform" {
		t.Fatalf("describe: %+v", g)
	}
	code(t, d.Groups[1].ErrorCode, kerr.GroupIDNotFound)
	// Errors.
	code(t, do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m1", e2+5, nil, nil)).ErrorCode, kerr.FencedMemberEpoch)
	code(t, do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "ghost", 3, nil, nil)).ErrorCode, kerr.UnknownMemberID)
	code(t, do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "", 0, []string{"orders"}, nil)).ErrorCode, kerr.InvalidRequest)
	code(t, do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m3", 0, nil, nil)).ErrorCode, kerr.InvalidRequest)
	bad := cghb("g", "m3", 0, []string{"orders"}, nil)
	bad.ServerAssignor = strp("sticky")
	code(t, do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, bad).ErrorCode, kerr.UnsupportedAssignor)
	bad = cghb("g", "m3", 0, nil, nil)
	bad.SubscribedTopicRegex = strp("(")
	code(t, do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, bad).ErrorCode, kerr.InvalidRegularExpression)
	code(t, do[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", 10*time.Second, nil)).ErrorCode, kerr.InconsistentGroupProtocol)
	// m2 leaves: m1 gets everything back at the next epoch.
	leave := cghb("g", "m2", -1, nil, nil)
	if r := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, leave); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	r1 = do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m1", e2, nil, nil))
	if r1.ErrorCode != 0 || r1.MemberEpoch <= e2 || count848(owned(r1)) != 4 {
		t.Fatalf("after m2 left: %+v %v", r1, owned(r1))
	}
}

// A member that stops heartbeating is dropped after the session timeout and its partitions
// go to the others; a regex subscription follows topics created later.
func TestConsumerGroupSessionAndRegex(t *testing.T) {
	c, mc := newCoord(t, map[string]int32{"logs-a": 2}, func(cfg *Config) {
		cfg.ConsumerSessionTimeout, cfg.ConsumerHeartbeatInterval, cfg.TopicRefresh = 300*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	})
	re := cghb("g", "m1", 0, nil, map[[16]byte][]int32{})
	re.SubscribedTopicRegex = strp("logs-.*")
	r1 := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, re)
	if r1.ErrorCode != 0 || count848(owned(r1)) != 2 {
		t.Fatalf("regex join: %+v", r1)
	}
	if _, err := mc.CreateStream(t.Context(), meta.StreamConfig{Name: "logs-b", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	r2 := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m2", 0, []string{"logs-a"}, map[[16]byte][]int32{}))
	codeOK(t, r2.ErrorCode)
	epoch, got := r1.MemberEpoch, 0
	waitFor(t, "m1 to reach the regex's new topic", 3*time.Second, func() bool {
		r := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m1", epoch, nil, nil))
		if r.ErrorCode != 0 {
			t.Fatalf("heartbeat: %+v", r)
		}
		epoch = r.MemberEpoch
		if r.Assignment != nil {
			got = count848(owned(r))
			// confirm whatever it was told
			do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m1", epoch, nil, owned(r)))
		}
		return got >= 3
	})
	// m2 stops heartbeating: after its session m1 holds all five partitions.
	waitFor(t, "m2's session to end", 5*time.Second, func() bool {
		r := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m1", epoch, nil, nil))
		epoch = r.MemberEpoch
		if r.Assignment != nil {
			got = count848(owned(r))
		}
		return got == 5
	})
	code(t, do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "m2", r2.MemberEpoch, nil, nil)).ErrorCode, kerr.UnknownMemberID)
}

func mustStream(t *testing.T, mc meta.Client, name string) meta.Stream {
	t.Helper()
	s, _, err := mc.GetStream(t.Context(), meta.DefaultNS, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAssignors(t *testing.T) {
	members := []string{"a", "b", "c"}
	subs := map[string]map[string]bool{"a": {"x": true, "y": true}, "b": {"x": true, "y": true}, "c": {"x": true, "y": true}}
	in := assignInput{members: members, subs: subs, parts: map[string]int32{"x": 5, "y": 2}}
	check := func(name string, out map[string]assignment, maxSpread int) {
		t.Helper()
		seen := map[tp]string{}
		lo, hi := 1<<30, 0
		for m, a := range out {
			lo, hi = min(lo, a.count()), max(hi, a.count())
			for tn, ps := range a {
				for _, p := range ps {
					if o, dup := seen[tp{tn, p}]; dup {
						t.Fatalf("%s: %s-%d to %s and %s", name, tn, p, o, m)
					}
					seen[tp{tn, p}] = m
				}
			}
		}
		if len(seen) != 7 || hi-lo > maxSpread {
			t.Fatalf("%s: %d partitions, spread %d: %v", name, len(seen), hi-lo, out)
		}
	}
	u := assignUniform(in)
	check("uniform", u, 1)
	// Sticky: a member leaving moves only its partitions.
	in2 := assignInput{members: []string{"a", "b"}, subs: subs, parts: in.parts, prev: u}
	u2 := assignUniform(in2)
	for _, m := range []string{"a", "b"} {
		for tn, ps := range u[m] {
			for _, p := range ps {
				if !u2[m].has(tn, p) {
					t.Fatalf("uniform moved %s-%d off %s: %v → %v", tn, p, m, u, u2)
				}
			}
		}
	}
	r := assignRange(in)
	check("range", r, 2)
	if fmt.Sprint(r["a"]["x"]) != "[0 1]" || fmt.Sprint(r["c"]["x"]) != "[4]" || fmt.Sprint(r["a"]["y"]) != "[0]" {
		t.Fatalf("range: %v", r)
	}
	// Heterogeneous subscriptions: a partition goes only to a subscriber.
	het := assignInput{members: members, subs: map[string]map[string]bool{"a": {"x": true}, "b": {"y": true}, "c": {"x": true, "y": true}},
		parts: map[string]int32{"x": 4, "y": 4}}
	for name, out := range map[string]map[string]assignment{"uniform": assignUniform(het), "range": assignRange(het)} {
		if len(out["a"]["y"]) != 0 || len(out["b"]["x"]) != 0 || out["a"].count()+out["b"].count()+out["c"].count() != 8 {
			t.Fatalf("%s heterogeneous: %v", name, out)
		}
	}
}

// A member that does not revoke within its rebalance timeout is fenced: the partitions go
// to the others, and its next heartbeat answers UNKNOWN_MEMBER_ID.
func TestConsumerGroupRevocationTimeout(t *testing.T) {
	c, _ := newCoord(t, map[string]int32{"orders": 4})
	j := cghb("g", "slow", 0, []string{"orders"}, map[[16]byte][]int32{})
	j.RebalanceTimeoutMillis = 1000
	r1 := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, j)
	if count848(owned(r1)) != 4 {
		t.Fatalf("join: %+v", r1)
	}
	r2 := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "fast", 0, []string{"orders"}, map[[16]byte][]int32{}))
	// slow is told to revoke, and never confirms.
	hb := cghb("g", "slow", r1.MemberEpoch, nil, nil)
	hb.RebalanceTimeoutMillis = 1000
	if r := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, hb); count848(owned(r)) != 2 {
		t.Fatalf("revocation: %+v", r)
	}
	start, epoch, got := time.Now(), r2.MemberEpoch, 0
	waitFor(t, "fast to get every partition", 5*time.Second, func() bool {
		r := do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "fast", epoch, nil, nil))
		epoch = r.MemberEpoch
		if r.Assignment != nil {
			got = count848(owned(r))
		}
		return got == 4
	})
	if el := time.Since(start); el < 800*time.Millisecond || el > 3*time.Second {
		t.Fatalf("slow fenced after %s, want about its rebalance timeout of 1s", el)
	}
	code(t, do[*kmsg.ConsumerGroupHeartbeatResponse](t, c, cghb("g", "slow", r1.MemberEpoch, nil, nil)).ErrorCode, kerr.UnknownMemberID)
}
