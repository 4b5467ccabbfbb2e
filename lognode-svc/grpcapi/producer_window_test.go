package grpcapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi"
)

// shuffling delays each request by a random 0..10 ms, so a partition's pipelined batches
// reach the node out of order; it counts the requests in flight at once and the
// out_of_order_sequence answers.
type shuffling struct {
	streamapi.BatchTransport
	inflight, most atomic.Int64
	reordered      atomic.Int64
}

func (s *shuffling) ProduceBatches(ctx context.Context, ns, stream string, p int32, b []byte) (streamapi.ProduceResponse, error) {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	time.Sleep(time.Duration(rand.N(10_000)) * time.Microsecond)
	res, err := s.BatchTransport.ProduceBatches(ctx, ns, stream, p, b)
	if streamapi.ErrorCode(err) == streamapi.CodeOutOfOrderSequence {
		s.reordered.Add(1)
	}
	return res, err
}

// TestProducerInFlightWindow: with several batches of a partition in flight at once and
// arriving out of order, every record is acknowledged once, the log holds each partition's
// records in the order they were sent, and no record is lost or written twice.
func TestProducerInFlightWindow(t *testing.T) {
	e := start(t, httpapi.Limits{})
	hc, err := streamapi.NewClient(e.http)
	if err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]streamapi.BatchTransport{"http": hc, "grpc": grpcClient(t, e)} {
		t.Run(name, func(t *testing.T) {
			ctx := ctx(t)
			stream := "w-" + name
			if _, err := hc.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: stream, Partitions: ptr[int32](2)}); err != nil {
				t.Fatal(err)
			}
			s := &shuffling{BatchTransport: tr}
			p, err := streamapi.NewProducer(ctx, s, "default", stream, streamapi.ProducerConfig{Linger: -1, BatchRecords: 10})
			if err != nil {
				t.Fatal(err)
			}
			const total = 600
			acks := make([]*streamapi.Ack, total)
			for i := range total {
				part := int32(i % 2)
				a, err := p.Send(ctx, streamapi.Record{Partition: &part, ValueBase64: fmt.Appendf(nil, "v%d", i)})
				if err != nil {
					t.Fatal(err)
				}
				acks[i] = a
			}
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			last := map[int32]int64{0: -1, 1: -1}
			for i, a := range acks {
				o, err := a.Wait(ctx)
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				if o.Offset <= last[o.Partition] {
					t.Fatalf("record %d at offset %d of partition %d, after a record sent before it at %d", i, o.Offset, o.Partition, last[o.Partition])
				}
				last[o.Partition] = o.Offset
			}
			if s.most.Load() < 2 {
				t.Fatalf("at most %d requests in flight: the window was not used", s.most.Load())
			}
			var mu sync.Mutex
			n := 0
			for q := range int32(2) {
				want := int(q)
				for off := int64(0); ; {
					f, err := hc.Fetch(ctx, "default", stream, q, off, 0, 0)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range f.Records {
						if got := string(r.ValueBase64); got != fmt.Sprintf("v%d", want) {
							t.Fatalf("partition %d offset %d holds %s, want v%d", q, *r.Offset, got, want)
						}
						want += 2
						mu.Lock()
						n++
						mu.Unlock()
					}
					if f.NextOffset >= f.HighWatermark {
						break
					}
					off = f.NextOffset
				}
			}
			if n != total {
				t.Fatalf("the log holds %d records, %d were sent", n, total)
			}
			t.Logf("most in flight %d, out-of-order answers resent %d", s.most.Load(), s.reordered.Load())
		})
	}
}
