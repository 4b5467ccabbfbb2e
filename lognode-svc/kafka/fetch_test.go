package kafka_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/recordbatch"
)

func fetchReq(topic string, maxWait, minBytes, maxBytes int32, parts map[int32][2]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = maxWait, minBytes, maxBytes, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < int32(len(parts)); p++ {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, parts[p][0], int32(parts[p][1])
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// batches counts the RecordBatches in a fetch answer and checks their baseOffsets run on.
func batches(t testing.TB, b []byte, from int64) int {
	t.Helper()
	n := 0
	for len(b) > 0 {
		bt, rest, err := recordbatch.Parse(b)
		if err != nil {
			t.Fatalf("batch %d: %v", n, err)
		}
		if bt.BaseOffset != from {
			t.Fatalf("batch %d at %d, want %d", n, bt.BaseOffset, from)
		}
		from = bt.LastOffset() + 1
		b, n = rest, n+1
	}
	return n
}

// TestFetchBounds: partition max bytes and max bytes cut the answer at batch bounds (at
// least one batch always comes), the stored bytes come back verbatim with baseOffset
// patched, and an offset past the high watermark answers OFFSET_OUT_OF_RANGE.
func TestFetchBounds(t *testing.T) {
	e := start(t)
	e.createTopic(t, "f", 2)
	cl := e.client(t)
	sent := map[int32][][]byte{}
	for i := range 5 {
		for p := int32(0); p < 2; p++ {
			b := batch(t, 2, 0, 0, 0)
			if c, off := produceOne(t, cl, "f", p, b); c != 0 || off != int64(2*i) {
				t.Fatalf("produce: %v at %d", kerr.ErrorForCode(c), off)
			}
			sent[p] = append(sent[p], b)
		}
	}
	one := len(sent[0][0])
	resp := raw[*kmsg.FetchResponse](t, cl, fetchReq("f", 0, 0, 1<<20, map[int32][2]int64{0: {0, 1}, 1: {0, 1 << 20}}))
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if p0.ErrorCode != 0 || p0.HighWatermark != 10 || batches(t, p0.RecordBatches, 0) != 1 {
		t.Fatalf("partition max bytes 1: %v hwm %d, %d bytes", kerr.ErrorForCode(p0.ErrorCode), p0.HighWatermark, len(p0.RecordBatches))
	}
	if batches(t, p1.RecordBatches, 0) != 5 {
		t.Fatalf("partition 1: %d bytes", len(p1.RecordBatches))
	}
	// Verbatim: the stored bytes are what was sent, but for baseOffset.
	for i, b := range sent[1] {
		want := bytes.Clone(b)
		recordbatch.SetBaseOffset(want, int64(2*i))
		if !bytes.Equal(p1.RecordBatches[i*one:(i+1)*one], want) {
			t.Fatalf("batch %d differs from what was produced", i)
		}
	}
	// Max bytes: the first partition gets its first batch, then the answer is full.
	resp = raw[*kmsg.FetchResponse](t, cl, fetchReq("f", 0, 0, int32(one), map[int32][2]int64{0: {4, 1 << 20}, 1: {0, 1 << 20}}))
	if n := batches(t, resp.Topics[0].Partitions[0].RecordBatches, 4); n != 1 {
		t.Fatalf("max bytes of one batch: partition 0 answered %d batches", n)
	}
	if n := len(resp.Topics[0].Partitions[1].RecordBatches); n != 0 {
		t.Fatalf("max bytes of one batch: partition 1 answered %d bytes", n)
	}
	resp = raw[*kmsg.FetchResponse](t, cl, fetchReq("f", 0, 0, 1<<20, map[int32][2]int64{0: {11, 1 << 20}}))
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.OffsetOutOfRange.Code {
		t.Fatalf("offset past the high watermark: %v", kerr.ErrorForCode(c))
	}
}

// TestFetchLongPoll: a fetch at the high watermark waits until a produce lands (answering
// then, not at max wait), and one that nothing reaches answers empty after max wait.
func TestFetchLongPoll(t *testing.T) {
	e := start(t)
	e.createTopic(t, "lp", 3)
	cl := e.client(t)
	t0 := time.Now()
	resp := raw[*kmsg.FetchResponse](t, cl, fetchReq("lp", 400, 1, 1<<20, map[int32][2]int64{0: {0, 1 << 20}, 1: {0, 1 << 20}, 2: {0, 1 << 20}}))
	if d := time.Since(t0); d < 350*time.Millisecond || len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatalf("empty fetch answered after %v", d)
	}
	p := e.client(t, kgo.DefaultProduceTopic("lp"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	go func() {
		time.Sleep(300 * time.Millisecond)
		p.Produce(ctx(t), &kgo.Record{Partition: 2, Value: []byte("late")}, nil)
	}()
	t0 = time.Now()
	resp = raw[*kmsg.FetchResponse](t, cl, fetchReq("lp", 10000, 1, 1<<20, map[int32][2]int64{0: {0, 1 << 20}, 1: {0, 1 << 20}, 2: {0, 1 << 20}}))
	d := time.Since(t0)
	if n := batches(t, resp.Topics[0].Partitions[2].RecordBatches, 0); n != 1 || d < 250*time.Millisecond || d > 5*time.Second {
		t.Fatalf("long poll: %d batches after %v", n, d)
	}
}
