package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaProducerNodeKill: a franz-go idempotent producer (acks=all) writes through the
// Kafka listener of node-1 while node-1 is SIGKILLed twice (the supervisor restarts it).
// Every record the producer saw acknowledged is then read back through node-2 at its
// acknowledged offset, and no record is written twice.
func TestKafkaProducerNodeKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	kport := freeKafkaPorts(t, 2)
	c := Start(t, bins, Options{Sequencers: 1, Nodes: 2, FlushInterval: 50 * time.Millisecond,
		DevArgs: []string{"--kafka-port", strconv.Itoa(kport)}})
	n1, n2 := net.JoinHostPort("127.0.0.1", strconv.Itoa(kport)), net.JoinHostPort("127.0.0.1", strconv.Itoa(kport+1))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	admCl, err := kgo.NewClient(kgo.SeedBrokers(n2))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	if res, err := kadm.NewClient(admCl).CreateTopic(ctx, 4, 1, nil, "kill"); err != nil || res.Err != nil {
		t.Fatalf("create topic: %v %v", err, res.Err)
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(n1), kgo.DefaultProduceTopic("kill"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.RecordDeliveryTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	type ack struct {
		p   int32
		off int64
	}
	var mu sync.Mutex
	acked := map[string]ack{}
	failed := 0
	var wg sync.WaitGroup
	stop := make(chan struct{})
	const workers = 8
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				r := &kgo.Record{Key: []byte(key), Value: []byte(key)}
				err := p.ProduceSync(ctx, r).FirstErr()
				mu.Lock()
				if err == nil {
					acked[key] = ack{r.Partition, r.Offset}
				} else {
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitCount := func(n int) {
		deadline := time.Now().Add(time.Minute)
		for count() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d records acknowledged, want %d", count(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitCount(200)
	for kill := range 2 {
		pid := c.Signal("node-1", syscall.SIGKILL)
		t.Logf("kill %d: SIGKILL node-1 (pid %d) after %d acknowledged", kill+1, pid, count())
		before := count()
		waitCount(before + 200) // the producer goes on once the node is back
	}
	close(stop)
	wg.Wait()
	t.Logf("%d records acknowledged, %d failed", len(acked), failed)

	// Read everything back through node-2.
	cons, err := kgo.NewClient(kgo.SeedBrokers(n2), kgo.ConsumeTopics("kill"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	adm := kadm.NewClient(cons)
	ends, err := adm.ListEndOffsets(ctx, "kill")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	seen := map[string]ack{}
	next := map[int32]int64{}
	for done := false; !done; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			if prev, dup := seen[k]; dup {
				t.Errorf("record %s written twice: at %d/%d and %d/%d", k, prev.p, prev.off, r.Partition, r.Offset)
			}
			seen[k] = ack{r.Partition, r.Offset}
			next[r.Partition] = r.Offset + 1
		})
		done = true
		for p, end := range want {
			if next[p] < end {
				done = false
			}
		}
	}
	for k, a := range acked {
		if got, ok := seen[k]; !ok || got != a {
			t.Errorf("acknowledged record %s at %d/%d: read back %v (present %v)", k, a.p, a.off, got, ok)
		}
	}
}

// freeKafkaPorts finds n consecutive free loopback ports.
func freeKafkaPorts(t *testing.T, n int) int {
	t.Helper()
	_, base := freePortRanges(t, 0, n)
	return base
}
