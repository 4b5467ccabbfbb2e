package group

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

func produce(t *testing.T, tc *testCluster, topic string, from, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tc.addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := from; i < from+n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// consumer is one kgo group member recording what it consumed.
type consumer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startConsumer(t *testing.T, tc *testCluster, group, topic string, seen *sync.Map, opts ...kgo.Opt) *consumer {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(tc.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond), kgo.RebalanceTimeout(5 * time.Second),
		kgo.AutoCommitInterval(200 * time.Millisecond)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				v, _ := seen.LoadOrStore(string(r.Value), new(int))
				(*v.(*int))++
			})
		}
	}()
	return c
}

// stop ends the consumer: it commits what it consumed and leaves the group.
func (c *consumer) stop(t *testing.T) {
	c.cancel()
	<-c.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Logf("final commit: %v", err)
	}
	c.cl.Close()
}

func count(m *sync.Map) int {
	n := 0
	m.Range(func(_, _ any) bool { n++; return true })
	return n
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupScenario drives real kgo group consumers: three members share six partitions and
// consume every record; one leaves and the other two take its partitions; the offsets
// they commit land in the sequencer; a new member of the group resumes from them and reads
// only what was produced after.
func groupScenario(t *testing.T, kind string, opts ...kgo.Opt) {
	tc := newTestCluster(t, map[string]int32{"orders": 6})
	produce(t, tc, "orders", 0, 600)
	var seen sync.Map
	cs := []*consumer{}
	for range 3 {
		cs = append(cs, startConsumer(t, tc, "g", "orders", &seen, opts...))
	}
	waitFor(t, "600 records consumed", 30*time.Second, func() bool { return count(&seen) == 600 })
	// Every member holds some partitions.
	acl, err := kgo.NewClient(kgo.SeedBrokers(tc.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	waitFor(t, "three members sharing the partitions", 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		owned := map[string]int{}
		if err := forEachAssignment(ctx, adm, "g", func(member string, n int) { owned[member] += n }); err != nil {
			return false
		}
		total := 0
		for _, n := range owned {
			if n == 0 {
				return false
			}
			total += n
		}
		return len(owned) == 3 && total == 6
	})
	// The group runs the protocol asked for (a KIP-848 client falls back to classic when
	// the server refuses ConsumerGroupHeartbeat).
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	lresp, err := lg.RequestWith(context.Background(), acl)
	if err != nil || len(lresp.Groups) != 1 || lresp.Groups[0].GroupType != kind || lresp.Groups[0].GroupState != "Stable" {
		t.Fatalf("list groups: %+v %v, want one %s group, Stable", lresp, err, kind)
	}
	cs[2].stop(t)
	produce(t, tc, "orders", 600, 300)
	waitFor(t, "900 records consumed after a member left", 30*time.Second, func() bool { return count(&seen) == 900 })
	cs[0].stop(t)
	cs[1].stop(t)
	// The sequencer holds the committed offsets: every partition at its end.
	ctx := context.Background()
	st, lags, err := Lag(ctx, tc.meta, tc.ns, "g")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, l := range lags {
		if l.Lag != 0 {
			t.Errorf("partition %d: lag %d (committed %d, high watermark %d)", l.Partition, l.Lag, l.Committed, l.HighWatermark)
		}
		sum += l.Committed
	}
	if len(st.Offsets) != 6 {
		t.Fatalf("committed partitions: %+v", st.Offsets)
	}
	// kfake's offsets and the sequencer's streams are separate: the streams hold no records,
	// so the lag figure is checked against kfake's ends here.
	ends, err := adm.ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	if sum != end || end != 900 {
		t.Fatalf("committed %d, end offsets %d, want 900", sum, end)
	}
	// A new member resumes from the commits.
	produce(t, tc, "orders", 900, 50)
	var again sync.Map
	c := startConsumer(t, tc, "g", "orders", &again, opts...)
	waitFor(t, "50 new records", 20*time.Second, func() bool { return count(&again) >= 50 })
	time.Sleep(300 * time.Millisecond)
	c.stop(t)
	if n := count(&again); n != 50 {
		t.Fatalf("resumed consumer read %d records, want the 50 new ones", n)
	}
	for i := 900; i < 950; i++ {
		if _, ok := again.Load(fmt.Sprint(i)); !ok {
			t.Fatalf("record %d not read after resuming", i)
		}
	}
}

// forEachAssignment calls fn with each member's partition count, for classic groups
// (DescribeGroups) and KIP-848 groups (ConsumerGroupDescribe) alike.
func forEachAssignment(ctx context.Context, adm *kadm.Client, group string, fn func(member string, n int)) error {
	cd, err := adm.DescribeConsumerGroups(ctx, group)
	if err == nil {
		if g, ok := cd[group]; ok && g.Err == nil && len(g.Members) > 0 {
			for _, m := range g.Members {
				n := 0
				for _, ps := range m.Assignment {
					n += len(ps)
				}
				fn(m.MemberID, n)
			}
			return nil
		}
	}
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	g := dg[group]
	if g.Err != nil {
		return g.Err
	}
	for _, m := range g.Members {
		n := 0
		if ca, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range ca.Topics {
				n += len(t.Partitions)
			}
		}
		fn(m.MemberID, n)
	}
	return nil
}

func TestKgoClassicGroup(t *testing.T) { groupScenario(t, "classic") }

func TestKgoClassicGroupRange(t *testing.T) {
	groupScenario(t, "classic", kgo.Balancers(kgo.RangeBalancer()))
}

func TestKgoConsumerGroupKIP848(t *testing.T) { groupScenario(t, "consumer", kgo.ServerSideBalancer()) }

func TestKgoConsumerGroupKIP848Range(t *testing.T) {
	groupScenario(t, "consumer", kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
}

// A coordinator restart in the middle of consumption: the members rejoin the new
// coordinator, which resumes from the offsets in the sequencer, and every record is read.
func restartScenario(t *testing.T, opts ...kgo.Opt) {
	tc := newTestCluster(t, map[string]int32{"orders": 4})
	produce(t, tc, "orders", 0, 400)
	var seen sync.Map
	cs := []*consumer{startConsumer(t, tc, "g", "orders", &seen, opts...), startConsumer(t, tc, "g", "orders", &seen, opts...)}
	waitFor(t, "400 records consumed", 30*time.Second, func() bool { return count(&seen) == 400 })
	time.Sleep(500 * time.Millisecond) // autocommits land
	before, err := tc.meta.DescribeKafkaGroup(context.Background(), tc.ns, "g")
	if err != nil {
		t.Fatal(err)
	}
	tc.restartCoordinator()
	// The members learn of the restart at their next heartbeat and join the new coordinator.
	waitFor(t, "both members in the new coordinator's group", 20*time.Second, func() bool {
		n := 0
		if err := forEachAssignment(context.Background(), kadm.NewClient(cs[0].cl), "g", func(string, int) { n++ }); err != nil {
			return false
		}
		return n == 2
	})
	produce(t, tc, "orders", 400, 200)
	waitFor(t, "600 records consumed across the restart", 30*time.Second, func() bool { return count(&seen) == 600 })
	var after meta.KafkaGroupState
	waitFor(t, "every record committed", 20*time.Second, func() bool {
		after, err = tc.meta.DescribeKafkaGroup(context.Background(), tc.ns, "g")
		var sum int64
		for _, o := range after.Offsets {
			sum += o.Offset
		}
		return err == nil && sum == 600
	})
	for _, c := range cs {
		c.stop(t)
	}
	if after.Generation <= before.Generation || after.Epoch <= before.Epoch {
		t.Fatalf("generation %d epoch %d after the restart, %d %d before", after.Generation, after.Epoch, before.Generation, before.Epoch)
	}
	// Records re-read after the restart are at most those consumed but not yet committed.
	dups := 0
	seen.Range(func(_, v any) bool {
		if *v.(*int) > 1 {
			dups++
		}
		return true
	})
	t.Logf("records read twice across the restart: %d", dups)
}

func TestKgoClassicGroupCoordinatorRestart(t *testing.T) { restartScenario(t) }

func TestKgoConsumerGroupCoordinatorRestart(t *testing.T) {
	restartScenario(t, kgo.ServerSideBalancer())
}

// Static membership with kgo (group.instance.id): a follower that restarts within its
// session gets its assignment back without a rebalance (the generation in the sequencer
// does not move) and consumes what was produced meanwhile.
func TestKgoStaticMemberRestartsWithoutRebalance(t *testing.T) {
	tc := newTestCluster(t, map[string]int32{"orders": 4})
	produce(t, tc, "orders", 0, 100)
	var seen sync.Map
	a := startConsumer(t, tc, "g", "orders", &seen, kgo.InstanceID("a"))
	waitFor(t, "a consuming", 20*time.Second, func() bool { return count(&seen) == 100 })
	b := startConsumer(t, tc, "g", "orders", &seen, kgo.InstanceID("b"))
	acl, err := kgo.NewClient(kgo.SeedBrokers(tc.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	stable := func() bool {
		owned := map[string]int{}
		if err := forEachAssignment(context.Background(), adm, "g", func(m string, n int) { owned[m] += n }); err != nil {
			return false
		}
		return len(owned) == 2 && owned[firstKey(owned)] > 0 && owned[lastKey(owned)] > 0
	}
	waitFor(t, "a and b sharing the partitions", 20*time.Second, stable)
	time.Sleep(500 * time.Millisecond) // commits of the first generation land
	before, err := tc.meta.DescribeKafkaGroup(context.Background(), tc.ns, "g")
	if err != nil {
		t.Fatal(err)
	}
	b.stop(t)
	b = startConsumer(t, tc, "g", "orders", &seen, kgo.InstanceID("b"))
	produce(t, tc, "orders", 100, 100)
	waitFor(t, "the records produced across b's restart", 20*time.Second, func() bool { return count(&seen) == 200 })
	after, err := tc.meta.DescribeKafkaGroup(context.Background(), tc.ns, "g")
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation {
		t.Fatalf("generation %d after the static member's restart, %d before: it rebalanced", after.Generation, before.Generation)
	}
	a.stop(t)
	b.stop(t)
}

func firstKey(m map[string]int) string { return sortedKeys(m)[0] }

func lastKey(m map[string]int) string { k := sortedKeys(m); return k[len(k)-1] }
