package bench

// Figures of the log node's read path with two log nodes over one sequencer and one
// bucket: a writer node (the embedded cluster's, background functions off so the index
// keeps its WAL entries) and a reader node that only fetches. They run only with
// LOAM_FIGURES=1:
//
//	LOAM_FIGURES=1 go test ./tests/bench -run 'TestReadPath' -v -count=1
//
// TestReadPathHeap reports the reader node's heap (runtime HeapInuse after GC, the
// difference with the node running and after it closed) with 1,000 and 10,000 partitions
// written through the writer node. TestReadPathGets reports object GETs per GiB fetched by
// 3 consumers reading the same 8 partitions through the reader node.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/local/devcluster"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

func figures(t *testing.T) {
	if os.Getenv("LOAM_FIGURES") != "1" {
		t.Skip("set LOAM_FIGURES=1 to measure the read path's figures")
	}
}

// twoNodes is a writer cluster (sequencer + log node, functions off) and a second log
// node on the same sequencer and store, counted apart.
type twoNodes struct {
	w        *cluster
	reader   *node.Node
	rurl     string
	rbucket  *objstore.CountingBucket
	discard  *slog.Logger
	closeRdr sync.Once
}

func startTwoNodes(t *testing.T, store objstore.Bucket, flush time.Duration) *twoNodes {
	t.Helper()
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	cb := objstore.Counting(store)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := devcluster.Start(context.Background(), devcluster.Config{DataDir: t.TempDir(), Store: cb, HTTPListener: ln,
		FlushInterval: flush, SequencerRPC: freeAddr(t), SequencerRaft: freeAddr(t), Logger: discard,
		Functions: devcluster.FunctionsConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	url := "http://" + c.HTTPAddr()
	api, _ := streamapi.NewClient(url, streamapi.WithTimeout(time.Minute))
	tn := &twoNodes{w: &cluster{c: c, url: url, bucket: cb, api: api}, rbucket: objstore.Counting(store), discard: discard}
	rln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tn.reader, err = node.Start(context.Background(), node.Config{NodeID: "reader-1", Listener: rln, Bucket: tn.rbucket,
		Meta: c.Meta(), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	tn.rurl = "http://" + tn.reader.Addr()
	t.Cleanup(tn.closeReader)
	return tn
}

func (tn *twoNodes) closeReader() {
	tn.closeRdr.Do(func() {
		tn.reader.Close(context.Background())
		tn.reader = nil
	})
}

// fetch reads one page of a partition from base, returning the answer and its size.
func fetch(t *testing.T, base, stream string, p int32, off int64, maxWaitMs int) (streamapi.FetchResponse, int) {
	t.Helper()
	resp, err := httpClient.Get(fmt.Sprintf("%s/v1/namespaces/default/streams/%s/partitions/%d/records?offset=%d&max_bytes=1048576&max_wait_ms=%d", base, stream, p, off, maxWaitMs))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("fetch %s/%d@%d: %d %s", stream, p, off, resp.StatusCode, body)
	}
	var f streamapi.FetchResponse
	if err := json.Unmarshal(body, &f); err != nil {
		t.Fatal(err)
	}
	return f, len(body)
}

func heapInuse() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestReadPathHeap: the writer node writes rounds of one record to every partition of a
// stream of N partitions (each round one WAL object, so one index entry per partition).
// The reader node follows the watch stream and serves a consumer of 8 partitions
// (serve-8), or long-polls at the head of every partition before the writes begin, as
// consumers of all of them would (poll-all: every partition tracked, its entries learned
// from watch events). The reader node's heap is the process's HeapInuse after GC with the
// node running, less the same after it closed.
func TestReadPathHeap(t *testing.T) {
	figures(t)
	const rounds = 100
	for _, mode := range []string{"serve-8", "poll-all"} {
		for _, parts := range []int32{1000, 10000} {
			t.Run(fmt.Sprintf("%s/%d", mode, parts), func(t *testing.T) {
				tn := startTwoNodes(t, objstore.NewMem(), 20*time.Millisecond)
				tn.w.createStream(t, "h", parts)
				served := int32(8)
				if mode == "poll-all" {
					served = parts
				}
				var wg sync.WaitGroup
				for w := range int32(8) {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for p := w; p < served; p += 8 {
							fetch(t, tn.rurl, "h", p, 0, 0)
						}
					}()
				}
				wg.Wait()
				var body strings.Builder
				for round := range rounds {
					body.Reset()
					body.WriteString(`{"records":[`)
					for p := range parts {
						if p > 0 {
							body.WriteByte(',')
						}
						fmt.Fprintf(&body, `{"partition":%d,"value":{"r":%d,"pad":"%040d"}}`, p, round, 0)
					}
					body.WriteString(`]}`)
					if _, err := post(tn.w.url+"/v1/namespaces/default/streams/h/records", []byte(body.String())); err != nil {
						t.Fatal(err)
					}
				}
				// The reader has applied every commit once a fetch through it sees the last one.
				deadline := time.Now().Add(time.Minute)
				for p := int32(0); p < 8; {
					f, _ := fetch(t, tn.rurl, "h", p, rounds, 0)
					if f.HighWatermark >= rounds {
						p++
						continue
					}
					if time.Now().After(deadline) {
						t.Fatalf("reader node at high watermark %d of partition %d, want %d", f.HighWatermark, p, rounds)
					}
					time.Sleep(20 * time.Millisecond)
				}
				last, _ := fetch(t, tn.w.url, "h", parts-1, rounds, 0)
				if last.HighWatermark != rounds {
					t.Fatalf("partition %d holds %d records, want %d", parts-1, last.HighWatermark, rounds)
				}
				time.Sleep(500 * time.Millisecond) // the watch stream delivers the last events
				with := heapInuse()
				tn.closeReader()
				without := heapInuse()
				t.Logf("FIGURE %s partitions=%d rounds=%d reader-node heap %.1f MiB (process HeapInuse %.1f MiB with it, %.1f MiB without)",
					mode, parts, rounds, (float64(with)-float64(without))/(1<<20), float64(with)/(1<<20), float64(without)/(1<<20))
			})
		}
	}
}

// TestReadPathGets: 16 producers write 80,000 1 KiB records over 8 partitions through the
// writer node (each WAL object holds a chunk of every partition); then 3 consumers read all
// 8 partitions from offset 0 through the reader node, concurrently, each partition
// page by page. Reported: the reader's object GETs (whole and range) per GiB of fetch
// answers.
func TestReadPathGets(t *testing.T) {
	figures(t)
	tn := startTwoNodes(t, objstore.NewMem(), 50*time.Millisecond)
	tn.w.createStream(t, "g", 8)
	url := tn.w.url + "/v1/namespaces/default/streams/g/records"
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := post(url, produceBody(100, 1024, w*50+i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	before := tn.rbucket.Stats()
	t0 := time.Now()
	var total, batches int64
	var mu sync.Mutex
	for range 3 {
		for p := range int32(8) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var off int64
				for {
					f, n := fetch(t, tn.rurl, "g", p, off, 0)
					mu.Lock()
					total += int64(n)
					batches++
					mu.Unlock()
					if f.NextOffset == off || f.NextOffset >= f.HighWatermark {
						return
					}
					off = f.NextOffset
				}
			}()
		}
	}
	wg.Wait()
	el := time.Since(t0)
	st := tn.rbucket.Stats().Sub(before)
	objects := 0
	if err := tn.rbucket.List(context.Background(), "wal/", func(objstore.ObjectInfo) error { objects++; return nil }); err != nil {
		t.Fatal(err)
	}
	gib := float64(total) / (1 << 30)
	gets := st.Gets + st.GetRanges
	t.Logf("FIGURE 3 consumers x 8 partitions: %.1f MiB fetched in %d pages, %v; %d WAL objects; GETs %d (whole %d, range %d), %.2f per object, %.0f GETs/GiB, %.1f MiB read from the bucket",
		float64(total)/(1<<20), batches, el.Round(time.Millisecond), objects, gets, st.Gets, st.GetRanges, float64(gets)/float64(objects), float64(gets)/gib, float64(st.GetBytes)/(1<<20))
}
