package grpcapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/lognode-svc/grpcapi"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/arrowenc"
)

// The 10-column rows of httpapi's BenchmarkProduceArrowVsKafka.
const benchSchema = `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"user","type":"utf8","nullable":true},
 {"name":"ts","type":"timestamp","unit":"ms","nullable":false},{"name":"price","type":"decimal128","precision":10,"scale":2,"nullable":true},
 {"name":"qty","type":"int32","nullable":true},{"name":"ok","type":"bool","nullable":true},{"name":"country","type":"utf8","nullable":true},
 {"name":"score","type":"float64","nullable":true},{"name":"ref","type":"int64","nullable":true},{"name":"note","type":"utf8","nullable":true}],
 "key":"id","timestamp":"ts"}`

const benchRows = 500

func benchValues() []string {
	out := make([]string, benchRows)
	for i := range out {
		out[i] = fmt.Sprintf(`{"id":%d,"user":"user-%d","ts":%d,"price":"%d.%02d","qty":%d,"ok":%v,"country":"NO","score":%d.5,"ref":%d,"note":"order note %d"}`,
			i, i%100, 1700000000000+int64(i), i%1000, i%100, i%7, i%2 == 0, i%50, i*31, i%10)
	}
	return out
}

// BenchmarkFlight measures, on a real node and sequencer with an in-memory bucket, in one
// run: the HTTP JSON produce of 500 rows of 10 columns a request against Flight DoPut of
// the same rows, one 500-row batch a PutResult, the client waiting for each ack (doput) or
// not (doput-stream) (MB/s of each one's own wire bytes, and rows/s); and DoGet of 20,000 stored rows, all columns and 1 of 10 projected (MB/s of the
// Flight data served, rows/s). The stored chunks read from the bucket are the same for
// both DoGets (WAL chunks are read whole: per-column byte ranges come with arrow segments).
//
//	go test -run XXX -bench Flight -benchtime 40x ./lognode-svc/grpcapi/
func BenchmarkFlight(b *testing.B) {
	e := start(b, httpapi.Limits{})
	vals := benchValues()
	jsonBody := `{"records":[{"value":` + strings.Join(vals, `},{"value":`) + `}]}`
	sch, err := arrowenc.ParseSchema([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	bl := arrowenc.NewBuilder(sch, nil)
	for i, v := range vals {
		if _, err := bl.Append(i, json.RawMessage(v), nil, 0); err != nil {
			b.Fatal(err)
		}
	}
	batch := bl.NewBatch()
	bl.Release()
	defer batch.Release()
	c := flight.NewClientFromConn(e.conn, nil)
	runs := 0 // a sub-benchmark runs more than once: a new stream each time

	b.Run("json-produce", func(b *testing.B) {
		runs++
		name := fmt.Sprint("j", runs)
		e.createArrow(b, name, 1, benchSchema)
		b.SetBytes(int64(len(jsonBody)))
		b.ResetTimer()
		for range b.N {
			resp, err := http.Post(e.http+"/v1/namespaces/default/streams/"+name+"/records", "application/json", strings.NewReader(jsonBody))
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("produce: %v %v", resp, err)
			}
			resp.Body.Close()
		}
		b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("doput", func(b *testing.B) {
		runs++
		name := fmt.Sprint("p", runs)
		e.createArrow(b, name, 1, benchSchema)
		put, err := c.DoPut(ctx(b))
		if err != nil {
			b.Fatal(err)
		}
		counter := &countingPut{FlightService_DoPutClient: put}
		w := flight.NewRecordWriter(counter, ipc.WithSchema(sch.Arrow()))
		w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"default", name}})
		b.ResetTimer()
		for range b.N {
			if err := w.Write(batch); err != nil {
				b.Fatal(err)
			}
			if _, err := put.Recv(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		_ = w.Close()
		_ = put.CloseSend()
		b.SetBytes(counter.bytes / int64(b.N))
		b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
	})

	b.Run("doput-stream", func(b *testing.B) {
		// The client sends its batches without waiting for the acks.
		runs++
		name := fmt.Sprint("ps", runs)
		e.createArrow(b, name, 1, benchSchema)
		put, err := c.DoPut(ctx(b))
		if err != nil {
			b.Fatal(err)
		}
		counter := &countingPut{FlightService_DoPutClient: put}
		w := flight.NewRecordWriter(counter, ipc.WithSchema(sch.Arrow()))
		w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"default", name}})
		b.ResetTimer()
		sent := make(chan error, 1)
		go func() {
			for range b.N {
				if err := w.Write(batch); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		for range b.N {
			if _, err := put.Recv(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if err := <-sent; err != nil {
			b.Fatal(err)
		}
		_ = w.Close()
		_ = put.CloseSend()
		b.SetBytes(counter.bytes / int64(b.N))
		b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
	})

	e.createArrow(b, "g", 1, benchSchema)
	const reqs = 40
	for range reqs {
		resp, err := http.Post(e.http+"/v1/namespaces/default/streams/g/records", "application/json", strings.NewReader(jsonBody))
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("produce: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	for _, cs := range []struct {
		name    string
		columns []string
	}{{"doget-all", nil}, {"doget-1of10", []string{"qty"}}} {
		b.Run(cs.name, func(b *testing.B) {
			tk, _ := json.Marshal(grpcapi.FlightTicket{Namespace: "default", Stream: "g", Columns: cs.columns})
			var size int64
			for range b.N {
				st, err := c.DoGet(ctx(b), &flight.Ticket{Ticket: tk})
				if err != nil {
					b.Fatal(err)
				}
				size = 0
				for {
					fd, err := st.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					size += int64(len(fd.GetDataHeader()) + len(fd.GetDataBody()))
				}
			}
			b.SetBytes(size)
			b.ReportMetric(float64(b.N*reqs*benchRows)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(size), "served-B")
		})
	}
}

// countingPut counts the bytes of the FlightData a DoPut sends.
type countingPut struct {
	flight.FlightService_DoPutClient
	bytes int64
}

func (c *countingPut) Send(fd *flight.FlightData) error {
	c.bytes += int64(proto.Size(fd))
	return c.FlightService_DoPutClient.Send(fd)
}
