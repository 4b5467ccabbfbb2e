package node_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

// countingKMS counts the KMS calls of the nodes.
type countingKMS struct {
	envelope.KMS
	generate, decrypt atomic.Int64
}

func (c *countingKMS) GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	c.generate.Add(1)
	return c.KMS.GenerateDataKey(ctx, in, opts...)
}

func (c *countingKMS) Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	c.decrypt.Add(1)
	return c.KMS.Decrypt(ctx, in, opts...)
}

// BenchmarkEncryptedProduceFetch: binary-path produce (1 MiB bodies of 1 KiB records) into
// a namespace with a key and one without, in the same run, then a fetch of it all through
// a cold node (every chunk read from the bucket and, keyed, opened). It reports MB/s of
// each and the KMS calls the nodes made.
func BenchmarkEncryptedProduceFetch(b *testing.B) {
	ctx := context.Background()
	raw := localKMS(b)
	counted := &countingKMS{KMS: raw}
	mc := startSequencer(b)
	bucket := objstore.NewMem()
	start := func(id string) *node.Node {
		n, err := node.Start(ctx, node.Config{NodeID: id, HTTPAddr: "127.0.0.1:0", Bucket: bucket, Meta: mc, FlushInterval: 20 * time.Millisecond,
			Logger: quiet(), KMS: counted, KMSAdmin: raw, TailCacheBytes: 1 << 20, ChunkCacheBytes: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close(context.Background()) })
		return n
	}
	w := start("bench-w")
	url := "http://" + w.Addr()
	post := func(path, body string) {
		resp, err := http.Post(url+path, "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			b.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	post("/v1/namespaces", `{"name":"keyed"}`)
	req, _ := http.NewRequest("PUT", url+"/v1/namespaces/keyed/key", bytes.NewReader([]byte(`{"create":true}`)))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		b.Fatalf("attach: %v %v", resp, err)
	}
	for _, ns := range []string{"keyed", "default"} {
		post("/v1/namespaces/"+ns+"/streams", `{"name":"s","partitions":1}`)
	}
	recs := make([]recordbatch.Record, 1024)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Timestamp: 1, Value: bytes.Repeat([]byte{byte(i)}, 1024)}
	}
	body, err := recordbatch.Append(nil, recs, recordbatch.DefaultBuildOptions())
	if err != nil {
		b.Fatal(err)
	}
	for _, ns := range []string{"default", "keyed"} {
		b.Run("ns="+ns, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			gen0 := counted.generate.Load()
			var produced time.Duration
			t0 := time.Now()
			// 8 producers at once: a flush carries several requests, as under load.
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						resp, err := http.Post(url+"/v1/namespaces/"+ns+"/streams/s/records?partition=0", streamapi.MediaRecordBatch, bytes.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						msg, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Errorf("produce: %d %s", resp.StatusCode, msg)
							return
						}
					}
				}()
			}
			wg.Wait()
			produced = time.Since(t0)
			b.StopTimer()
			cold := start(fmt.Sprintf("bench-cold-%s-%d", ns, b.N))
			curl := "http://" + cold.Addr()
			dec0 := counted.decrypt.Load()
			var got int64
			t1 := time.Now()
			for off := int64(0); ; {
				req, _ := http.NewRequest("GET", curl+"/v1/namespaces/"+ns+"/streams/s/partitions/0/records?offset="+strconv.FormatInt(off, 10)+"&max_bytes=8388608", nil)
				req.Header.Set("Accept", streamapi.MediaRecordBatch)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("fetch: %d", resp.StatusCode)
				}
				next, _ := strconv.ParseInt(resp.Header.Get("Loam-Next-Offset"), 10, 64)
				hwm, _ := strconv.ParseInt(resp.Header.Get("Loam-High-Watermark"), 10, 64)
				got += n
				if next >= hwm || n == 0 {
					break
				}
				off = next
			}
			fetched := time.Since(t1)
			total := float64(len(body)) * float64(b.N)
			b.ReportMetric(total/produced.Seconds()/1e6, "produce-MB/s")
			b.ReportMetric(float64(got)/fetched.Seconds()/1e6, "fetch-MB/s")
			b.ReportMetric(float64(counted.generate.Load()-gen0), "GenerateDataKey")
			b.ReportMetric(float64(counted.generate.Load()), "GenerateDataKey-total")
			b.ReportMetric(float64(counted.decrypt.Load()-dec0), "Decrypt-cold")
			b.StartTimer()
		})
	}
}
