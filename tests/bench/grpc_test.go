package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loamhq/loam/local/devcluster"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// gRPC figures: the same cluster as the HTTP benchmarks (real single-voter Raft
// sequencer on disk, in-memory bucket), reached through the native gRPC API.

type grpcCluster struct {
	c       *devcluster.Cluster
	streams loamv1pb.StreamServiceClient
	records loamv1pb.RecordServiceClient
}

func startGRPCCluster(b *testing.B, flush time.Duration) *grpcCluster {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	c, err := devcluster.Start(context.Background(), devcluster.Config{DataDir: b.TempDir(), Store: objstore.NewMem(), HTTPListener: ln,
		GRPCListener: gln, FlushInterval: flush, SequencerRPC: freeAddr(b), SequencerRaft: freeAddr(b),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(context.Background()) })
	conn, err := grpc.NewClient(c.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return &grpcCluster{c: c, streams: loamv1pb.NewStreamServiceClient(conn), records: loamv1pb.NewRecordServiceClient(conn)}
}

func (g *grpcCluster) createStream(b *testing.B, name string, partitions int32) {
	b.Helper()
	if _, err := g.streams.CreateStream(context.Background(), &loamv1pb.CreateStreamRequest{Namespace: "default", Name: name, Partitions: &partitions}); err != nil {
		b.Fatal(err)
	}
}

// grpcProduceRequest is 100 records of 1 KiB values over 8 partitions (as produceBody),
// as records or as one RecordBatch v2 per partition.
func grpcProduceRequest(b *testing.B, raw bool, seq int) *loamv1pb.ProduceRequest {
	req := &loamv1pb.ProduceRequest{Namespace: "default", Stream: "p"}
	groups := make([][]recordbatch.Record, 8)
	for i := range 100 {
		p := int32((seq + i) % 8)
		v := append([]byte(fmt.Sprintf("seq %d i %d ", seq, i)), bytes.Repeat([]byte("x"), 1024)...)[:1024]
		if raw {
			groups[p] = append(groups[p], recordbatch.Record{OffsetDelta: int32(len(groups[p])), Timestamp: time.Now().UnixMilli(), Value: v})
			continue
		}
		req.Records = append(req.Records, &loamv1pb.Record{Partition: &p, Value: v})
	}
	for p, recs := range groups {
		if len(recs) == 0 {
			continue
		}
		bs, err := recordbatch.Append(nil, recs, recordbatch.DefaultBuildOptions())
		if err != nil {
			b.Fatal(err)
		}
		req.Batches = append(req.Batches, &loamv1pb.RecordBatches{Partition: int32(p), Batches: bs})
	}
	return req
}

// BenchmarkGRPCProduce: produce throughput over gRPC at saturation, 100 × 1 KiB records
// per call over 8 partitions, 250 ms flush, conc calls in flight on one connection; as
// records (the server builds the batches) and as RecordBatch v2 bytes (the binary path).
// MB/s is record-value bytes.
func BenchmarkGRPCProduce(b *testing.B) {
	for _, tc := range []struct {
		raw  bool
		conc int
	}{{false, 256}, {true, 256}, {false, 1024}, {true, 1024}} {
		raw, conc := tc.raw, tc.conc
		name := "records"
		if raw {
			name = "batches"
		}
		b.Run(fmt.Sprintf("%s/conc=%d", name, conc), func(b *testing.B) {
			g := startGRPCCluster(b, 250*time.Millisecond)
			g.createStream(b, "p", 8)
			reqs := make([]*loamv1pb.ProduceRequest, 64)
			for i := range reqs {
				reqs[i] = grpcProduceRequest(b, raw, i)
			}
			b.SetBytes(100 * 1024)
			b.ResetTimer()
			t0 := time.Now()
			var wg sync.WaitGroup
			work := make(chan int)
			for range conc {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						if _, err := g.records.Produce(context.Background(), reqs[i%len(reqs)]); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			for i := range b.N {
				work <- i
			}
			close(work)
			wg.Wait()
			b.ReportMetric(float64(b.N*100)/time.Since(t0).Seconds(), "recs/s")
		})
	}
}

// BenchmarkSubscribeLatency: one subscriber on a partition, a producer sending 10 × 1 KiB
// records every 10 ms (100 calls/s, b.N calls), 250 ms flush. Reports produce ack to
// delivery (ack-p50-ms, ack-p99-ms: the time from the producer's answer to the
// subscriber's receipt of the call's first record, 0 when it arrived first; before-ack-%
// says how often it did) and send to
// delivery (e2e-p50-ms, e2e-p99-ms, which includes the flush wait).
func BenchmarkSubscribeLatency(b *testing.B) {
	g := startGRPCCluster(b, 250*time.Millisecond)
	g.createStream(b, "l", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := g.records.Subscribe(ctx, &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "l"})
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu        sync.Mutex
		delivered = map[int64]time.Time{} // first offset of a call -> receipt
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := sub.Recv()
			if err != nil {
				return
			}
			now := time.Now()
			mu.Lock()
			for _, r := range m.Records {
				if r.GetOffset()%10 == 0 {
					delivered[r.GetOffset()] = now
				}
			}
			mu.Unlock()
		}
	}()
	value := bytes.Repeat([]byte("v"), 1024)
	recs := make([]*loamv1pb.Record, 10)
	for i := range recs {
		recs[i] = &loamv1pb.Record{Value: value}
	}
	type call struct{ sent, acked time.Time }
	calls := make(map[int64]call, b.N)
	var cmu sync.Mutex
	var wg sync.WaitGroup
	b.ResetTimer()
	tick := time.NewTicker(10 * time.Millisecond)
	for range b.N {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			res, err := g.records.Produce(context.Background(), &loamv1pb.ProduceRequest{Namespace: "default", Stream: "l", Records: recs})
			if err != nil {
				b.Error(err)
				return
			}
			cmu.Lock()
			calls[res.Offsets[0].Offset] = call{sent, time.Now()}
			cmu.Unlock()
		}()
	}
	tick.Stop()
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(delivered)
		mu.Unlock()
		if n >= b.N || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	cancel()
	<-done
	var ack, e2e []time.Duration
	early := 0
	for off, c := range calls {
		d, ok := delivered[off]
		if !ok {
			b.Fatalf("the call at offset %d was never delivered", off)
		}
		if d.Before(c.acked) {
			early++
		}
		ack = append(ack, max(0, d.Sub(c.acked)))
		e2e = append(e2e, d.Sub(c.sent))
	}
	q := func(ds []time.Duration, f float64) float64 {
		slices.Sort(ds)
		return float64(ds[min(len(ds)-1, int(f*float64(len(ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(100*float64(early)/float64(len(calls)), "before-ack-%")
	b.ReportMetric(q(ack, 0.50), "ack-p50-ms")
	b.ReportMetric(q(ack, 0.99), "ack-p99-ms")
	b.ReportMetric(q(e2e, 0.50), "e2e-p50-ms")
	b.ReportMetric(q(e2e, 0.99), "e2e-p99-ms")
}
