package kafka_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKgoProduceConsume produces keyed records with headers through franz-go to 16
// partitions with acks=all and idempotence (the client's default), consumes them back
// from the start, and checks every record's key, value, headers, timestamp and that
// offsets are dense per partition.
func TestKgoProduceConsume(t *testing.T) {
	e := start(t)
	e.createTopic(t, "orders", 16)
	p := e.client(t, kgo.DefaultProduceTopic("orders"), kgo.ProducerLinger(5*time.Millisecond), kgo.RequiredAcks(kgo.AllISRAcks()))
	const n = 2000
	ts := time.UnixMilli(1732870000000)
	want := map[string]*kgo.Record{}
	var rs []*kgo.Record
	for i := range n {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat([]byte{byte(i)}, 100+i%50), Timestamp: ts.Add(time.Duration(i) * time.Millisecond),
			Headers: []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "v%d", i)}, {Key: "h", Value: nil}}}
		want[string(r.Key)] = r
		rs = append(rs, r)
	}
	if err := p.ProduceSync(ctx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]int64{}
	for _, r := range rs {
		acked[string(r.Key)] = r.Offset
	}
	c := e.client(t, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	got := 0
	next := map[int32]int64{}
	for got < n {
		fs := c.PollFetches(ctx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			w := want[string(r.Key)]
			switch {
			case w == nil:
				t.Fatalf("unexpected record %q", r.Key)
			case !bytes.Equal(r.Value, w.Value) || !r.Timestamp.Equal(w.Timestamp) || len(r.Headers) != 2 ||
				!bytes.Equal(r.Headers[0].Value, w.Headers[0].Value) || r.Headers[1].Value != nil:
				t.Fatalf("record %q differs: %+v, want %+v", r.Key, r, w)
			case r.Offset != acked[string(r.Key)]:
				t.Fatalf("record %q at offset %d, acknowledged at %d", r.Key, r.Offset, acked[string(r.Key)])
			case r.Offset != next[r.Partition]:
				t.Fatalf("partition %d: offset %d, want %d (dense)", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	if len(next) != 16 {
		t.Fatalf("records reached %d partitions, want 16", len(next))
	}
}
