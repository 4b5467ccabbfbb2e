package grpcapi_test

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

func offsets(res *loamv1pb.ProduceResponse) string {
	out := ""
	for _, o := range res.GetOffsets() {
		out += fmt.Sprintf("%d@%d ", o.GetOffset(), o.GetPartition())
	}
	return out
}

// TestInitProducerGRPC: ProducerService.InitProducer on the real sequencer: new ids, a
// name's epoch bump, a KIP-360 bump, and the refusals.
func TestInitProducerGRPC(t *testing.T) {
	e := start(t, httpapi.Limits{})
	pc := loamv1pb.NewProducerServiceClient(e.conn)
	a, err := pc.InitProducer(ctx(t), &loamv1pb.InitProducerRequest{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := pc.InitProducer(ctx(t), &loamv1pb.InitProducerRequest{Namespace: "default"})
	if err != nil || a.ProducerId == b.ProducerId || a.ProducerId <= 0 || a.Epoch != 0 {
		t.Fatalf("%v %v %v", a, b, err)
	}
	n1, _ := pc.InitProducer(ctx(t), &loamv1pb.InitProducerRequest{Namespace: "default", Name: "billing"})
	n2, err := pc.InitProducer(ctx(t), &loamv1pb.InitProducerRequest{Namespace: "default", Name: "billing"})
	if err != nil || n1.ProducerId != n2.ProducerId || n2.Epoch != n1.Epoch+1 {
		t.Fatalf("named: %v %v %v", n1, n2, err)
	}
	bump, err := pc.InitProducer(ctx(t), &loamv1pb.InitProducerRequest{Namespace: "default", ProducerId: ptr(a.ProducerId), Epoch: ptr[int32](0)})
	if err != nil || bump.ProducerId != a.ProducerId || bump.Epoch != 1 {
		t.Fatalf("bump: %v %v", bump, err)
	}
	pc.InitProducer(ctx(t), &loamv1pb.InitProducerRequest{Namespace: "default", ProducerId: ptr(a.ProducerId), Epoch: ptr[int32](1)})
	_, err = pc.InitProducer(ctx(t), &loamv1pb.InitProducerRequest{Namespace: "default", ProducerId: ptr(a.ProducerId), Epoch: ptr[int32](0)})
	wantStatus(t, "old epoch", err, codes.FailedPrecondition, "producer_fenced")
	for name, req := range map[string]*loamv1pb.InitProducerRequest{
		"no namespace":     {},
		"id without epoch": {Namespace: "default", ProducerId: ptr[int64](1)},
		"epoch without id": {Namespace: "default", Epoch: ptr[int32](1)},
		"epoch too large":  {Namespace: "default", ProducerId: ptr[int64](1), Epoch: ptr[int32](40000)},
		"id zero":          {Namespace: "default", ProducerId: ptr[int64](0), Epoch: ptr[int32](0)},
	} {
		_, err := pc.InitProducer(ctx(t), req)
		wantStatus(t, name, err, codes.InvalidArgument, "invalid_argument")
	}
	_, err = pc.InitProducer(ctx(t), &loamv1pb.InitProducerRequest{Namespace: "nope"})
	wantStatus(t, "missing namespace", err, codes.NotFound, "namespace_not_found")
}

// TestProduceIdempotentGRPC: Produce with a Producer (records) and with batches carrying
// one commits once on the real sequencer: a retry answers the first offsets and writes
// nothing; a gap is FAILED_PRECONDITION out_of_order_sequence, an old epoch producer_fenced.
func TestProduceIdempotentGRPC(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createStream(t, "idem", 2)
	pc := loamv1pb.NewProducerServiceClient(e.conn)
	pid, err := pc.InitProducer(ctx(t), &loamv1pb.InitProducerRequest{Namespace: "default", Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	recs := func(parts ...int32) []*loamv1pb.Record {
		out := make([]*loamv1pb.Record, len(parts))
		for i, p := range parts {
			out[i] = &loamv1pb.Record{Value: fmt.Appendf(nil, "v%d", i), Partition: ptr(p)}
		}
		return out
	}
	produce := func(p *loamv1pb.Producer, r []*loamv1pb.Record) (*loamv1pb.ProduceResponse, error) {
		return e.records.Produce(ctx(t), &loamv1pb.ProduceRequest{Namespace: "default", Stream: "idem", Records: r, Producer: p})
	}
	seqs := func(kv ...int32) *loamv1pb.Producer {
		m := map[int32]int32{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return &loamv1pb.Producer{ProducerId: pid.ProducerId, Epoch: pid.Epoch, Sequences: m}
	}
	first, err := produce(seqs(0, 0, 1, 0), recs(0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	again, err := produce(seqs(0, 0, 1, 0), recs(0, 1, 0))
	if err != nil || offsets(again) != offsets(first) || offsets(first) != "0@0 0@1 1@0 " {
		t.Fatalf("retry %s (%v), first %s", offsets(again), err, offsets(first))
	}
	if next, err := produce(seqs(0, 2), recs(0)); err != nil || offsets(next) != "2@0 " {
		t.Fatalf("next: %s %v", offsets(next), err)
	}
	_, err = produce(seqs(0, 7), recs(0))
	wantStatus(t, "gap", err, codes.FailedPrecondition, "out_of_order_sequence")
	for name, tc := range map[string]struct {
		p *loamv1pb.Producer
		r []*loamv1pb.Record
	}{
		"no partition":       {seqs(0, 3), []*loamv1pb.Record{{Value: []byte("x")}}},
		"no sequences":       {seqs(), recs(0)},
		"missing partition":  {seqs(0, 3), recs(0, 1)},
		"extra partition":    {seqs(0, 3, 1, 1), recs(0)},
		"negative sequence":  {seqs(0, -1), recs(0)},
		"id zero":            {&loamv1pb.Producer{Epoch: 0, Sequences: map[int32]int32{0: 3}}, recs(0)},
		"epoch out of range": {&loamv1pb.Producer{ProducerId: pid.ProducerId, Epoch: 1 << 16, Sequences: map[int32]int32{0: 3}}, recs(0)},
	} {
		_, err := produce(tc.p, tc.r)
		wantStatus(t, name, err, codes.InvalidArgument, "invalid_argument")
	}

	// Raw batches carrying the producer in their headers: partition 1 from sequence 1.
	batch := func(epoch int16, seq int32, n int) []byte {
		rs := make([]recordbatch.Record, n)
		for i := range rs {
			rs[i] = recordbatch.Record{Timestamp: 1, Value: []byte("b")}
		}
		opt := recordbatch.DefaultBuildOptions()
		opt.ProducerID, opt.ProducerEpoch, opt.BaseSequence = pid.ProducerId, epoch, seq
		b, err := recordbatch.Append(nil, rs, opt)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	raw := func(entries ...[]byte) (*loamv1pb.ProduceResponse, error) {
		req := &loamv1pb.ProduceRequest{Namespace: "default", Stream: "idem"}
		for _, b := range entries {
			req.Batches = append(req.Batches, &loamv1pb.RecordBatches{Partition: 1, Batches: b})
		}
		return e.records.Produce(ctx(t), req)
	}
	rb1, err := raw(batch(int16(pid.Epoch), 1, 2), batch(int16(pid.Epoch), 3, 1))
	if err != nil || offsets(rb1) != "1@1 3@1 " {
		t.Fatalf("raw: %s %v", offsets(rb1), err)
	}
	if rb2, err := raw(batch(int16(pid.Epoch), 1, 2), batch(int16(pid.Epoch), 3, 1)); err != nil || offsets(rb2) != offsets(rb1) {
		t.Fatalf("raw retry: %s %v, want %s", offsets(rb2), err, offsets(rb1))
	}
	_, err = raw(batch(int16(pid.Epoch), 9, 1))
	wantStatus(t, "raw batch with a gap", err, codes.FailedPrecondition, "out_of_order_sequence")
	_, err = raw(batch(int16(pid.Epoch), 4, 1), batch(int16(pid.Epoch), 9, 1))
	wantStatus(t, "raw sequences with a gap", err, codes.InvalidArgument, "invalid_record")
	_, err = e.records.Produce(ctx(t), &loamv1pb.ProduceRequest{Namespace: "default", Stream: "idem", Producer: seqs(1, 4),
		Batches: []*loamv1pb.RecordBatches{{Partition: 1, Batches: batch(int16(pid.Epoch), 4, 1)}}})
	wantStatus(t, "producer with batches", err, codes.InvalidArgument, "invalid_argument")

	// Initialized again: the old epoch is fenced on both forms.
	if _, err := pc.InitProducer(ctx(t), &loamv1pb.InitProducerRequest{Namespace: "default", Name: "g"}); err != nil {
		t.Fatal(err)
	}
	_, err = produce(seqs(0, 3), recs(0))
	wantStatus(t, "fenced records", err, codes.FailedPrecondition, "producer_fenced")
	_, err = raw(batch(int16(pid.Epoch), 4, 1))
	wantStatus(t, "fenced batches", err, codes.FailedPrecondition, "producer_fenced")

	got, err := e.streams.GetStream(ctx(t), &loamv1pb.GetStreamRequest{Namespace: "default", Name: "idem"})
	if err != nil {
		t.Fatal(err)
	}
	for _, pi := range got.Stream.PartitionInfo {
		if want := map[int32]int64{0: 3, 1: 4}[pi.Partition]; pi.HighWatermark != want {
			t.Errorf("partition %d high watermark %d, want %d: a retry or a refusal wrote", pi.Partition, pi.HighWatermark, want)
		}
	}
}
