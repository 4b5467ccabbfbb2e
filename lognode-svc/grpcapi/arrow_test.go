package grpcapi_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestArrowStreamGRPC: gRPC produce to an arrow stream of records (values as JSON
// objects) and of an Arrow IPC stream (arrow_ipc); gRPC fetch and subscribe answer
// records built from the rows, values those of the HTTP JSON fetch, key and timestamp
// from the key and timestamp columns; what does not fit is refused naming it.
func TestArrowStreamGRPC(t *testing.T) {
	e := start(t, httpapi.Limits{})
	e.createArrow(t, "a", 2, flightSchema)
	e.createStream(t, "plain", 1)
	c := ctx(t)
	var recs []*loamv1pb.Record
	for i := 0; i < 5; i++ {
		recs = append(recs, &loamv1pb.Record{Value: []byte(fmt.Sprintf(`{"id":%d,"name":"n%d","ts":%d,"price":"%d.50","tags":["x"],"ok":true}`, i, i, 1700000000000+i, i))})
	}
	recs[4].Partition = ptr[int32](1)
	res, err := e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "a", Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GetOffsets()) != 5 || res.GetOffsets()[4].GetPartition() != 1 || !strings.HasPrefix(res.GetToken(), "v1.") {
		t.Fatalf("produce: %v", res)
	}
	sch, _ := arrowenc.ParseSchema([]byte(flightSchema))
	res, err = e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "a", ArrowIpc: flightIPC(t, sch.Arrow(), 10, 4), ArrowPartition: ptr[int32](0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GetOffsets()) != 4 || res.GetOffsets()[3].GetPartition() != 0 {
		t.Fatalf("arrow_ipc produce: %v", res)
	}
	for p := int32(0); p < 2; p++ {
		f, err := e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "a", Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		want := e.httpValues(t, "a", int(p), "")
		if len(f.GetRecords()) != len(want) || f.GetNextOffset() != int64(len(want)) {
			t.Fatalf("partition %d: %d records, HTTP %d", p, len(f.GetRecords()), len(want))
		}
		for i, r := range f.GetRecords() {
			if string(r.GetValue()) != want[i] || r.GetOffset() != int64(i) || r.GetPartition() != p {
				t.Errorf("partition %d record %d: %s at %d, HTTP %s", p, i, r.GetValue(), r.GetOffset(), want[i])
			}
			if id := strings.TrimSuffix(strings.TrimPrefix(want[i], `{"id":`), "}"); !strings.HasPrefix(id, string(r.GetKey())+",") {
				t.Errorf("partition %d record %d: key %q for %s", p, i, r.GetKey(), want[i])
			}
			if r.TimestampMs == nil || r.GetTimestampMs() < 1700000000000 {
				t.Errorf("partition %d record %d: timestamp %v", p, i, r.TimestampMs)
			}
		}
	}
	// Subscribe reads the same records.
	sub, err := e.records.Subscribe(c, &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "a", Partition: 1})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := sub.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if want := e.httpValues(t, "a", 1, ""); len(msg.GetRecords()) != len(want) || string(msg.GetRecords()[0].GetValue()) != want[0] {
		t.Fatalf("subscribe: %v, want %v", msg.GetRecords(), want)
	}

	for name, c2 := range map[string]struct {
		req  *loamv1pb.ProduceRequest
		want string
	}{
		"bad value":   {&loamv1pb.ProduceRequest{Records: []*loamv1pb.Record{{Value: []byte(`{"id":"x"}`)}}}, "record 0: field id: want an integer"},
		"key":         {&loamv1pb.ProduceRequest{Records: []*loamv1pb.Record{{Key: []byte("k"), Value: []byte(`{"id":1,"ts":1}`)}}}, "key is its schema's key column"},
		"batches":     {&loamv1pb.ProduceRequest{Batches: []*loamv1pb.RecordBatches{{Partition: 0, Batches: []byte{1}}}}, "not RecordBatch v2 batches"},
		"both":        {&loamv1pb.ProduceRequest{Records: recs[:1], ArrowIpc: []byte{1}}, "both records and arrow_ipc"},
		"corrupt ipc": {&loamv1pb.ProduceRequest{ArrowIpc: []byte("garbage")}, "arrow_ipc: arrowenc: invalid arrow ipc stream"},
		"partition":   {&loamv1pb.ProduceRequest{ArrowIpc: flightIPC(t, sch.Arrow(), 1, 1), ArrowPartition: ptr[int32](5)}, "partition 5 does not exist"},
	} {
		c2.req.Namespace, c2.req.Stream = "default", "a"
		if _, err := e.records.Produce(c, c2.req); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c2.want) {
			t.Errorf("%s: %v, want %s", name, err, c2.want)
		}
	}
	if _, err := e.records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "plain", ArrowIpc: []byte{1}}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "arrow_ipc is for arrow streams") {
		t.Errorf("arrow_ipc to a kafka stream: %v", err)
	}
	if _, err := e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "a", Format: loamv1pb.FetchFormat_FETCH_FORMAT_RECORD_BATCHES}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "Flight DoGet") {
		t.Errorf("RECORD_BATCHES fetch: %v", err)
	}
	if _, err := e.records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "default", Stream: "a", Offset: 100}); status.Code(err) != codes.OutOfRange {
		t.Errorf("fetch past the end: %v", err)
	}
}
