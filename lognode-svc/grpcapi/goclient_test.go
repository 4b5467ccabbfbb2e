package grpcapi_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi"
)

// The Go client's gRPC transport and its batching idempotent producer, against a real log
// node on a real sequencer.

func grpcClient(t *testing.T, e *env) *streamapi.GRPCClient {
	t.Helper()
	c, err := streamapi.DialGRPC(e.grpc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestGRPCClientRoundTrip(t *testing.T) {
	e := start(t, httpapi.Limits{})
	c := grpcClient(t, e)
	ctx := ctx(t)
	st, err := c.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "rt", Partitions: ptr[int32](3)})
	if err != nil || st.Partitions != 3 || st.Class == "" {
		t.Fatalf("create: %+v %v", st, err)
	}
	if _, err := c.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "rt"}); streamapi.ErrorCode(err) != streamapi.CodeStreamExists {
		t.Fatalf("create again: %v", err)
	}
	k := "user-7"
	recs := []streamapi.Record{{Key: &k, Value: []byte(`{"a":1}`), Headers: streamapi.Headers{{Key: "h", Value: []byte{0xff}}, {Key: "h"}}},
		streamapi.BytesValue([]byte{0, 1}), streamapi.BytesValue([]byte("x"))}
	res, err := c.Produce(ctx, "default", "rt", recs)
	if err != nil || len(res.Offsets) != 3 || res.Token == "" {
		t.Fatalf("produce: %+v %v", res, err)
	}
	if want := streamapi.KeyPartition([]byte(k), 3); res.Offsets[0].Partition != want {
		t.Fatalf("keyed record in partition %d, want %d (murmur2, as over HTTP)", res.Offsets[0].Partition, want)
	}
	if res.Offsets[1].Partition != res.Offsets[2].Partition || res.Offsets[2].Offset != res.Offsets[1].Offset+1 {
		t.Fatalf("keyless records of one call: %+v", res.Offsets)
	}
	p := res.Offsets[0].Partition
	f, err := c.Fetch(ctx, "default", "rt", p, 0, 0, 0)
	if err != nil || len(f.Records) != 1 || *f.Records[0].Key != k || string(f.Records[0].Value) != `{"a":1}` || !f.Records[0].Headers.Equal(recs[0].Headers) || f.NextOffset != 1 {
		t.Fatalf("fetch: %+v %v", f, err)
	}
	// Subscribe sees what is produced after it opened.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan streamapi.Record, 10)
	done := make(chan error, 1)
	go func() {
		done <- c.Subscribe(sctx, "default", "rt", p, 1, 0, func(r streamapi.FetchResponse) error {
			for _, rec := range r.Records {
				got <- rec
			}
			return nil
		})
	}()
	if _, err := c.Produce(ctx, "default", "rt", []streamapi.Record{{Partition: &p, ValueBase64: []byte("late")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if *r.Offset != 1 || string(r.ValueBase64) != "late" {
			t.Fatalf("subscribed %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subscription delivered nothing")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("subscribe ended with %v", err)
	}
	if _, err := c.Fetch(ctx, "default", "rt", p, 99, 0, 0); streamapi.ErrorCode(err) != streamapi.CodeOffsetOutOfRange {
		t.Fatalf("fetch past the end: %v", err)
	}
	if _, err := c.Fetch(ctx, "default", "nope", 0, 0, 0, 0); streamapi.ErrorCode(err) != streamapi.CodeStreamNotFound || streamapi.IsRetriable(err) {
		t.Fatalf("fetch a missing stream: %v", err)
	}
	if list, err := c.ListStreams(ctx, "default"); err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	if err := c.DeleteStream(ctx, "default", "rt"); err != nil {
		t.Fatal(err)
	}
}

// lossy forwards to a transport but loses the answer of every other produce (the write
// happened; the caller sees a network error), as a connection reset after the commit.
type lossy struct {
	streamapi.BatchTransport
	n    atomic.Int64
	lost atomic.Int64
}

func (l *lossy) ProduceBatches(ctx context.Context, ns, stream string, p int32, b []byte) (streamapi.ProduceResponse, error) {
	res, err := l.BatchTransport.ProduceBatches(ctx, ns, stream, p, b)
	if err == nil && l.n.Add(1)%2 == 1 {
		l.lost.Add(1)
		return streamapi.ProduceResponse{}, fmt.Errorf("lost answer: %w", streamapi.ErrNetwork)
	}
	return res, err
}

// TestProducerBothTransports: the batching idempotent producer over HTTP (binary path)
// and gRPC, with half the answers lost: every record is acknowledged once, at the offset
// where the log holds it, with no duplicate and no gap.
func TestProducerBothTransports(t *testing.T) {
	e := start(t, httpapi.Limits{})
	hc, err := streamapi.NewClient(e.http)
	if err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]streamapi.BatchTransport{"http": hc, "grpc": grpcClient(t, e)} {
		t.Run(name, func(t *testing.T) {
			ctx := ctx(t)
			stream := "p-" + name
			if _, err := hc.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: stream, Partitions: ptr[int32](4)}); err != nil {
				t.Fatal(err)
			}
			l := &lossy{BatchTransport: tr}
			p, err := streamapi.NewProducer(ctx, l, "default", stream, streamapi.ProducerConfig{Linger: 2 * time.Millisecond, BatchRecords: 50})
			if err != nil {
				t.Fatal(err)
			}
			const total = 1200
			acks := make([]*streamapi.Ack, total)
			var wg sync.WaitGroup
			for w := range 4 { // concurrent senders
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < total; i += 4 {
						k := fmt.Sprint("k", i%37)
						a, err := p.Send(ctx, streamapi.Record{Key: &k, ValueBase64: fmt.Appendf(nil, "v%d", i)})
						if err != nil {
							t.Error(err)
							return
						}
						acks[i] = a
					}
				}()
			}
			wg.Wait()
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			where := map[string]string{}
			for i, a := range acks {
				o, err := a.Wait(ctx)
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				where[fmt.Sprintf("%d@%d", o.Offset, o.Partition)] = fmt.Sprintf("v%d", i)
			}
			if len(where) != total {
				t.Fatalf("%d distinct offsets acknowledged for %d records", len(where), total)
			}
			if l.lost.Load() == 0 {
				t.Fatal("no answer was lost: the test retried nothing")
			}
			n := 0
			for q := range int32(4) {
				for off := int64(0); ; {
					f, err := hc.Fetch(ctx, "default", stream, q, off, 0, 0)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range f.Records {
						if want := where[fmt.Sprintf("%d@%d", *r.Offset, q)]; string(r.ValueBase64) != want {
							t.Fatalf("partition %d offset %d holds %q, acknowledged %q", q, *r.Offset, r.ValueBase64, want)
						}
						n++
					}
					if f.NextOffset >= f.HighWatermark {
						break
					}
					off = f.NextOffset
				}
			}
			if n != total {
				t.Fatalf("the log holds %d records, %d were sent (lost answers: %d)", n, total, l.lost.Load())
			}
		})
	}
}

// TestProducerFenced: initializing a name again fences the previous producer over both
// transports; its records fail with producer_fenced and are not written.
func TestProducerFenced(t *testing.T) {
	e := start(t, httpapi.Limits{})
	hc, err := streamapi.NewClient(e.http)
	if err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]streamapi.BatchTransport{"http": hc, "grpc": grpcClient(t, e)} {
		t.Run(name, func(t *testing.T) {
			ctx := ctx(t)
			stream := "f-" + name
			if _, err := hc.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: stream}); err != nil {
				t.Fatal(err)
			}
			old, err := streamapi.NewProducer(ctx, tr, "default", stream, streamapi.ProducerConfig{Name: "fence-" + name})
			if err != nil {
				t.Fatal(err)
			}
			a, _ := old.Send(ctx, streamapi.BytesValue([]byte("first")))
			if _, err := a.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := streamapi.NewProducer(ctx, tr, "default", stream, streamapi.ProducerConfig{Name: "fence-" + name}); err != nil {
				t.Fatal(err)
			}
			a, _ = old.Send(ctx, streamapi.BytesValue([]byte("stale")))
			if _, err := a.Wait(ctx); streamapi.ErrorCode(err) != streamapi.CodeProducerFenced || !streamapi.IsProducerRefusal(err) {
				t.Fatalf("fenced producer's send: %v", err)
			}
			st, err := hc.GetStream(ctx, "default", stream)
			if err != nil || st.PartitionInfo[0].HighWatermark != 1 {
				t.Fatalf("%+v %v: the fenced record was written", st, err)
			}
		})
	}
}
