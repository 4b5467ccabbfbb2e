package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// The Go client over the binary fast path (RecordBatch v2 bytes, its default) against the
// JSON bodies (WithJSON), same records, same node. MB/s counts record value bytes;
// cpu-ms/MB is the CPU time of the whole process (client and node share it) per MB of
// values.

func clientModes() []struct {
	name string
	opts []streamapi.Option
} {
	return []struct {
		name string
		opts []streamapi.Option
	}{
		{"json", []streamapi.Option{streamapi.WithJSON(), streamapi.WithTimeout(time.Minute)}},
		{"binary", []streamapi.Option{streamapi.WithTimeout(time.Minute)}},
	}
}

// clientRecords is one call's records: n JSON values of size bytes, all to partition p.
func clientRecords(n, size, seq int, p int32) []streamapi.Record {
	recs := make([]streamapi.Record, n)
	pad := make([]byte, size-40)
	for i := range pad {
		pad[i] = 'a' + byte(i%26)
	}
	for i := range recs {
		recs[i] = streamapi.AutoValue(fmt.Appendf(nil, `{"seq":%d,"i":%d,"p":"%s"}`, seq, i, pad))
		recs[i].Partition = &p
	}
	return recs
}

func valueBytes(recs []streamapi.Record) int64 {
	var n int64
	for _, r := range recs {
		v, _ := r.Bytes()
		n += int64(len(v))
	}
	return n
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClientProduce: conc goroutines each calling Produce with 100 records of 1 KiB
// for one partition (8 partitions, 250 ms flush); at 64 a call waits for its flush, at 512
// the node runs at saturation.
func BenchmarkClientProduce(b *testing.B) {
	for _, conc := range []int{64, 512} {
		for _, m := range clientModes() {
			b.Run(fmt.Sprintf("conc=%d/%s", conc, m.name), func(b *testing.B) { benchClientProduce(b, conc, m.opts) })
		}
	}
}

func benchClientProduce(b *testing.B, conc int, opts []streamapi.Option) {
	c := startCluster(b, objstore.NewMem(), 250*time.Millisecond)
	c.createStream(b, "p", 8)
	api, err := streamapi.NewClient(c.url, append(opts, streamapi.WithHTTPClient(benchHTTP(conc)))...)
	if err != nil {
		b.Fatal(err)
	}
	calls := make([][]streamapi.Record, 64)
	for i := range calls {
		calls[i] = clientRecords(100, 1024, i, int32(i%8))
	}
	b.SetBytes(valueBytes(calls[0]))
	work := make(chan int)
	var wg sync.WaitGroup
	b.ResetTimer()
	t0, cpu0 := time.Now(), cpuTime()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := api.Produce(context.Background(), "default", "p", calls[i%len(calls)]); err != nil {
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
	el, cpu := time.Since(t0), cpuTime()-cpu0
	b.StopTimer()
	mb := float64(b.N) * float64(valueBytes(calls[0])) / 1e6
	b.ReportMetric(float64(b.N*100)/el.Seconds(), "recs/s")
	b.ReportMetric(float64(cpu.Milliseconds())/mb, "cpu-ms/MB")
}

// benchHTTP is an HTTP client that keeps conc connections to the node.
func benchHTTP(conc int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: conc, MaxIdleConnsPerHost: conc}}
}

// BenchmarkClientFetch: reading 8 partitions of 10,000 1 KiB records each from the start
// to the high watermark with Fetch (max_bytes 1 MiB, no wait), one partition after
// another, from the writing node's tail cache.
func BenchmarkClientFetch(b *testing.B) {
	c := startCluster(b, objstore.NewMem(), 50*time.Millisecond)
	c.createStream(b, "f", 8)
	var (
		wg    sync.WaitGroup
		total int64
		mu    sync.Mutex
	)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				recs := clientRecords(100, 1024, w*50+i, int32((w*50+i)%8))
				if _, err := c.api.Produce(context.Background(), "default", "f", recs); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				total += valueBytes(recs)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, m := range clientModes() {
		b.Run(m.name, func(b *testing.B) {
			api, err := streamapi.NewClient(c.url, m.opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(total)
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				var got int64
				for p := range int32(8) {
					for off := int64(0); ; {
						fr, err := api.Fetch(context.Background(), "default", "f", p, off, 1<<20, 0)
						if err != nil {
							b.Fatal(err)
						}
						got += valueBytes(fr.Records)
						if fr.NextOffset == off || fr.NextOffset >= fr.HighWatermark {
							break
						}
						off = fr.NextOffset
					}
				}
				if got != total {
					b.Fatalf("read %d value bytes, wrote %d", got, total)
				}
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(cpu.Milliseconds())/(float64(b.N)*float64(total)/1e6), "cpu-ms/MB")
		})
	}
}

// BenchmarkBinaryProduceSaturated is the suite's "Go client, binary path" row in one
// process: conc workers each producing 500 records of 1 KiB to one partition (8
// partitions) with Client.Produce, closed loop, 250 ms flush, in-memory bucket. It reports
// MB/s of values, the CPU per MB, and from the node's metrics the mean WAL object size and
// PUT and CommitWal latencies.
func BenchmarkBinaryProduceSaturated(b *testing.B) {
	for _, conc := range []int{256} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			c := startCluster(b, objstore.NewMem(), 250*time.Millisecond)
			c.createStream(b, "p", 8)
			api, err := streamapi.NewClient(c.url, streamapi.WithTimeout(time.Minute), streamapi.WithHTTPClient(benchHTTP(conc)))
			if err != nil {
				b.Fatal(err)
			}
			calls := make([][]streamapi.Record, 8)
			val := make([]byte, 1024)
			for p := range calls {
				calls[p] = make([]streamapi.Record, 500)
				for i := range calls[p] {
					calls[p][i] = streamapi.BytesValue(val)
					pp := int32(p)
					calls[p][i].Partition = &pp
				}
			}
			b.SetBytes(500 * 1024)
			work := make(chan int)
			var wg sync.WaitGroup
			b.ResetTimer()
			t0, cpu0 := time.Now(), cpuTime()
			for w := range conc {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						if _, err := api.Produce(context.Background(), "default", "p", calls[(w+i)%8]); err != nil {
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
			el, cpu := time.Since(t0), cpuTime()-cpu0
			b.StopTimer()
			mb := float64(b.N) * 500 * 1024 / 1e6
			b.ReportMetric(mb/el.Seconds(), "value-MB/s")
			b.ReportMetric(float64(cpu.Milliseconds())/mb, "cpu-ms/MB")
			reportWriterMetrics(b, c.url)
		})
	}
}

// reportWriterMetrics reports the node's mean WAL object size and PUT and commit latency.
func reportWriterMetrics(b *testing.B, url string) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	v := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && !strings.HasPrefix(line, "#") {
			x, _ := strconv.ParseFloat(f[1], 64)
			v[f[0]] = x
		}
	}
	if n := v["loam_wal_flushes_total"]; n > 0 {
		b.ReportMetric(v["loam_wal_bytes_total"]/n/1e6, "MB/object")
		b.ReportMetric(v["loam_wal_put_seconds_sum"]/v["loam_wal_put_seconds_count"]*1e3, "put-ms")
		b.ReportMetric(v["loam_wal_commit_seconds_sum"]/v["loam_wal_commit_seconds_count"]*1e3, "commit-ms")
	}
}
