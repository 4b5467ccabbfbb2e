package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// Loam through the Go client (shared/streamapi): the binary HTTP path and gRPC.

// goRecords is one call's records: w.PerReq values of w.Size bytes, all to partition p (one
// request per call on either transport).
func goRecords(w workload, p int32) []streamapi.Record {
	val := bytes.Repeat([]byte("x"), w.Size)
	out := make([]streamapi.Record, w.PerReq)
	for i := range out {
		out[i] = streamapi.BytesValue(val)
		out[i].Partition = &p
	}
	return out
}

// producer is the part of the Go client's two transports the produce rows use.
type producer interface {
	Produce(ctx context.Context, ns, stream string, records []streamapi.Record) (streamapi.ProduceResponse, error)
}

// loamClientProduce runs the closed-loop produce through the Go client: surface "binary"
// (streamapi.Client, RecordBatch v2 over HTTP) or "grpc" (streamapi.GRPCClient).
func loamClientProduce(ctx context.Context, l *loamServer, surface string, w workload, dur time.Duration) (throughput, error) {
	if err := loamCreate(ctx, l.base, "p", w.Partitions); err != nil {
		return throughput{}, err
	}
	var c producer
	switch surface {
	case "binary":
		hc, err := streamapi.NewClient(l.base, streamapi.WithHTTPClient(httpc))
		if err != nil {
			return throughput{}, err
		}
		c = hc
	case "grpc":
		gc, err := streamapi.DialGRPC(l.grpc, nil)
		if err != nil {
			return throughput{}, err
		}
		defer gc.Close()
		c = gc
	default:
		return throughput{}, fmt.Errorf("suite: surface %q", surface)
	}
	recs := make([][]streamapi.Record, w.Partitions)
	for p := range recs {
		recs[p] = goRecords(w, int32(p))
	}
	return closedLoop(ctx, w, dur, func(ctx context.Context, wk, i int) error {
		_, err := c.Produce(ctx, "default", "p", recs[(wk+i)%w.Partitions])
		return err
	})
}

// loamFetchAllBinary reads every partition of stream from 0 to its high watermark over the
// binary path (Accept: application/vnd.loam.recordbatch), one goroutine per partition,
// 1 MiB per fetch, counting the answer bytes; the batches are not decoded (the offsets are
// in the Loam-* headers).
func loamFetchAllBinary(ctx context.Context, base, stream string, partitions int) (int64, time.Duration, error) {
	var total atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, partitions)
	t0 := time.Now()
	for p := range partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var off int64
			for {
				url := fmt.Sprintf("%s/v1/namespaces/default/streams/%s/partitions/%d/records?offset=%d&max_bytes=1048576&max_wait_ms=100", base, stream, p, off)
				req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
				req.Header.Set("Accept", streamapi.MediaRecordBatch)
				resp, err := httpc.Do(req)
				if err != nil {
					errc <- err
					return
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
				var next, hw int64
				if err == nil {
					next, err = strconv.ParseInt(resp.Header.Get(streamapi.HeaderNextOffset), 10, 64)
				}
				if err == nil {
					hw, err = strconv.ParseInt(resp.Header.Get(streamapi.HeaderHighWatermark), 10, 64)
				}
				if err != nil {
					errc <- fmt.Errorf("loam binary fetch %s: %w", url, err)
					return
				}
				total.Add(n)
				if next == off || next >= hw {
					return
				}
				off = next
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	close(errc)
	if err := <-errc; err != nil {
		return 0, 0, err
	}
	return total.Load(), el, nil
}

// loamFetchAllGRPC is loamFetchAllBinary over gRPC Fetch with FETCH_FORMAT_RECORD_BATCHES,
// counting the record_batches bytes (not decoded).
func loamFetchAllGRPC(ctx context.Context, addr, stream string, partitions int) (int64, time.Duration, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20)))
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	rc := loamv1pb.NewRecordServiceClient(conn)
	var total atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, partitions)
	t0 := time.Now()
	for p := range partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var off int64
			for {
				res, err := rc.Fetch(ctx, &loamv1pb.FetchRequest{Namespace: "default", Stream: stream, Partition: int32(p), Offset: off,
					MaxBytes: 1 << 20, MaxWaitMs: 100, Format: loamv1pb.FetchFormat_FETCH_FORMAT_RECORD_BATCHES})
				if err != nil {
					errc <- fmt.Errorf("loam gRPC fetch %d@%d: %w", p, off, err)
					return
				}
				total.Add(int64(len(res.GetRecordBatches())))
				if res.GetNextOffset() == off || res.GetNextOffset() >= res.GetHighWatermark() {
					return
				}
				off = res.GetNextOffset()
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	close(errc)
	if err := <-errc; err != nil {
		return 0, 0, err
	}
	return total.Load(), el, nil
}

// subscribeLatency subscribes (gRPC, streamapi.GRPCClient.Subscribe) to every partition of a
// new stream, produces one record at a time through gRPC at rate records/s for dur (open
// loop, round-robin over the partitions), and returns the histograms, in µs, of produce
// ack → delivery (a record delivered before its produce's ack arrived counts 1 µs: the
// node wakes subscriptions at commit, before the ack reaches the producer) and of produce
// send → delivery.
func subscribeLatency(ctx context.Context, l *loamServer, w workload, rate float64, dur time.Duration) (ackToDelivery, sendToDelivery *hdrhistogram.Histogram, err error) {
	if err := loamCreate(ctx, l.base, "sub", w.Partitions); err != nil {
		return nil, nil, err
	}
	gc, err := streamapi.DialGRPC(l.grpc, nil)
	if err != nil {
		return nil, nil, err
	}
	defer gc.Close()
	type key struct {
		p   int32
		off int64
	}
	type ackAt struct{ sent, acked time.Time }
	var (
		mu        sync.Mutex
		acked     = map[key]ackAt{}
		delivered = map[key]time.Time{}
		h         = hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3) // ack → delivery
		e2e       = hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3) // send → delivery
	)
	record := func(a ackAt, d time.Time) {
		h.RecordValue(max(d.Sub(a.acked).Microseconds(), 1))
		e2e.RecordValue(max(d.Sub(a.sent).Microseconds(), 1))
	}
	onAck := func(k key, a ackAt) {
		mu.Lock()
		defer mu.Unlock()
		if d, ok := delivered[k]; ok {
			delete(delivered, k)
			record(a, d)
			return
		}
		acked[k] = a
	}
	onDelivery := func(k key, d time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if a, ok := acked[k]; ok {
			delete(acked, k)
			record(a, d)
			return
		}
		delivered[k] = d
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	subErr := make(chan error, w.Partitions)
	for p := range int32(w.Partitions) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := gc.Subscribe(sctx, "default", "sub", p, 0, 0, func(r streamapi.FetchResponse) error {
				now := time.Now()
				for _, rec := range r.Records {
					onDelivery(key{p, *rec.Offset}, now)
				}
				return nil
			})
			if sctx.Err() == nil {
				subErr <- err
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // the subscriptions are open
	val := bytes.Repeat([]byte("x"), w.Size)
	var n atomic.Int64
	_, failed, err := openLoop(ctx, rate, dur, 100_000, func(ctx context.Context, i int) error {
		p := int32(i % w.Partitions)
		sent := time.Now()
		res, err := gc.Produce(ctx, "default", "sub", []streamapi.Record{{Partition: &p, ValueBase64: val}})
		if err != nil {
			return err
		}
		onAck(key{p, res.Offsets[0].Offset}, ackAt{sent: sent, acked: time.Now()})
		n.Add(1)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if failed > 0 {
		return nil, nil, fmt.Errorf("suite: subscribe latency: %d produces failed", failed)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := h.TotalCount() >= n.Load()
		mu.Unlock()
		if done {
			break
		}
		select {
		case err := <-subErr:
			return nil, nil, fmt.Errorf("suite: subscription ended: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("suite: subscribe latency: %d of %d records delivered", h.TotalCount(), n.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	return h, e2e, nil
}
