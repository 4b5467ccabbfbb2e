package kafka_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/kafka/group"
)

// TestInternalOffsetsTopic: __consumer_offsets is listed as an internal topic (by name and
// among all topics), is empty, cannot be produced to, created or deleted, and a fetch of it
// waits its max wait instead of answering at once.
func TestInternalOffsetsTopic(t *testing.T) {
	e := start(t)
	cl := e.client(t)
	c := ctx(t)
	e.createTopic(t, "plain", 1)
	name := group.OffsetsTopic

	for _, all := range []bool{true, false} {
		req := kmsg.NewPtrMetadataRequest()
		if !all {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(c, cl)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, mt := range resp.Topics {
			if mt.Topic == nil {
				continue
			}
			switch *mt.Topic {
			case name:
				found = true
				if !mt.IsInternal || mt.ErrorCode != 0 || len(mt.Partitions) != 1 {
					t.Fatalf("all=%v: %s: internal %v, error %d, %d partitions", all, name, mt.IsInternal, mt.ErrorCode, len(mt.Partitions))
				}
			case "plain":
				if mt.IsInternal {
					t.Fatal("plain is listed as internal")
				}
			}
		}
		if !found {
			t.Fatalf("all=%v: %s not in Metadata", all, name)
		}
	}

	res := cl.ProduceSync(c, &kgo.Record{Topic: name, Value: []byte("x")})
	if err := res.FirstErr(); err != kerr.InvalidTopicException {
		t.Fatalf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", name, err)
	}
	adm := e.admin(t)
	if r, _ := adm.CreateTopic(c, 1, 1, nil, name); r.Err != kerr.TopicAlreadyExists {
		t.Fatalf("create %s: %v", name, r.Err)
	}
	if r, _ := adm.DeleteTopics(c, name); r[name].Err != kerr.InvalidTopicException {
		t.Fatalf("delete %s: %v", name, r[name].Err)
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = name
	for _, ts := range []int64{-1, -2} {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = 0, ts
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	lr, err := lo.RequestWith(c, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lr.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Offset != 0 {
			t.Fatalf("list offsets of %s: error %d offset %d, want 0", name, p.ErrorCode, p.Offset)
		}
	}

	fr := kmsg.NewPtrFetchRequest()
	fr.MaxWaitMillis, fr.MinBytes, fr.MaxBytes = 300, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = name
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = 0, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	start := time.Now()
	fresp, err := fr.RequestWith(c, cl)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("a fetch of the empty internal topic answered after %v, want its 300 ms wait", took)
	}
	p := fresp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch of %s: error %d hwm %d %d bytes", name, p.ErrorCode, p.HighWatermark, len(p.RecordBatches))
	}
}
