package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKgoGroupsThroughGateway: a log node serves consumer groups with the coordinator it
// builds itself (package kafka/group). Two kgo members of one group, classic and then
// KIP-848, both get partitions of the topic, consume every record once between them and
// commit; a member started after they left resumes at the committed offsets: it gets only
// the records produced later.
func TestKgoGroupsThroughGateway(t *testing.T) {
	for _, proto := range []string{"classic", "consumer"} {
		t.Run(proto, func(t *testing.T) {
			e := start(t)
			topic := "g-" + proto
			e.createTopic(t, topic, 6)
			p := e.client(t, kgo.DefaultProduceTopic(topic))
			produce := func(from, n int) {
				var rs []*kgo.Record
				for i := from; i < from+n; i++ {
					rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
				}
				if err := p.ProduceSync(ctx(t), rs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			assigned := map[int]int{} // member → partitions held
			opts := func(i int) []kgo.Opt {
				o := []kgo.Opt{kgo.ConsumerGroup("grp-" + proto), kgo.ConsumeTopics(topic),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
					kgo.DisableAutoCommit(),
					kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
						mu.Lock()
						assigned[i] += len(m[topic])
						mu.Unlock()
					}),
					kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
						mu.Lock()
						assigned[i] -= len(m[topic])
						mu.Unlock()
					})}
				if proto == "consumer" {
					o = append(o, kgo.GroupProtocol("consumer")) // KIP-848
				}
				return o
			}
			members := []*kgo.Client{e.client(t, opts(0)...), e.client(t, opts(1)...)}
			poll := func(c *kgo.Client, fn func(*kgo.Record)) {
				pctx, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
				defer cancel()
				c.PollFetches(pctx).EachRecord(fn)
			}
			// Both members join and split the six partitions before anything is produced.
			deadline := time.Now().Add(30 * time.Second)
			for {
				for _, c := range members {
					poll(c, func(*kgo.Record) {})
				}
				mu.Lock()
				both := assigned[0] > 0 && assigned[1] > 0 && assigned[0]+assigned[1] == 6
				got := fmt.Sprint(assigned)
				mu.Unlock()
				if both {
					t.Logf("partitions per member: %s", got)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the two members never split the 6 partitions: %s", got)
				}
			}
			produce(0, 300)
			seen := map[string]int{}
			for len(seen) < 300 && time.Now().Before(deadline) {
				for _, c := range members {
					poll(c, func(r *kgo.Record) { seen[string(r.Key)]++ })
					if err := c.CommitUncommittedOffsets(ctx(t)); err != nil {
						t.Fatalf("commit: %v", err)
					}
				}
			}
			if len(seen) != 300 {
				t.Fatalf("consumed %d distinct records of 300", len(seen))
			}
			for k, n := range seen {
				if n != 1 {
					t.Fatalf("record %s consumed %d times by the group", k, n)
				}
			}
			for _, c := range members {
				c.Close() // leaves the group
			}
			produce(300, 20)
			late := e.client(t, opts(2)...)
			got := map[string]bool{}
			for len(got) < 20 && time.Now().Before(deadline) {
				poll(late, func(r *kgo.Record) {
					var i int
					fmt.Sscanf(string(r.Key), "k%d", &i)
					if i < 300 {
						t.Fatalf("the member started after the commits got %s again: it did not resume at the committed offsets", r.Key)
					}
					got[string(r.Key)] = true
				})
			}
			if len(got) != 20 {
				t.Fatalf("the late member got %d of the 20 new records", len(got))
			}
		})
	}
}
