package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loamhq/loam/shared/streamapi"
)

// TestQuorumKafkaJournalKills: a franz-go idempotent producer (acks=all) writes to a
// quorum topic through the Kafka listeners of all three nodes of `loam dev --nodes 3
// --journal-port P` (node-1..node-3 are the journal's members; each partition's Kafka
// leader is one of the nodes, so most produces are forwarded to the journal's leader)
// while the journal leader's node is SIGKILLed twice (the supervisor restarts it). Produce
// resumes after each kill; the checker reads every partition back through every node and
// finds every acknowledged record once at its acknowledged offset, none doubled, offsets
// dense and in order.
func TestQuorumKafkaJournalKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	const topic, parts = "kq", int32(4)
	jport, kport := freePortRanges(t, 3, 3)
	c := Start(t, bins, Options{Sequencers: 1, Nodes: 3,
		DevArgs: []string{"--journal-port", strconv.Itoa(jport), "--kafka-port", strconv.Itoa(kport)}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Client(0).CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: topic, Partitions: ptr(parts), Class: "quorum"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		for {
			if _, err := c.Client(i).GetStream(ctx, ns, topic); err == nil {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("node %d never saw topic %s: %v", i, topic, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var seeds []string
	for i := range 3 {
		seeds = append(seeds, net.JoinHostPort("127.0.0.1", strconv.Itoa(kport+i)))
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordDeliveryTimeout(time.Minute), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	l := NewLedger()
	var stop atomic.Bool
	var inflight sync.WaitGroup
	sem := make(chan struct{}, 256) // records in flight
	var nextID atomic.Int64
	var acked, failed atomic.Int64
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for !stop.Load() {
			sem <- struct{}{}
			id := nextID.Add(1)
			k := AttemptKey{ID: id}
			part := int32(id % int64(parts))
			rec, value := makeRecord(k, part, 32)
			l.sent([]AttemptKey{k}, []int32{part}, []streamapi.Record{rec}, [][]byte{value}, "kafka")
			kr := &kgo.Record{Partition: part, Key: []byte(*rec.Key), Value: value, Headers: []kgo.RecordHeader{
				{Key: "id", Value: []byte(strconv.FormatInt(k.ID, 10))}, {Key: "a", Value: []byte("0")}}}
			sent := time.Now()
			inflight.Add(1)
			p.Produce(ctx, kr, func(r *kgo.Record, err error) {
				defer inflight.Done()
				defer func() { <-sem }()
				req := Request{Sent: sent, Done: time.Now(), Node: "kafka", Records: 1, OK: err == nil}
				if err != nil {
					// The client gave up on the record: it may or may not have been written.
					failed.Add(1)
					req.Err, req.Kind = err.Error(), "kafka"
					l.answered([]AttemptKey{k}, req, nil, Unknown)
					return
				}
				acked.Add(1)
				l.answered([]AttemptKey{k}, req, []streamapi.RecordOffset{{Partition: r.Partition, Offset: r.Offset}}, Acked)
			})
		}
	}()
	waitAcked := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); acked.Load() < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d records acknowledged, want %d", acked.Load(), n)
			}
		}
	}
	waitAcked(500)
	var gaps []time.Duration
	for kill := range 2 {
		leader := waitJournalLeader(t, c, 10*time.Second)
		id := fmt.Sprintf("node-%d", leader+1)
		before := acked.Load()
		at := time.Now()
		old := c.Kill(id)
		for {
			if d, ok := l.Resumption(at); ok {
				gaps = append(gaps, d)
				t.Logf("kill %d: journal leader %s SIGKILLed after %d acknowledged: Kafka produce resumed after %s", kill+1, id, before, d.Round(time.Millisecond))
				break
			}
			if time.Since(at) > 20*time.Second {
				t.Fatalf("Kafka produce did not resume within 20 s of killing the journal leader %s", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.WaitRestarted(id, old, 15*time.Second)
		waitAcked(acked.Load() + 500) // every node back: the partitions it leads for Kafka go on
	}
	stop.Store(true)
	<-loopDone
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	inflight.Wait()
	t.Logf("kgo producer: %d records acknowledged, %d given up", acked.Load(), failed.Load())

	rep, err := c.FinalCheck(ctx, l, ns, topic, parts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checker: %s", rep)
	if len(rep.Violations) > 0 {
		t.Fatalf("checker found %d violations:\n%v", len(rep.Violations), rep.Violations)
	}
	if rep.Acked == 0 || int64(rep.Acked) != acked.Load() {
		t.Fatalf("checked %d acknowledged records, the producer saw %d", rep.Acked, acked.Load())
	}
	if pr := c.LogProblems(); len(pr) > 0 {
		t.Fatalf("children logged races or crashes:\n%v", pr)
	}
	worst := max(gaps[0], gaps[1])
	t.Logf("FIGURE quorum Kafka produce resumed after a journal-leader SIGKILL: %s and %s (max %s), %d records checked",
		gaps[0].Round(time.Millisecond), gaps[1].Round(time.Millisecond), worst.Round(time.Millisecond), rep.Records)
	if worst >= 5*time.Second {
		t.Fatalf("Kafka produce took %s to resume after a journal-leader kill: limit 5 s", worst)
	}
}
