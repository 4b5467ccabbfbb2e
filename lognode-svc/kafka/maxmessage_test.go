package kafka_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/meta"
)

// TestMaxMessageBytes: max.message.bytes is a topic config (create, describe, incremental
// and whole alter), and produce honours it, below and above the node's record limit.
func TestMaxMessageBytes(t *testing.T) {
	e := start(t)
	adm := e.admin(t)
	c := ctx(t)
	small := "51200"
	if res, err := adm.CreateTopic(c, 1, 1, map[string]*string{"max.message.bytes": &small}, "mm"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	describe := func() (string, bool) {
		t.Helper()
		rc, err := adm.DescribeTopicConfigs(c, "mm")
		if err != nil || rc[0].Err != nil {
			t.Fatalf("describe configs: %v %v", err, rc[0].Err)
		}
		for _, kv := range rc[0].Configs {
			if kv.Key == "max.message.bytes" {
				return kv.MaybeValue(), kv.Source == 5 // DEFAULT_CONFIG
			}
		}
		t.Fatal("describe configs: no max.message.bytes")
		return "", false
	}
	if v, def := describe(); v != small || def {
		t.Fatalf("max.message.bytes %q (default %v), want %s set on the topic", v, def, small)
	}
	p := e.client(t, kgo.DefaultProduceTopic("mm"), kgo.ProducerBatchMaxBytes(4<<20), kgo.UnknownTopicRetries(-1))
	produce := func(n int) error {
		v := make([]byte, n)
		rand.Read(v) // incompressible: the batch is as large as the record
		return p.ProduceSync(c, &kgo.Record{Value: v}).FirstErr()
	}
	if err := produce(40 << 10); err != nil {
		t.Fatalf("a 40 KiB record under a 50 KiB max.message.bytes: %v", err)
	}
	if err := produce(60 << 10); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a 60 KiB record over a 50 KiB max.message.bytes: %v, want MESSAGE_TOO_LARGE", err)
	}
	// Above the node's record limit: a topic may allow larger batches, as Kafka's may.
	big := strconv.Itoa(3 << 20)
	if r, err := adm.AlterTopicConfigs(c, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &big}}, "mm"); err != nil || r[0].Err != nil {
		t.Fatalf("incremental alter: %v %v", err, r[0].Err)
	}
	if v, _ := describe(); v != big {
		t.Fatalf("after alter: max.message.bytes %q, want %s", v, big)
	}
	if err := produce(httpapi.DefaultMaxRecordBytes + 512<<10); err != nil {
		t.Fatalf("a 1.5 MiB record under a 3 MiB max.message.bytes: %v", err)
	}
	if r, err := adm.AlterTopicConfigs(c, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "max.message.bytes"}}, "mm"); err != nil || r[0].Err != nil {
		t.Fatalf("incremental delete: %v %v", err, r[0].Err)
	}
	if v, def := describe(); v != strconv.Itoa(httpapi.DefaultMaxRecordBytes) || !def {
		t.Fatalf("after delete: max.message.bytes %q (default %v), want the node's %d", v, def, httpapi.DefaultMaxRecordBytes)
	}
	if err := produce(httpapi.DefaultMaxRecordBytes + 512<<10); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a 1.5 MiB record at the node's 1 MiB limit: %v, want MESSAGE_TOO_LARGE", err)
	}
	// A whole alter naming it sets it; one not naming it resets it.
	if r, err := adm.AlterTopicConfigsState(c, []kadm.AlterConfig{{Name: "max.message.bytes", Value: &small}}, "mm"); err != nil || r[0].Err != nil {
		t.Fatalf("alter: %v %v", err, r[0].Err)
	}
	if v, _ := describe(); v != small {
		t.Fatalf("after a whole alter: %q", v)
	}
	for _, bad := range []string{"0", "-1", "x", strconv.Itoa(meta.MaxMessageBytesLimit + 1)} {
		r, err := adm.AlterTopicConfigs(c, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &bad}}, "mm")
		if err != nil || !errors.Is(r[0].Err, kerr.InvalidConfig) {
			t.Fatalf("max.message.bytes %q: %v %v, want INVALID_CONFIG", bad, err, r[0].Err)
		}
	}
	if v, _ := describe(); v != small {
		t.Fatalf("a refused alter changed max.message.bytes to %q", v)
	}
}

// TestProducerRecoversAfterRefusedBatch: after a batch refused MESSAGE_TOO_LARGE, kgo bumps
// its idempotent producer's epoch locally, then (refused UNKNOWN_PRODUCER_ID) asks
// InitProducerId to bump the epoch it made up. The gateway answers with a new producer, so
// the next record is written instead of retried forever.
func TestProducerRecoversAfterRefusedBatch(t *testing.T) {
	e := start(t)
	e.createTopic(t, "rec", 1)
	p := e.client(t, kgo.DefaultProduceTopic("rec"), kgo.ProducerBatchMaxBytes(4<<20))
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := make([]byte, httpapi.DefaultMaxRecordBytes+1024)
	rand.Read(big)
	if err := p.ProduceSync(c, &kgo.Record{Value: big}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a record over the node's limit: %v, want MESSAGE_TOO_LARGE", err)
	}
	for i := range 3 {
		r := &kgo.Record{Value: []byte("after")}
		if err := p.ProduceSync(c, r).FirstErr(); err != nil {
			t.Fatalf("record %d after the refused batch: %v", i, err)
		}
		if r.Offset != int64(i) {
			t.Fatalf("record %d at offset %d", i, r.Offset)
		}
	}
}

// TestProduceLargeRequestChecksInParallel: a produce large enough that its partitions are
// checked on several goroutines answers each partition its own outcome, in place: the
// good ones commit with consecutive offsets, a bad CRC and a missing partition are refused
// alone.
func TestProduceLargeRequestChecksInParallel(t *testing.T) {
	e := start(t)
	e.createTopic(t, "par", 8)
	cl := e.client(t)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "par"
	value := make([]byte, 48<<10)
	rand.Read(value)
	for p := range int32(9) { // partition 8 does not exist
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		for range 2 {
			rp.Records = append(rp.Records, bigBatch(t, value)...)
		}
		if p == 3 {
			rp.Records[len(rp.Records)-1] ^= 1 // the CRC no longer matches
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := raw[*kmsg.ProduceResponse](t, cl, req)
	for i, rp := range resp.Topics[0].Partitions {
		want := int16(0)
		switch i {
		case 3:
			want = kerr.CorruptMessage.Code
		case 8:
			want = kerr.UnknownTopicOrPartition.Code
		}
		if rp.Partition != int32(i) || rp.ErrorCode != want {
			t.Fatalf("answer %d: partition %d code %d, want partition %d code %d (%v)", i, rp.Partition, rp.ErrorCode, i, want, rp.ErrorMessage)
		}
		if want == 0 && (rp.BaseOffset != 0 || e.hwm(t, "par", int32(i)) != 2) {
			t.Fatalf("partition %d: base offset %d, high watermark %d", i, rp.BaseOffset, e.hwm(t, "par", int32(i)))
		}
		if i == 3 && e.hwm(t, "par", 3) != 0 {
			t.Fatal("the refused partition was written")
		}
	}
}

// TestLocalEpochBumpOnlyOfIssuedProducers: a first batch at a new epoch is taken for a
// producer this node issued (the sequencer bumps it), and refused UNKNOWN_PRODUCER_ID for an
// id it never issued, without the sequencer allocating anything for it.
func TestLocalEpochBumpOnlyOfIssuedProducers(t *testing.T) {
	e := start(t)
	e.createTopic(t, "bump", 1)
	cl := e.client(t)
	ip := raw[*kmsg.InitProducerIDResponse](t, cl, kmsg.NewPtrInitProducerIDRequest())
	if ip.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(ip.ErrorCode))
	}
	pid, ep := ip.ProducerID, ip.ProducerEpoch
	if c, _ := produceOne(t, cl, "bump", 0, batch(t, 2, pid, ep, 0)); c != 0 {
		t.Fatal(kerr.ErrorForCode(c))
	}
	// The client bumps the epoch itself and restarts its sequence.
	if c, off := produceOne(t, cl, "bump", 0, batch(t, 1, pid, ep+1, 0)); c != 0 || off != 2 {
		t.Fatalf("first batch at the locally bumped epoch: %v at %d", kerr.ErrorForCode(c), off)
	}
	if c, off := produceOne(t, cl, "bump", 0, batch(t, 1, pid, ep+1, 1)); c != 0 || off != 3 {
		t.Fatalf("next batch: %v at %d", kerr.ErrorForCode(c), off)
	}
	if c, _ := produceOne(t, cl, "bump", 0, batch(t, 1, pid, ep, 2)); c != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("the old epoch after the bump: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(c))
	}
	stranger := pid + 1000
	if c, _ := produceOne(t, cl, "bump", 0, batch(t, 1, stranger, 3, 0)); c != kerr.UnknownProducerID.Code {
		t.Fatalf("an id never issued: %v, want UNKNOWN_PRODUCER_ID", kerr.ErrorForCode(c))
	}
	next := raw[*kmsg.InitProducerIDResponse](t, cl, kmsg.NewPtrInitProducerIDRequest())
	if next.ErrorCode != 0 || next.ProducerID != pid+1 {
		t.Fatalf("the next producer is %d (%v), want %d: the stranger's batch allocated one", next.ProducerID, kerr.ErrorForCode(next.ErrorCode), pid+1)
	}
}
