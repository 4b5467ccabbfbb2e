package group

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// BenchmarkOffsetCommit: a member's OffsetCommit of 16 partitions through the coordinator
// into the real in-process sequencer (one Raft command, no fsync).
func BenchmarkOffsetCommit(b *testing.B) {
	c, _ := newCoordTB(b, map[string]int32{"orders": 16})
	j := joinB(b, c)
	offs := map[int32]int64{}
	for p := range int32(16) {
		offs[p] = 1
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		for p := range offs {
			offs[p] = int64(i)
		}
		resp, err := c.Handle(ctx, meta.DefaultNS, commitReq("g", j.MemberID, j.Generation, "orders", offs))
		if err != nil || resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatalf("%v %+v", err, resp)
		}
	}
}

// BenchmarkOffsetFetch: an OffsetFetch of 16 partitions (read from the sequencer).
func BenchmarkOffsetFetch(b *testing.B) {
	c, _ := newCoordTB(b, map[string]int32{"orders": 16})
	j := joinB(b, c)
	offs := map[int32]int64{}
	for p := range int32(16) {
		offs[p] = 7
	}
	ctx := context.Background()
	if _, err := c.Handle(ctx, meta.DefaultNS, commitReq("g", j.MemberID, j.Generation, "orders", offs)); err != nil {
		b.Fatal(err)
	}
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "g"
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic = "orders"
	for p := range int32(16) {
		rt.Partitions = append(rt.Partitions, p)
	}
	rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
	r.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	b.ResetTimer()
	for range b.N {
		resp, err := c.Handle(ctx, meta.DefaultNS, r)
		if err != nil || resp.(*kmsg.OffsetFetchResponse).Groups[0].Topics[0].Partitions[15].Offset != 7 {
			b.Fatalf("%v %+v", err, resp)
		}
	}
}

// BenchmarkConsumerGroupHeartbeat: a steady-state KIP-848 heartbeat of one of 10 members
// of a group on 64 partitions (no epoch change: memory only).
func BenchmarkConsumerGroupHeartbeat(b *testing.B) {
	c, _ := newCoordTB(b, map[string]int32{"orders": 64}, func(cfg *Config) { cfg.TopicRefresh = time.Hour })
	ctx := context.Background()
	epochs := map[string]int32{}
	for i := range 10 {
		id := fmt.Sprintf("m%d", i)
		resp, err := c.Handle(ctx, meta.DefaultNS, cghb("g", id, 0, []string{"orders"}, map[[16]byte][]int32{}))
		if err != nil {
			b.Fatal(err)
		}
		epochs[id] = resp.(*kmsg.ConsumerGroupHeartbeatResponse).MemberEpoch
	}
	// Settle: every member revokes and takes its share.
	for range 3 {
		for id := range epochs {
			resp, _ := c.Handle(ctx, meta.DefaultNS, cghb("g", id, epochs[id], nil, nil))
			r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
			epochs[id] = r.MemberEpoch
			if a := owned(r); a != nil {
				resp, _ = c.Handle(ctx, meta.DefaultNS, cghb("g", id, epochs[id], nil, a))
				epochs[id] = resp.(*kmsg.ConsumerGroupHeartbeatResponse).MemberEpoch
			}
		}
	}
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("m%d", i%10)
		resp, err := c.Handle(ctx, meta.DefaultNS, cghb("g", id, epochs[id], nil, nil))
		if err != nil || resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode != 0 {
			b.Fatalf("%v %+v", err, resp)
		}
	}
}

func joinB(b *testing.B, c *Coordinator) *kmsg.JoinGroupResponse {
	ctx := context.Background()
	resp, err := c.Handle(ctx, meta.DefaultNS, joinReq("g", "", 10*time.Second, nil, "orders"))
	if err != nil {
		b.Fatal(err)
	}
	resp, err = c.Handle(ctx, meta.DefaultNS, joinReq("g", resp.(*kmsg.JoinGroupResponse).MemberID, 10*time.Second, nil, "orders"))
	if err != nil {
		b.Fatal(err)
	}
	j := resp.(*kmsg.JoinGroupResponse)
	if _, err := c.Handle(ctx, meta.DefaultNS, syncReq("g", j.MemberID, j.Generation, nil)); err != nil {
		b.Fatal(err)
	}
	return j
}
