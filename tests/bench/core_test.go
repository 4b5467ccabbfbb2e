// Package bench measures the figures of the core write and read path over real HTTP against
// the embedded cluster (real single-voter Raft sequencer on disk, in-memory bucket unless
// said otherwise). Run: go test ./tests/bench -run '^$' -bench . -benchtime 20x
//
// Custom metrics: recs/s, MB/s (of record values), puts/GiB, p50-ms / p99-ms and
// p99/flush for latency.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/local/devcluster"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

type cluster struct {
	c      *devcluster.Cluster
	url    string
	bucket *objstore.CountingBucket
	api    *streamapi.Client
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startCluster(t testing.TB, store objstore.Bucket, flush time.Duration) *cluster {
	t.Helper()
	cb := objstore.Counting(store)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := devcluster.Start(context.Background(), devcluster.Config{DataDir: t.TempDir(), Store: cb, HTTPListener: ln,
		FlushInterval: flush, SequencerRPC: freeAddr(t), SequencerRaft: freeAddr(t),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	url := "http://" + c.HTTPAddr()
	api, _ := streamapi.NewClient(url, streamapi.WithTimeout(time.Minute))
	return &cluster{c: c, url: url, bucket: cb, api: api}
}

func (c *cluster) createStream(t testing.TB, name string, partitions int32) {
	t.Helper()
	if _, err := c.api.CreateStream(context.Background(), "default", streamapi.CreateStreamRequest{Name: name, Partitions: &partitions}); err != nil {
		t.Fatal(err)
	}
}

// produceBody is a produce request of n records of size bytes over 8 partitions.
func produceBody(n, size, seq int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"records":[`)
	pad := bytes.Repeat([]byte("x"), size-40)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"partition":%d,"value":{"seq":%d,"i":%d,"p":"%s"}}`, (seq+i)%8, seq, i, pad)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}, Timeout: 2 * time.Minute}

func post(url string, body []byte) (time.Duration, error) {
	t0 := time.Now()
	resp, err := httpClient.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("produce: %d %s", resp.StatusCode, b)
	}
	return time.Since(t0), nil
}

// BenchmarkHTTPProduce: 1 KiB records, 100 per request, 8 partitions, 250 ms flush, many
// concurrent requests so the node runs at saturation. Reports MB/s of request bodies,
// records/s and object PUTs per GiB ingested.
func BenchmarkHTTPProduce(b *testing.B) {
	for _, conc := range []int{64, 256} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			c := startCluster(b, objstore.NewMem(), 250*time.Millisecond)
			c.createStream(b, "p", 8)
			url := c.url + "/v1/namespaces/default/streams/p/records"
			bodies := make([][]byte, 64)
			for i := range bodies {
				bodies[i] = produceBody(100, 1024, i)
			}
			b.SetBytes(int64(len(bodies[0])))
			before := c.bucket.Stats()
			b.ResetTimer()
			t0 := time.Now()
			var wg sync.WaitGroup
			work := make(chan int)
			for range conc {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						if _, err := post(url, bodies[i%len(bodies)]); err != nil {
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
			el := time.Since(t0)
			b.StopTimer()
			st := c.bucket.Stats().Sub(before)
			gib := float64(b.N) * float64(len(bodies[0])) / (1 << 30)
			b.ReportMetric(float64(b.N*100)/el.Seconds(), "recs/s")
			b.ReportMetric(float64(st.Puts)/gib, "puts/GiB")
		})
	}
}

// BenchmarkProduceLatency: 8 clients each sending a 100-record request, waiting for the
// answer, pausing a random 0–100 ms; zero-latency in-memory bucket. Reports p50/p99 over
// the flush interval (goal p99 ≤ 1.3 × flush).
func BenchmarkProduceLatency(b *testing.B) {
	const flush = 250 * time.Millisecond
	c := startCluster(b, objstore.NewMem(), flush)
	c.createStream(b, "l", 8)
	url := c.url + "/v1/namespaces/default/streams/l/records"
	body := produceBody(100, 1024, 0)
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
	)
	per := max(b.N/8, 1)
	b.ResetTimer()
	for cl := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				d, err := post(url, body)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				lats = append(lats, d)
				mu.Unlock()
				time.Sleep(time.Duration((cl*7919+i*104729)%100) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lats)
	p := func(q float64) time.Duration { return lats[min(len(lats)-1, int(q*float64(len(lats))))] }
	b.ReportMetric(float64(p(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(p(0.99))/float64(flush), "p99/flush")
}

// BenchmarkFetch: long-poll fetch throughput over HTTP of 8 partitions holding 80k 1 KiB
// records, from the tail cache (the writing node) and from WAL range GETs (a restarted
// node with no caches, chunk cache disabled by reading each range once).
func BenchmarkFetch(b *testing.B) {
	store := objstore.NewMem()
	c := startCluster(b, store, 50*time.Millisecond)
	c.createStream(b, "f", 8)
	url := c.url + "/v1/namespaces/default/streams/f/records"
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := post(url, produceBody(100, 1024, w*50+i)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	readAll := func(b *testing.B, c *cluster) int64 {
		var total int64
		for p := range int32(8) {
			var off int64
			for {
				resp, err := httpClient.Get(fmt.Sprintf("%s/v1/namespaces/default/streams/f/partitions/%d/records?offset=%d&max_bytes=1048576&max_wait_ms=100", c.url, p, off))
				if err != nil {
					b.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					b.Fatal(err)
				}
				var f streamapi.FetchResponse
				if err := json.Unmarshal(body, &f); err != nil {
					b.Fatal(err)
				}
				total += int64(len(body))
				if f.NextOffset == off {
					break
				}
				off = f.NextOffset
				if off >= f.HighWatermark {
					break
				}
			}
		}
		return total
	}
	b.Run("tail", func(b *testing.B) {
		var bytes int64
		for range b.N {
			bytes += readAll(b, c)
		}
		b.SetBytes(bytes / int64(b.N))
	})
	b.Run("wal-range-get", func(b *testing.B) {
		var bytes int64
		for range b.N {
			b.StopTimer()
			// A fresh node on the same bucket and sequencer state has empty caches.
			c.c.Close(context.Background())
			c2 := restart(b, c, store)
			b.StartTimer()
			before := c2.bucket.Stats()
			bytes += readAll(b, c2)
			b.ReportMetric(float64(c2.bucket.Stats().Sub(before).GetRanges), "range-gets")
			c = c2
		}
		b.SetBytes(bytes / int64(b.N))
	})
}

func restart(b *testing.B, old *cluster, store objstore.Bucket) *cluster {
	b.Helper()
	dir := old.c.DataDir()
	cb := objstore.Counting(store)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	c, err := devcluster.Start(context.Background(), devcluster.Config{DataDir: dir, Store: cb, HTTPListener: ln,
		SequencerRPC: freeAddr(b), SequencerRaft: freeAddr(b), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(context.Background()) })
	url := "http://" + c.HTTPAddr()
	api, _ := streamapi.NewClient(url)
	return &cluster{c: c, url: url, bucket: cb, api: api}
}

// TestIdlePuts: an idle node makes no object PUTs (goal 0 per second).
func TestIdlePuts(t *testing.T) {
	c := startCluster(t, objstore.NewMem(), 250*time.Millisecond)
	c.createStream(t, "idle", 8)
	if _, err := post(c.url+"/v1/namespaces/default/streams/idle/records", produceBody(10, 100, 0)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	before := c.bucket.Stats()
	time.Sleep(2 * time.Second)
	if puts := c.bucket.Stats().Sub(before).Puts; puts != 0 {
		t.Fatalf("%d PUTs in 2 s of idling, want 0", puts)
	}
}
