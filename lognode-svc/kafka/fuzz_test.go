package kafka_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/kafka"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/sequencer-svc/server/servertest"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/walfmt"
)

// fuzzServer is a gateway over a real in-process sequencer and an in-memory bucket, with
// a topic "t" of 2 partitions.
func fuzzServer(t testing.TB) *kafka.Server {
	t.Helper()
	mc := servertest.Client(t)
	if err := mc.CreateNamespace(context.Background(), meta.DefaultNS); err != nil && !strings.Contains(err.Error(), "exists") {
		t.Fatal(err)
	}
	if _, err := mc.CreateStream(context.Background(), meta.StreamConfig{Namespace: meta.DefaultNS, Name: "t", Partitions: 2, Class: meta.ClassStandard,
		Encoding: meta.EncodingKafka, RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete}); err != nil {
		t.Fatal(err)
	}
	b := objstore.NewMem()
	rd, err := reader.New(reader.Config{Bucket: b, Meta: mc, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := writer.NewBuffered(writer.Config{NodeID: "fz", Class: walfmt.ClassStandard, FlushInterval: time.Millisecond, Bucket: b, Meta: mc, Logger: quiet(),
		OnCommit: func(cs []writer.Committed) {
			for _, c := range cs {
				rd.Committed(c.StreamID, c.Partition, c.Entry, c.Batches...)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	writers := map[string]writer.Writer{meta.ClassStandard: w}
	api, err := httpapi.New(httpapi.Config{NodeID: "fz", Meta: mc, Writers: writers, Reader: rd, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := kafka.New(kafka.Config{NodeID: "fz", Meta: mc, Writers: writers, Reader: rd, Streams: api, Logger: quiet(), Self: "127.0.0.1:9092",
		MaxFrameBytes: 1 << 20, Limits: httpapi.Limits{ProduceWait: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// seedFrames are valid request bodies of the keys served.
func seedFrames(t testing.TB) [][]byte {
	var reqs []kmsg.Request
	reqs = append(reqs, kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrMetadataRequest())
	pr := produceReq("t", 0, batch(t, 3, 0, 0, 0))
	fr := fetchReq("t", 0, 0, 1<<20, map[int32][2]int64{0: {0, 1 << 20}, 1: {0, 1}})
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = 1732870000000
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "u", 2, 1
	ct.Topics = append(ct.Topics, ctt)
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dcr := kmsg.NewDescribeConfigsRequestResource()
	dcr.ResourceType, dcr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	dc.Resources = append(dc.Resources, dcr)
	reqs = append(reqs, pr, fr, lo, ct, dc, kmsg.NewPtrInitProducerIDRequest(), kmsg.NewPtrDescribeClusterRequest(), kmsg.NewPtrDeleteTopicsRequest())
	var out [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	for _, r := range reqs {
		for _, v := range []int16{0, 4, 12} {
			r.SetVersion(min(v, r.MaxVersion()))
			out = append(out, f.AppendRequest(nil, r, 1)[4:])
		}
	}
	return out
}

// FuzzDispatch feeds arbitrary request frames through the dispatcher. Invariants: no
// panic; an answer is one whole frame whose length prefix is its length, carrying the
// request's correlation id; a request is either answered or refused with an error
// (connection closed), never both.
func FuzzDispatch(f *testing.F) {
	for _, s := range seedFrames(f) {
		f.Add(s)
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		out, err := s.HandleFrame(ctx, body)
		if err != nil {
			if len(out) != 0 {
				t.Fatalf("refused with %v, yet answered %d bytes", err, len(out))
			}
			return
		}
		if len(out) == 0 {
			return // acks=0 produce
		}
		if len(out) < 8 || int(binary.BigEndian.Uint32(out)) != len(out)-4 {
			t.Fatalf("answer frame of %d bytes with length prefix %d", len(out), binary.BigEndian.Uint32(out))
		}
		if len(body) >= 8 && binary.BigEndian.Uint32(out[4:]) != binary.BigEndian.Uint32(body[4:]) {
			t.Fatalf("answer carries correlation id %d, request %d", binary.BigEndian.Uint32(out[4:]), binary.BigEndian.Uint32(body[4:]))
		}
	})
}
