package node_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
)

// quorumKafkaNodes starts three log nodes with Kafka listeners, sharing a sequencer and a
// bucket, each a member of the quorum journal; tune adjusts each node's configuration.
func quorumKafkaNodes(t *testing.T, tune func(*node.Config)) []*node.Node {
	t.Helper()
	mc := startSequencer(t)
	bucket := objstore.NewMem()
	var voters []node.JournalVoter
	for i := range 3 {
		voters = append(voters, node.JournalVoter{ID: fmt.Sprintf("kq-%d", i), Addr: freeAddr(t)})
	}
	base := t.TempDir()
	nodes := make([]*node.Node, 3)
	for i, v := range voters {
		cfg := node.Config{NodeID: v.ID, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0", Bucket: bucket, Meta: mc,
			FlushInterval: 5 * time.Millisecond, Logger: quiet(),
			Quorum: node.QuorumConfig{Addr: v.Addr, Dir: fmt.Sprintf("%s/%d", base, i), Voters: voters, NoSync: true}}
		if tune != nil {
			tune(&cfg)
		}
		n, err := node.Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
		t.Cleanup(func() { closeNode(nodes[i]) })
	}
	return nodes
}

// journalFollower is the index of a node whose member does not lead the journal, once a
// leader is elected: its produces are forwarded.
func journalFollower(t *testing.T, nodes []*node.Node) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for i, n := range nodes {
			if n != nil && n.QuorumLeader() {
				return (i + 1) % len(nodes)
			}
		}
	}
	t.Fatal("no journal leader within 10 s")
	return -1
}

// kconn is one raw Kafka connection: requests are written back to back and answers read
// in order, as a pipelining client does.
type kconn struct {
	t *testing.T
	c net.Conn
	f *kmsg.RequestFormatter
}

func dialKafka(t *testing.T, addr string) *kconn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &kconn{t: t, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("kq"))}
}

// send writes a produce request (version 9) with correlation id corr.
func (k *kconn) send(req *kmsg.ProduceRequest, corr int32) {
	k.t.Helper()
	req.Version = 9
	if _, err := k.c.Write(k.f.AppendRequest(nil, req, corr)); err != nil {
		k.t.Fatal(err)
	}
}

// answer reads the next produce answer and checks it carries correlation id corr.
func (k *kconn) answer(corr int32) *kmsg.ProduceResponse {
	k.t.Helper()
	k.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(k.c, size[:]); err != nil {
		k.t.Fatalf("answer %d: %v", corr, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(k.c, body); err != nil {
		k.t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		k.t.Fatalf("answer carries correlation id %d, want %d (request order)", got, corr)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if err := resp.ReadFrom(body[5:]); err != nil { // id, then the flexible header's empty tags
		k.t.Fatal(err)
	}
	return resp
}

// produce sends one request and reads its answer.
func (k *kconn) produce(req *kmsg.ProduceRequest, corr int32) *kmsg.ProduceResponse {
	k.t.Helper()
	k.send(req, corr)
	return k.answer(corr)
}

// qbatch builds one batch of n records valued "<tag>-<i>", with producer fields when pid > 0.
func qbatch(t *testing.T, tag string, n int, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{Timestamp: time.Now().UnixMilli(), Value: fmt.Appendf(nil, "%s-%d", tag, i)}
	}
	b, err := recordbatch.Append(nil, recs, recordbatch.DefaultBuildOptions())
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

// part is one partition's records of a produce request.
type part struct {
	topic     string
	partition int32
	records   []byte
}

func produceRequest(acks int16, parts ...part) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 10000
	for _, p := range parts {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = p.topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p.partition, p.records
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// partAnswer is the answer of topic/partition in resp.
func partAnswer(t *testing.T, resp *kmsg.ProduceResponse, topic string, partition int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic == topic && rp.Partition == partition {
				return rp
			}
		}
	}
	t.Fatalf("no answer for %s/%d in %+v", topic, partition, resp)
	return kmsg.ProduceResponseTopicPartition{}
}

func wantPart(t *testing.T, what string, rp kmsg.ProduceResponseTopicPartition, code int16, offset int64) {
	t.Helper()
	if rp.ErrorCode != code || (code == 0 && rp.BaseOffset != offset) {
		m := ""
		if rp.ErrorMessage != nil {
			m = *rp.ErrorMessage
		}
		t.Fatalf("%s: %v at offset %d (%s), want %v at %d", what, kerr.ErrorForCode(rp.ErrorCode), rp.BaseOffset, m, kerr.ErrorForCode(code), offset)
	}
}

func initProducer(t *testing.T, addr string) (int64, int16) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// consumeValues reads topic's partition p from offset 0 to end through addr, checking the
// offsets are dense, and answers the values.
func consumeValues(t *testing.T, addr, topic string, p int32, end int64) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for int64(len(out)) < end {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume %s/%d through %s at %d: %v", topic, p, addr, len(out), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(len(out)) {
				t.Fatalf("%s/%d: record at offset %d after %d records: offsets not dense", topic, p, r.Offset, len(out))
			}
			out = append(out, string(r.Value))
		})
	}
	return out
}

// TestQuorumKafkaProduce: Kafka produce to a quorum topic through a node whose member
// does not lead the journal (forwarded in one hop). Twenty idempotent requests, each also
// carrying a partition of a standard topic, are pipelined on one connection: they answer
// in request order, each partition right, at dense offsets in the order sent (a reordered
// write would be an out-of-order sequence). Then the idempotence answers: a retry is
// success at its original offset, a gap OUT_OF_ORDER_SEQUENCE_NUMBER, a newer epoch starts
// at sequence 0 and the older one is then INVALID_PRODUCER_EPOCH; acks=0 and acks=1
// produces commit in order with the rest; a third node reads it all back.
func TestQuorumKafkaProduce(t *testing.T) {
	nodes := quorumKafkaNodes(t, nil)
	url := "http://" + nodes[0].Addr()
	for _, body := range []string{`{"name":"q","class":"quorum","partitions":2}`, `{"name":"s","partitions":1}`} {
		if a := do(t, "POST", url+"/v1/namespaces/default/streams", "application/json", body, ""); a.status != 201 {
			t.Fatalf("create %s: %d %s", body, a.status, a.body)
		}
	}
	fi := journalFollower(t, nodes)
	addr := nodes[fi].KafkaAddr()
	pid, epoch := initProducer(t, addr)
	k := dialKafka(t, addr)

	const n = 20
	t0 := time.Now()
	for i := range n {
		p := int32(i % 2)
		k.send(produceRequest(-1,
			part{"q", p, qbatch(t, fmt.Sprintf("r%d", i), 2, pid, epoch, int32(2*(i/2)))},
			part{"s", 0, qbatch(t, fmt.Sprintf("s%d", i), 1, 0, 0, 0)}), int32(100+i))
	}
	var sOffsets []int64
	for i := range n {
		resp := k.answer(int32(100 + i))
		wantPart(t, fmt.Sprintf("request %d, quorum partition %d", i, i%2), partAnswer(t, resp, "q", int32(i%2)), 0, int64(2*(i/2)))
		rs := partAnswer(t, resp, "s", 0)
		wantPart(t, fmt.Sprintf("request %d, standard partition", i), rs, 0, rs.BaseOffset)
		sOffsets = append(sOffsets, rs.BaseOffset)
	}
	t.Logf("%d pipelined mixed produces through a journal follower answered in %v", n, time.Since(t0).Round(time.Millisecond))
	for i, off := range sOffsets {
		if off != int64(i) {
			t.Fatalf("standard partition offsets %v: want 0..%d in request order", sOffsets, n-1)
		}
	}

	// A retry of request 14 (partition 0, sequence 14, one of the last 5): its original
	// offset, nothing written.
	wantPart(t, "retry of sequence 14", partAnswer(t, k.produce(produceRequest(-1, part{"q", 0, qbatch(t, "r14", 2, pid, epoch, 14)}), 200), "q", 0), 0, 14)
	wantPart(t, "next sequence after the retry", partAnswer(t, k.produce(produceRequest(-1, part{"q", 0, qbatch(t, "next", 2, pid, epoch, 20)}), 201), "q", 0), 0, 20)
	wantPart(t, "a sequence gap", partAnswer(t, k.produce(produceRequest(-1, part{"q", 0, qbatch(t, "gap", 2, pid, epoch, 40)}), 202), "q", 0), kerr.OutOfOrderSequenceNumber.Code, -1)
	wantPart(t, "a newer epoch at sequence 0", partAnswer(t, k.produce(produceRequest(-1, part{"q", 1, qbatch(t, "e1", 1, pid, epoch+1, 0)}), 203), "q", 1), 0, 20)
	wantPart(t, "the older epoch", partAnswer(t, k.produce(produceRequest(-1, part{"q", 1, qbatch(t, "old", 2, pid, epoch, 20)}), 204), "q", 1), kerr.InvalidProducerEpoch.Code, -1)

	// acks=0 answers nothing; the acks=1 produce after it on the connection commits after it.
	k.send(produceRequest(0, part{"q", 1, qbatch(t, "acks0", 1, 0, 0, 0)}), 205)
	wantPart(t, "acks=1 after acks=0", partAnswer(t, k.produce(produceRequest(1, part{"q", 1, qbatch(t, "acks1", 1, 0, 0, 0)}), 206), "q", 1), 0, 22)

	// Read back through a third node.
	reader := nodes[(fi+1)%3].KafkaAddr()
	var want0, want1 []string
	for i := range n {
		w := &want0
		if i%2 == 1 {
			w = &want1
		}
		*w = append(*w, fmt.Sprintf("r%d-0", i), fmt.Sprintf("r%d-1", i))
	}
	want0 = append(want0, "next-0", "next-1")
	want1 = append(want1, "e1-0", "acks0-0", "acks1-0")
	if got := consumeValues(t, reader, "q", 0, int64(len(want0))); strings.Join(got, ",") != strings.Join(want0, ",") {
		t.Fatalf("partition 0 read back %v, want %v", got, want0)
	}
	if got := consumeValues(t, reader, "q", 1, int64(len(want1))); strings.Join(got, ",") != strings.Join(want1, ",") {
		t.Fatalf("partition 1 read back %v, want %v", got, want1)
	}
}

// TestQuorumKafkaProducerAcrossLeaderLoss: a franz-go idempotent producer (acks=all)
// writing to a quorum topic through one node goes on when the journal leader's node
// closes: every record is acknowledged, and a consumer reads each once, in order.
func TestQuorumKafkaProducerAcrossLeaderLoss(t *testing.T) {
	nodes := quorumKafkaNodes(t, nil)
	if a := do(t, "POST", "http://"+nodes[0].Addr()+"/v1/namespaces/default/streams", "application/json", `{"name":"q","class":"quorum","partitions":1}`, ""); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	fi := journalFollower(t, nodes)
	leader := -1
	for i, n := range nodes {
		if n.QuorumLeader() {
			leader = i
		}
	}
	if leader < 0 || leader == fi {
		t.Fatalf("leader %d, follower %d", leader, fi)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[fi].KafkaAddr()), kgo.DefaultProduceTopic("q"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond), kgo.RecordDeliveryTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const total = 400
	results := make(chan error, total)
	for i := range total {
		if i == total/2 {
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			closeNode(nodes[leader])
			nodes[leader] = nil
		}
		cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}, func(_ *kgo.Record, err error) { results <- err })
	}
	for range total {
		if err := <-results; err != nil {
			t.Fatalf("a record was not acknowledged: %v", err)
		}
	}
	got := consumeValues(t, nodes[fi].KafkaAddr(), "q", 0, total)
	for i, v := range got {
		if v != fmt.Sprintf("v%d", i) {
			t.Fatalf("offset %d holds %s, want v%d", i, v, i)
		}
	}
}

// TestQuorumKafkaErrorCodes: the quorum writer's failures answer the Kafka codes clients
// expect: an append over the journal's entry limit MESSAGE_TOO_LARGE, a full journal the
// retriable KAFKA_STORAGE_ERROR, and, once no journal leader can be reached within the
// node's retries, the retriable NOT_LEADER_OR_FOLLOWER (a standard partition in the same
// request commits meanwhile).
func TestQuorumKafkaErrorCodes(t *testing.T) {
	nodes := quorumKafkaNodes(t, func(c *node.Config) {
		c.Quorum.NoOffload = true
		c.Quorum.Member.MaxEntryBytes = 64 << 10
		c.Quorum.Member.MaxRetainedBytes = 256 << 10
		c.Quorum.RetryFor = 2 * time.Second
	})
	url := "http://" + nodes[0].Addr()
	for _, body := range []string{`{"name":"q","class":"quorum","partitions":1}`, `{"name":"s","partitions":1}`} {
		if a := do(t, "POST", url+"/v1/namespaces/default/streams", "application/json", body, ""); a.status != 201 {
			t.Fatalf("create %s: %d %s", body, a.status, a.body)
		}
	}
	fi := journalFollower(t, nodes)
	k := dialKafka(t, nodes[fi].KafkaAddr())
	big := func(tag string, size int) []byte {
		b, err := recordbatch.Append(nil, []recordbatch.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte(tag + strings.Repeat("x", size))}}, recordbatch.DefaultBuildOptions())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rp := partAnswer(t, k.produce(produceRequest(-1, part{"q", 0, big("huge", 100<<10)}), 1), "q", 0)
	wantPart(t, "an append over the journal's entry limit", rp, kerr.MessageTooLarge.Code, -1)

	// Fill the journal (nothing is offloaded): 60 KiB appends until refused.
	full := false
	for i := 0; i < 20 && !full; i++ {
		rp := partAnswer(t, k.produce(produceRequest(-1, part{"q", 0, big(fmt.Sprintf("fill%d", i), 60<<10)}), int32(10+i)), "q", 0)
		switch rp.ErrorCode {
		case 0:
		case kerr.KafkaStorageError.Code:
			if rp.ErrorMessage == nil || !strings.Contains(*rp.ErrorMessage, "full") {
				t.Fatalf("journal full answered %v", rp.ErrorMessage)
			}
			full = true
		default:
			t.Fatalf("filling the journal: %v", kerr.ErrorForCode(rp.ErrorCode))
		}
	}
	if !full {
		t.Fatal("the journal never answered full")
	}
	if !kerr.IsRetriable(kerr.ErrorForCode(kerr.KafkaStorageError.Code)) {
		t.Fatal("KAFKA_STORAGE_ERROR is not retriable for clients")
	}

	// The two other members gone, no leader can be elected: the node retries for its
	// RetryFor, then answers NOT_LEADER_OR_FOLLOWER; the standard partition commits.
	for i := range nodes {
		if i != fi {
			closeNode(nodes[i])
			nodes[i] = nil
		}
	}
	t0 := time.Now()
	resp := k.produce(produceRequest(-1, part{"q", 0, qbatch(t, "noleader", 1, 0, 0, 0)}, part{"s", 0, qbatch(t, "std", 1, 0, 0, 0)}), 50)
	wantPart(t, "quorum partition without a journal leader", partAnswer(t, resp, "q", 0), kerr.NotLeaderForPartition.Code, -1)
	wantPart(t, "standard partition of the same request", partAnswer(t, resp, "s", 0), 0, 0)
	if d := time.Since(t0); d < 2*time.Second || d > 8*time.Second {
		t.Fatalf("answered after %v: want the node's 2 s of retries", d)
	}
}

// TestQuorumKafkaKeyedNamespaceRefused, against the embedded local-kms: a quorum topic of
// a namespace with a key is refused by Kafka produce with the non-retriable
// INVALID_REQUEST and a message that says why (the journal's log would hold its batches in
// the clear), and by HTTP produce with 400 invalid_argument.
func TestQuorumKafkaKeyedNamespaceRefused(t *testing.T) {
	raw := localKMS(t)
	nodes := quorumKafkaNodes(t, func(c *node.Config) { c.KMS, c.KMSAdmin = raw, raw })
	url := "http://" + nodes[0].Addr()
	if a := do(t, "PUT", url+"/v1/namespaces/default/key", "application/json", `{"create":true}`, ""); a.status != 200 {
		t.Fatalf("attach a key: %d %s", a.status, a.body)
	}
	if a := do(t, "POST", url+"/v1/namespaces/default/streams", "application/json", `{"name":"q","class":"quorum"}`, ""); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	k := dialKafka(t, nodes[journalFollower(t, nodes)].KafkaAddr())
	rp := partAnswer(t, k.produce(produceRequest(-1, part{"q", 0, qbatch(t, "secret", 1, 0, 0, 0)}), 1), "q", 0)
	wantPart(t, "quorum topic of a keyed namespace", rp, kerr.InvalidRequest.Code, -1)
	if rp.ErrorMessage == nil || !strings.Contains(*rp.ErrorMessage, "namespace with a key") {
		t.Fatalf("message %v does not say why", rp.ErrorMessage)
	}
	if kerr.IsRetriable(kerr.ErrorForCode(rp.ErrorCode)) {
		t.Fatal("the refusal is retriable: clients would retry it forever")
	}
	if a := do(t, "POST", url+"/v1/namespaces/default/streams/q/records", "application/json", `{"records":[{"value":1}]}`, ""); a.status != 400 || !strings.Contains(string(a.body), "invalid_argument") {
		t.Fatalf("HTTP produce: %d %s, want 400 invalid_argument", a.status, a.body)
	}
}
