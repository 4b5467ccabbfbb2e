package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
)

// BenchmarkProduceArrowVsKafka produces the same JSON records (10 columns) to a kafka
// stream (the record as its value) and to an arrow stream, 500 records a request, on a
// real node and sequencer. It reports request MB/s and the bytes stored per record (the
// WAL objects' sizes over the records).
//
//	go test -run XXX -bench ProduceArrowVsKafka -benchtime 200x ./lognode-svc/httpapi/
func BenchmarkProduceArrowVsKafka(b *testing.B) {
	kafkaBody, arrowBody, schema := benchBodies()
	for _, c := range []struct{ name, create, body string }{
		{"kafka", `{"name":"s","partitions":1}`, kafkaBody},
		{"arrow", `{"name":"s","partitions":1,"encoding":"arrow","schema":` + schema + `}`, arrowBody},
	} {
		b.Run(c.name, func(b *testing.B) {
			url, bucket := benchNode(b, c.create)
			b.SetBytes(int64(len(c.body)))
			b.ResetTimer()
			for range b.N {
				benchPost(b, url+"/records", c.body)
			}
			b.StopTimer()
			var stored int64
			_ = bucket.List(context.Background(), "wal/", func(o objstore.ObjectInfo) error { stored += o.Size; return nil })
			b.ReportMetric(float64(stored)/float64(b.N*benchPerReq), "stored-B/record")
			b.ReportMetric(float64(len(c.body))/benchPerReq, "json-B/record")
		})
	}
}

// BenchmarkFetchArrow fetches 20,000 rows of the 10-column arrow stream of
// BenchmarkProduceArrowVsKafka from offset 0, as JSON and as Arrow IPC, all columns and 1
// of 10 projected. It reports rows/s and the response bytes; the chunk bytes read from the
// bucket are the same for all four (WAL chunks are read whole).
//
//	go test -run XXX -bench FetchArrow -benchtime 20x ./lognode-svc/httpapi/
func BenchmarkFetchArrow(b *testing.B) {
	_, arrowBody, schema := benchBodies()
	url, _ := benchNode(b, `{"name":"s","partitions":1,"encoding":"arrow","schema":`+schema+`}`)
	const reqs = 40
	for range reqs {
		benchPost(b, url+"/records", arrowBody)
	}
	for _, c := range []struct{ name, query, accept string }{
		{"json-all", "", ""}, {"json-1of10", "&columns=qty", ""},
		{"ipc-all", "", httpapi.MediaArrowStream}, {"ipc-1of10", "&columns=qty", httpapi.MediaArrowStream},
	} {
		b.Run(c.name, func(b *testing.B) {
			var size int
			for range b.N {
				req, _ := http.NewRequest(http.MethodGet, url+"/partitions/0/records?offset=0&max_bytes=67108864"+c.query, nil)
				if c.accept != "" {
					req.Header.Set("Accept", c.accept)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("fetch: %v %v", resp, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.Header.Get("Loam-Next-Offset") != strconv.Itoa(reqs*benchPerReq) {
					b.Fatalf("next offset %s", resp.Header.Get("Loam-Next-Offset"))
				}
				size = len(body)
			}
			b.ReportMetric(float64(b.N*reqs*benchPerReq)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(size), "response-B")
		})
	}
}

const benchPerReq = 500

func benchPost(b *testing.B, url, body string) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("produce: %v %v", resp, err)
	}
	resp.Body.Close()
}

// benchNode starts a real node on a real sequencer and an in-memory bucket, creates the
// stream s and returns its URL.
func benchNode(b *testing.B, create string) (string, *objstore.Mem) {
	bucket := objstore.NewMem()
	mc := startSequencer(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: "bench-1", Listener: ln, Bucket: bucket, Meta: mc,
		FlushInterval: 5 * time.Millisecond, Limits: httpapi.Limits{}, Logger: quiet(), Zone: "z1"})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	b.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	resp, err := http.Post(srv.URL+"/v1/namespaces/default/streams", "application/json", strings.NewReader(create))
	if err != nil || resp.StatusCode != 201 {
		b.Fatalf("create: %v %v", resp, err)
	}
	resp.Body.Close()
	return srv.URL + "/v1/namespaces/default/streams/s", bucket
}

// benchBodies returns the same 500 records as a kafka produce body (the record as the
// value), an arrow produce body, and the arrow stream's schema (10 columns).
func benchBodies() (kafka, arrow, schema string) {
	const perReq = benchPerReq
	var kafkaBody, arrowBody strings.Builder
	kafkaBody.WriteString(`{"records":[`)
	arrowBody.WriteString(`{"records":[`)
	for i := range perReq {
		v := fmt.Sprintf(`{"id":%d,"user":"user-%d","ts":%d,"price":"%d.%02d","qty":%d,"ok":%v,"country":"NO","score":%d.5,"ref":%d,"note":"order note %d"}`,
			i, i%100, 1700000000000+int64(i), i%1000, i%100, i%7, i%2 == 0, i%50, i*31, i%10)
		if i > 0 {
			kafkaBody.WriteByte(',')
			arrowBody.WriteByte(',')
		}
		fmt.Fprintf(&kafkaBody, `{"key":"%d","value":%s}`, i, v)
		fmt.Fprintf(&arrowBody, `{"value":%s}`, v)
	}
	kafkaBody.WriteString(`]}`)
	arrowBody.WriteString(`]}`)
	schema = `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"user","type":"utf8","nullable":true},
	 {"name":"ts","type":"timestamp","unit":"ms","nullable":false},{"name":"price","type":"decimal128","precision":10,"scale":2,"nullable":true},
	 {"name":"qty","type":"int32","nullable":true},{"name":"ok","type":"bool","nullable":true},{"name":"country","type":"utf8","nullable":true},
	 {"name":"score","type":"float64","nullable":true},{"name":"ref","type":"int64","nullable":true},{"name":"note","type":"utf8","nullable":true}],
	 "key":"id","timestamp":"ts"}`
	return kafkaBody.String(), arrowBody.String(), schema
}
