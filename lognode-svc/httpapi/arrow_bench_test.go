package httpapi_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
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
	const perReq = 500
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
	schema := `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"user","type":"utf8","nullable":true},
	 {"name":"ts","type":"timestamp","unit":"ms","nullable":false},{"name":"price","type":"decimal128","precision":10,"scale":2,"nullable":true},
	 {"name":"qty","type":"int32","nullable":true},{"name":"ok","type":"bool","nullable":true},{"name":"country","type":"utf8","nullable":true},
	 {"name":"score","type":"float64","nullable":true},{"name":"ref","type":"int64","nullable":true},{"name":"note","type":"utf8","nullable":true}],
	 "key":"id","timestamp":"ts"}`
	for _, c := range []struct{ name, create, body string }{
		{"kafka", `{"name":"s","partitions":1}`, kafkaBody.String()},
		{"arrow", `{"name":"s","partitions":1,"encoding":"arrow","schema":` + schema + `}`, arrowBody.String()},
	} {
		b.Run(c.name, func(b *testing.B) {
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
			defer func() {
				srv.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				n.Close(ctx)
			}()
			resp, err := http.Post(srv.URL+"/v1/namespaces/default/streams", "application/json", strings.NewReader(c.create))
			if err != nil || resp.StatusCode != 201 {
				b.Fatalf("create: %v %v", resp.StatusCode, err)
			}
			resp.Body.Close()
			url := srv.URL + "/v1/namespaces/default/streams/s/records"
			b.SetBytes(int64(len(c.body)))
			b.ResetTimer()
			for range b.N {
				resp, err := http.Post(url, "application/json", strings.NewReader(c.body))
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("produce: %v %v", resp.StatusCode, err)
				}
				resp.Body.Close()
			}
			b.StopTimer()
			var stored int64
			_ = bucket.List(context.Background(), "wal/", func(o objstore.ObjectInfo) error { stored += o.Size; return nil })
			b.ReportMetric(float64(stored)/float64(b.N*perReq), "stored-B/record")
			b.ReportMetric(float64(len(c.body))/perReq, "json-B/record")
		})
	}
}
