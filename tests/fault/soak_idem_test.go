package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
	"github.com/twmb/franz-go/pkg/kgo"
)

// exactlyOnce remembers the records of an idempotent load: each id sent, and where each
// acknowledged one landed. Its check reads the stream back: every acknowledged record
// present exactly once at its offset, no record twice, nothing that was not sent.
type exactlyOnce struct {
	stopc  chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	acked  map[string][2]int64 // id → partition, offset
	sent   map[string]bool
	failed int // records whose send failed (the outcome unknown: at most once)
	parts  int32
}

func newExactlyOnce(parts int32) *exactlyOnce {
	return &exactlyOnce{stopc: make(chan struct{}), acked: map[string][2]int64{}, sent: map[string]bool{}, parts: parts}
}

func (x *exactlyOnce) stopping() bool {
	select {
	case <-x.stopc:
		return true
	default:
		return false
	}
}

func (x *exactlyOnce) send(ids []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, id := range ids {
		x.sent[id] = true
	}
}

func (x *exactlyOnce) answer(id string, p int32, off int64, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err != nil {
		x.failed++
		return
	}
	x.acked[id] = [2]int64{int64(p), off}
}

// stop stops the load and checks the stream through cl.
func (x *exactlyOnce) stop(t *testing.T, cl *streamapi.Client, stream string) string {
	t.Helper()
	close(x.stopc)
	x.wg.Wait()
	at := map[string][][2]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for q := range x.parts {
		var next int64
		for {
			resp, err := cl.Fetch(ctx, ns, stream, q, next, 4<<20, 0)
			if err != nil {
				if ctx.Err() != nil {
					t.Fatalf("read %s partition %d: %v", stream, q, err)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for _, r := range resp.Records {
				var id string
				if err := json.Unmarshal(r.Value, &id); err != nil {
					t.Fatalf("%s partition %d offset %d: %v", stream, q, next, err)
				}
				at[id] = append(at[id], [2]int64{int64(q), next})
				next++
			}
			if next >= resp.HighWatermark {
				break
			}
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	var bad []string
	for id, where := range at {
		if len(where) > 1 {
			bad = append(bad, fmt.Sprintf("%s present %d times: %v", id, len(where), where))
		}
		if !x.sent[id] {
			bad = append(bad, id+" never sent")
		}
	}
	for id, w := range x.acked {
		if len(at[id]) != 1 || at[id][0] != w {
			bad = append(bad, fmt.Sprintf("acknowledged %s at %v: present at %v", id, w, at[id]))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("stream %s: %d violations:\n%s", stream, len(bad), strings.Join(bad[:min(len(bad), 30)], "\n"))
	}
	return fmt.Sprintf("%d records sent, %d acknowledged (all present once at their offset), %d failed (unknown: none present twice), %d records in the stream (none twice)",
		len(x.sent), len(x.acked), x.failed, len(at))
}

// startGRPCIdempotent runs one idempotent batching producer (streamapi.Producer) per
// log node over gRPC (loam.v1), each sending records whose values name unique ids and
// waiting for their acknowledgements. A producer refused for good (fenced, unknown) is
// replaced by a new one.
func startGRPCIdempotent(t *testing.T, addrs []string, stream string, parts int32) *exactlyOnce {
	t.Helper()
	x := newExactlyOnce(parts)
	cfg := streamapi.ProducerConfig{Linger: 5 * time.Millisecond, MaxRetryTime: 90 * time.Second}
	for i, addr := range addrs {
		c, err := streamapi.DialGRPC(addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		prod, err := streamapi.NewProducer(ctx, c, ns, stream, cfg)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			defer func() { prod.Close(context.Background()) }()
			for n := 0; !x.stopping(); n++ {
				ids := make([]string, 5)
				acks := make([]*streamapi.Ack, len(ids))
				for j := range ids {
					ids[j] = fmt.Sprintf("gi%d-%d-%d", i, n, j)
				}
				x.send(ids)
				refused := false
				for j, id := range ids {
					v, _ := json.Marshal(id)
					a, err := prod.Send(context.Background(), streamapi.Record{Partition: ptr(int32(j) % parts), Value: v})
					if err != nil {
						x.answer(id, 0, 0, err)
						continue
					}
					acks[j] = a
				}
				for j, a := range acks {
					if a == nil {
						continue
					}
					off, err := a.Wait(context.Background())
					x.answer(ids[j], off.Partition, off.Offset, err)
					refused = refused || (err != nil && streamapi.IsProducerRefusal(err))
				}
				if refused {
					// A definite refusal of the producer (fenced, unknown): start a new one.
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					if np, err := streamapi.NewProducer(ctx, c, ns, stream, cfg); err == nil {
						prod.Close(ctx)
						prod = np
					}
					cancel()
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return x
}

// startKafka runs one franz-go client per log node's Kafka listener: idempotent (its
// default), acks=all, each record's value a JSON string naming a unique id, produced
// synchronously.
func startKafka(t *testing.T, brokers []string, topic string, parts int32) *exactlyOnce {
	t.Helper()
	x := newExactlyOnce(parts)
	for i, b := range brokers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(append([]string{b}, brokers...)...), kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond), kgo.RecordDeliveryTimeout(90*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			defer cl.Close()
			for n := 0; !x.stopping(); n++ {
				ids := make([]string, 5)
				recs := make([]*kgo.Record, len(ids))
				for j := range ids {
					ids[j] = fmt.Sprintf("k%d-%d-%d", i, n, j)
					v, _ := json.Marshal(ids[j])
					recs[j] = &kgo.Record{Key: []byte(ids[j]), Value: v}
				}
				x.send(ids)
				res := cl.ProduceSync(context.Background(), recs...)
				for _, r := range res {
					x.answer(string(r.Record.Key), r.Record.Partition, r.Record.Offset, r.Err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return x
}
