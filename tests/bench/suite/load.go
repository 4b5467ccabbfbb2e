package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/streamapi"
)

// workload is what every system gets: records of Size bytes, PerReq per request (one
// HTTP request, one ProduceSync call, or PerReq async publishes awaited together), spread
// round-robin over Partitions, from Conc concurrent workers.
type workload struct {
	Size, PerReq, Partitions, Conc int
}

// throughput is the outcome of a closed-loop run: payload bytes and records acknowledged.
type throughput struct {
	Bytes, Records, Requests int64
	Elapsed                  time.Duration
}

func (t throughput) mbps() float64 { return float64(t.Bytes) / t.Elapsed.Seconds() / 1e6 }
func (t throughput) rps() float64  { return float64(t.Requests) / t.Elapsed.Seconds() }

// closedLoop runs w.Conc workers calling send(worker, i) until dur has passed; each call
// moves w.PerReq records. A send returning errDone ends its worker (a fixed amount of work
// is done); any other error cancels the run and is returned.
func closedLoop(ctx context.Context, w workload, dur time.Duration, send func(ctx context.Context, worker, i int) error) (throughput, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var reqs atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	t0 := time.Now()
	deadline := t0.Add(dur)
	for wk := range w.Conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				if err := send(ctx, wk, i); err == errDone {
					return // this worker has no more to send; the others finish theirs
				} else if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				reqs.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	n := reqs.Load()
	return throughput{Bytes: n * int64(w.PerReq*w.Size), Records: n * int64(w.PerReq), Requests: n, Elapsed: el}, firstErr
}

// openLoop sends at rate requests per second for dur, each request at its intended time
// (t0 + i/rate) whether or not earlier ones have answered, and records each latency from
// its intended send time, so a stalled server is charged for the requests it delayed (no
// coordinated omission). At most maxOutstanding requests are in flight; the loop still
// keeps its schedule, and the requests it could not start count as errors.
func openLoop(ctx context.Context, rate float64, dur time.Duration, maxOutstanding int, send func(ctx context.Context, i int) error) (*hdrhistogram.Histogram, int, error) {
	h := hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs atomic.Int64
	var firstErr atomic.Value
	sem := make(chan struct{}, maxOutstanding)
	interval := time.Duration(float64(time.Second) / rate)
	n := int(dur.Seconds() * rate)
	t0 := time.Now()
	for i := range n {
		intended := t0.Add(time.Duration(i) * interval)
		if d := time.Until(intended); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return h, int(errs.Load()), ctx.Err()
			}
		}
		select {
		case sem <- struct{}{}:
		default:
			errs.Add(1)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := send(ctx, i)
			lat := time.Since(intended)
			if err != nil {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, err)
				return
			}
			mu.Lock()
			h.RecordValue(lat.Microseconds())
			mu.Unlock()
		}()
	}
	wg.Wait()
	if e, _ := firstErr.Load().(error); e != nil {
		return h, int(errs.Load()), e
	}
	return h, int(errs.Load()), nil
}

// ---- Loam, native HTTP/JSON ----

// loamBodies builds n produce request bodies: w.PerReq records whose values are JSON
// strings of exactly w.Size bytes (quotes included), partitions round-robin.
func loamBodies(w workload, n int) [][]byte {
	val := `"` + strings.Repeat("x", w.Size-2) + `"`
	out := make([][]byte, n)
	for k := range out {
		var b bytes.Buffer
		b.WriteString(`{"records":[`)
		for i := range w.PerReq {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"partition":%d,"value":%s}`, (k*w.PerReq+i)%w.Partitions, val)
		}
		b.WriteString(`]}`)
		out[k] = b.Bytes()
	}
	return out
}

func loamCreate(ctx context.Context, base, name string, partitions int) error {
	api, err := streamapi.NewClient(base, streamapi.WithTimeout(time.Minute))
	if err != nil {
		return err
	}
	p := int32(partitions)
	_, err = api.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: name, Partitions: &p})
	return err
}

func loamPost(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("loam produce: %d %s", resp.StatusCode, b)
	}
	return nil
}

func recordsURL(base, stream string) string {
	return base + "/v1/namespaces/default/streams/" + stream + "/records"
}

func loamProduce(ctx context.Context, base string, w workload, dur time.Duration) (throughput, error) {
	if err := loamCreate(ctx, base, "p", w.Partitions); err != nil {
		return throughput{}, err
	}
	bodies := loamBodies(w, 64)
	url := recordsURL(base, "p")
	return closedLoop(ctx, w, dur, func(ctx context.Context, wk, i int) error {
		return loamPost(ctx, url, bodies[(wk+i)%len(bodies)])
	})
}

// loamFetchAll reads every partition of stream from offset 0 to its high watermark, one
// goroutine per partition, with long-poll fetches of up to 1 MiB, and returns the answer
// bytes read. It does not decode the records: the load generator has one CPU, and a JSON
// decode of every record there would measure the client instead of the server.
func loamFetchAll(ctx context.Context, base, stream string, partitions int) (int64, time.Duration, error) {
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
				resp, err := httpc.Do(req)
				if err != nil {
					errc <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != 200 {
					err = fmt.Errorf("%d %s", resp.StatusCode, body)
				}
				var next, hw int64
				if err == nil {
					next, hw, err = fetchPosition(body)
				}
				if err != nil {
					errc <- fmt.Errorf("loam fetch %s: %w", url, err)
					return
				}
				total.Add(int64(len(body)))
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

// fetchPosition reads next_offset and high_watermark from the end of a fetch answer
// (`…],"next_offset":N,"high_watermark":H,"log_start":L}`) without decoding its records.
func fetchPosition(body []byte) (next, hw int64, err error) {
	i := bytes.LastIndex(body, []byte(`],"next_offset":`))
	if i < 0 {
		return 0, 0, fmt.Errorf("fetch answer without next_offset: %.200q", body)
	}
	var tail struct {
		NextOffset    *int64 `json:"next_offset"`
		HighWatermark *int64 `json:"high_watermark"`
	}
	if err := json.Unmarshal(append([]byte("{"), body[i+2:]...), &tail); err != nil {
		return 0, 0, fmt.Errorf("fetch answer tail %.200q: %w", body[i:], err)
	}
	if tail.NextOffset == nil || tail.HighWatermark == nil {
		return 0, 0, fmt.Errorf("fetch answer tail %.200q: next_offset or high_watermark missing", body[i:])
	}
	return *tail.NextOffset, *tail.HighWatermark, nil
}

// loamFill produces records records into stream (created here) and returns their payload
// bytes.
func loamFill(ctx context.Context, base, stream string, w workload, records int) (int64, error) {
	if err := loamCreate(ctx, base, stream, w.Partitions); err != nil {
		return 0, err
	}
	reqs := max(records/w.PerReq, 1)
	bodies := loamBodies(w, 64)
	url := recordsURL(base, stream)
	var next atomic.Int64
	_, err := closedLoop(ctx, w, time.Hour, func(ctx context.Context, wk, i int) error {
		k := next.Add(1)
		if k > int64(reqs) {
			return errDone
		}
		return loamPost(ctx, url, bodies[int(k)%len(bodies)])
	})
	return int64(reqs * w.PerReq * w.Size), err
}

var errDone = fmt.Errorf("suite: done")

// ---- NATS JetStream ----

func natsProduce(ctx context.Context, url string, w workload, dur time.Duration) (throughput, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return throughput{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(w.Conc*w.PerReq))
	if err != nil {
		return throughput{}, err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"},
		Storage: jetstream.FileStorage, Replicas: 1}); err != nil {
		return throughput{}, err
	}
	subjects := make([]string, w.Partitions)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("bench.%d", i)
	}
	payload := bytes.Repeat([]byte("x"), w.Size)
	return closedLoop(ctx, w, dur, func(ctx context.Context, wk, i int) error {
		futs := make([]jetstream.PubAckFuture, 0, w.PerReq)
		for k := range w.PerReq {
			f, err := js.PublishAsync(subjects[(i*w.PerReq+k)%w.Partitions], payload)
			if err != nil {
				return err
			}
			futs = append(futs, f)
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
}

// ---- Kafka (kfake), driven by franz-go's kgo ----

func kgoClient(addr string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(1 << 20), kgo.ProducerBatchMaxBytes(16 << 20)}, extra...)
	return kgo.NewClient(opts...)
}

func kafkaRecords(w workload, payload []byte, i int) []*kgo.Record {
	recs := make([]*kgo.Record, w.PerReq)
	for k := range recs {
		recs[k] = &kgo.Record{Value: payload, Partition: int32((i*w.PerReq + k) % w.Partitions)}
	}
	return recs
}

func kafkaProduce(ctx context.Context, addr string, w workload, dur time.Duration) (throughput, error) {
	cl, err := kgoClient(addr)
	if err != nil {
		return throughput{}, err
	}
	defer cl.Close()
	payload := bytes.Repeat([]byte("x"), w.Size)
	return closedLoop(ctx, w, dur, func(ctx context.Context, wk, i int) error {
		return cl.ProduceSync(ctx, kafkaRecords(w, payload, wk*1_000_003+i)...).FirstErr()
	})
}

// kafkaFetch produces records records, then consumes the topic from the start with a new
// client until it has them all; it returns the payload bytes read and the time reading took.
func kafkaFetch(ctx context.Context, addr string, w workload, records int) (int64, time.Duration, error) {
	return kafkaFetchTopic(ctx, addr, "bench", w, records)
}

// kafkaFetchTopic is kafkaFetch on topic, its producer with extra options.
func kafkaFetchTopic(ctx context.Context, addr, topic string, w workload, records int, extra ...kgo.Opt) (int64, time.Duration, error) {
	want, err := kafkaFill(ctx, addr, topic, w, records, extra...)
	if err != nil {
		return 0, 0, err
	}
	return kafkaConsume(ctx, addr, topic, want)
}

// kafkaFill produces about records records to topic (whole requests of w.PerReq) and
// answers how many.
func kafkaFill(ctx context.Context, addr, topic string, w workload, records int, extra ...kgo.Opt) (int64, error) {
	cl, err := kgoClient(addr, append([]kgo.Opt{kgo.DefaultProduceTopic(topic)}, extra...)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	payload := bytes.Repeat([]byte("x"), w.Size)
	reqs := max(records/w.PerReq, 1)
	var next atomic.Int64
	_, err = closedLoop(ctx, w, time.Hour, func(ctx context.Context, wk, i int) error {
		k := next.Add(1)
		if k > int64(reqs) {
			return errDone
		}
		return cl.ProduceSync(ctx, kafkaRecords(w, payload, int(k))...).FirstErr()
	})
	return int64(reqs * w.PerReq), err
}

// kafkaConsume reads topic from the start with a new client until it has want records; it
// answers the payload bytes read and the time reading took.
func kafkaConsume(ctx context.Context, addr, topic string, want int64) (int64, time.Duration, error) {
	cons, err := kgoClient(addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(8<<20), kgo.FetchMaxPartitionBytes(1<<20))
	if err != nil {
		return 0, 0, err
	}
	defer cons.Close()
	var got, bytesRead int64
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	for got < want {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			return 0, 0, fmt.Errorf("kafka fetch: %d of %d records: %w", got, want, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got++; bytesRead += int64(len(r.Value)) })
	}
	return bytesRead, time.Since(t0), nil
}

// kafkaCreate creates topic with partitions partitions on the broker at addr (one that
// exists already is fine).
func kafkaCreate(ctx context.Context, addr, topic string, partitions int) error {
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer admin.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(partitions), 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, admin)
	if err == nil {
		if c := resp.Topics[0].ErrorCode; c != 0 && c != kerr.TopicAlreadyExists.Code {
			err = kerr.ErrorForCode(c)
		}
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}
