package kafka_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/recordbatch"
)

// raw sends one request through a kgo client's connection to the node (the version is
// negotiated with ApiVersions, as clients do).
func raw[R kmsg.Response](t testing.TB, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Request(ctx(t), req)
	if err != nil {
		t.Fatalf("request key %d: %v", req.Key(), err)
	}
	return resp.(R)
}

// batch builds one uncompressed RecordBatch v2 of n records, with producer fields.
func batch(t testing.TB, n int, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Timestamp: 1732870000000 + int64(i), Key: []byte{'k', byte(i)}, Value: []byte("value")}
	}
	opts := recordbatch.DefaultBuildOptions()
	b, err := recordbatch.Append(nil, recs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if pid > 0 {
		if err := recordbatch.SetProducer(b, pid, epoch, seq); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func produceReq(topic string, p int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceOne answers the one partition's error code and base offset.
func produceOne(t testing.TB, cl *kgo.Client, topic string, p int32, records []byte) (int16, int64) {
	t.Helper()
	resp := raw[*kmsg.ProduceResponse](t, cl, produceReq(topic, p, records))
	rp := resp.Topics[0].Partitions[0]
	return rp.ErrorCode, rp.BaseOffset
}

// hwm answers a partition's high watermark through the sequencer.
func (e *env) hwm(t testing.TB, topic string, p int32) int64 {
	t.Helper()
	_, parts, err := e.meta.GetStream(context.Background(), "default", topic)
	if err != nil {
		t.Fatal(err)
	}
	return parts[p].HighWatermark
}
