package grpcapi

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

func seedBatch(tb testing.TB, c recordbatch.Compression, recs ...recordbatch.Record) []byte {
	opt := recordbatch.DefaultBuildOptions()
	opt.Compression = c
	b, err := recordbatch.Append(nil, recs, opt)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func marshal(tb testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzProduceRequest runs wire bytes of a ProduceRequest through the produce handler's
// conversion (planProduce). It must never panic; what it accepts is well-formed: one
// answer entry per record or RecordBatches entry, parts of distinct partitions in range
// whose bytes validate as RecordBatch v2 and consume exactly the parts' offset counts,
// within the limits.
func FuzzProduceRequest(f *testing.F) {
	good := seedBatch(f, recordbatch.None, recordbatch.Record{Key: []byte("k"), Value: []byte("v"),
		Headers: []recordbatch.Header{{Key: "h", Value: nil}}})
	zstd := seedBatch(f, recordbatch.Zstd, recordbatch.Record{Value: []byte("a")}, recordbatch.Record{OffsetDelta: 1, Value: []byte("b")})
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1
	for _, m := range []*loamv1pb.ProduceRequest{
		{Records: []*loamv1pb.Record{{Key: []byte("k"), Value: []byte("v"), Headers: []*loamv1pb.Header{{Key: "a", Value: []byte{}}, {Key: "a"}}}}},
		{Records: []*loamv1pb.Record{{Partition: proto.Int32(1)}, {Partition: proto.Int32(0), TimestampMs: proto.Int64(5)}, {Key: []byte{}}}},
		{Records: []*loamv1pb.Record{{Offset: proto.Int64(1)}}},
		{Batches: []*loamv1pb.RecordBatches{{Partition: 1, Batches: append(append([]byte(nil), good...), zstd...)}, {Partition: 1, Batches: good}}},
		{Batches: []*loamv1pb.RecordBatches{{Partition: 0, Batches: bad}}},
		{Batches: []*loamv1pb.RecordBatches{{Partition: 0, Batches: good[:20]}}},
		{Records: []*loamv1pb.Record{{Partition: proto.Int32(1)}, {Partition: proto.Int32(0)}},
			Producer: &loamv1pb.Producer{ProducerId: 7, Epoch: 1, Sequences: map[int32]int32{0: 5, 1: 2147483647}}},
		{Batches: []*loamv1pb.RecordBatches{{Partition: 1, Batches: idemSeed(f, 0)}, {Partition: 1, Batches: idemSeed(f, 1)}}},
		{},
	} {
		f.Add(marshal(f, m), uint8(2))
	}
	lim := httpapi.Limits{MaxRecordBytes: 4096, MaxRequestBytes: 1 << 20, MaxRecords: 64}.WithDefaults()
	f.Fuzz(func(t *testing.T, wire []byte, parts uint8) {
		var req loamv1pb.ProduceRequest
		if proto.Unmarshal(wire, &req) != nil {
			return
		}
		partitions := int32(parts%8) + 1
		p, err := planProduce(&req, partitions, lim, 7, 1000)
		if err != nil {
			if _, ok := err.(*inputError); !ok {
				t.Fatalf("refusal %T %v is not an input error", err, err)
			}
			return
		}
		want := len(req.Records)
		if want == 0 {
			want = len(req.Batches)
		}
		if len(p.entries) != want || want == 0 {
			t.Fatalf("%d answer entries for %d inputs", len(p.entries), want)
		}
		if p.records > int64(lim.MaxRecords) {
			t.Fatalf("%d records accepted, limit %d", p.records, lim.MaxRecords)
		}
		seen := map[int32]bool{}
		for _, pt := range p.parts {
			if pt.partition < 0 || pt.partition >= partitions || seen[pt.partition] {
				t.Fatalf("part of partition %d (of %d), seen %v", pt.partition, partitions, seen)
			}
			seen[pt.partition] = true
			bs, err := recordbatch.Validate(pt.batches)
			if err != nil {
				t.Fatalf("accepted bytes do not validate: %v", err)
			}
			var n int64
			for _, b := range bs {
				n += b.OffsetCount()
			}
			if n != pt.records {
				t.Fatalf("part of partition %d: batches hold %d offsets, the writer is told %d", pt.partition, n, pt.records)
			}
		}
		for _, e := range p.entries {
			if e.part < 0 || e.part >= len(p.parts) || e.delta < 0 || e.delta >= p.parts[e.part].records {
				t.Fatalf("entry %+v outside its part", e)
			}
		}
		reqs := make([]writer.Request, len(p.parts))
		for i, pt := range p.parts {
			reqs[i] = writer.Request{Partition: pt.partition, Batches: pt.batches, Records: pt.records}
		}
		if err := withProducer(&req, p, reqs); err != nil {
			if _, ok := err.(*inputError); !ok {
				t.Fatalf("producer refusal %T %v is not an input error", err, err)
			}
			return
		}
		for _, r := range reqs {
			if !r.Producer.Has() {
				continue
			}
			if r.Producer.Epoch < 0 || r.Producer.BaseSequence < 0 {
				t.Fatalf("accepted producer %+v", r.Producer)
			}
			bs, err := recordbatch.Validate(r.Batches)
			if err != nil {
				t.Fatalf("batches with the producer set do not validate: %v", err)
			}
			if b := bs[0]; b.ProducerID != r.Producer.ID || b.ProducerEpoch != r.Producer.Epoch || b.BaseSequence != r.Producer.BaseSequence {
				t.Fatalf("first batch carries %d/%d/%d, the request %+v", b.ProducerID, b.ProducerEpoch, b.BaseSequence, r.Producer)
			}
		}
	})
}

// idemSeed is a one-record batch of producer 7, epoch 0, at sequence seq.
func idemSeed(tb testing.TB, seq int32) []byte {
	opt := recordbatch.DefaultBuildOptions()
	opt.ProducerID, opt.ProducerEpoch, opt.BaseSequence = 7, 0, seq
	b, err := recordbatch.Append(nil, []recordbatch.Record{{Value: []byte("i")}}, opt)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// stubCatalog describes every stream as the same 3-partition stream.
type stubCatalog struct{}

func (stubCatalog) Stream(context.Context, string, string) (meta.Stream, error) {
	return meta.Stream{ID: 1, StreamConfig: meta.StreamConfig{Name: "s", Partitions: 3}}, nil
}
func (stubCatalog) StreamsChanged() {}

// FuzzReadRequest runs wire bytes of a FetchRequest and a SubscribeRequest through the
// read handlers' checks: never a panic, and what passes is in range.
func FuzzReadRequest(f *testing.F) {
	f.Add(marshal(f, &loamv1pb.FetchRequest{Namespace: "default", Stream: "s", Partition: 2, Offset: 5, MaxBytes: 100, MaxWaitMs: 10, Format: 2}))
	f.Add(marshal(f, &loamv1pb.FetchRequest{Namespace: "default", Stream: "s", Partition: 3}))
	f.Add(marshal(f, &loamv1pb.FetchRequest{Namespace: "default", Stream: "s", MaxBytes: -1, Format: 7}))
	s := &Server{cfg: Config{Streams: stubCatalog{}}}
	f.Fuzz(func(t *testing.T, wire []byte) {
		var fr loamv1pb.FetchRequest
		var sr loamv1pb.SubscribeRequest
		for _, m := range []proto.Message{&fr, &sr} {
			if proto.Unmarshal(wire, m) != nil {
				continue
			}
			var r read
			var err error
			if m == &fr {
				r, err = s.checkRead(context.Background(), fr.Namespace, fr.Stream, fr.Partition, fr.Offset, fr.MaxBytes, fr.Format)
			} else {
				r, err = s.checkRead(context.Background(), sr.Namespace, sr.Stream, sr.Partition, sr.Offset, sr.MaxBytes, sr.Format)
			}
			if err != nil {
				if _, ok := err.(*inputError); !ok {
					t.Fatalf("refusal %T %v is not an input error", err, err)
				}
				continue
			}
			if r.p < 0 || r.p >= 3 || r.offset < 0 || r.maxBytes <= 0 || r.maxBytes > httpapi.MaxFetchBytes {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}
