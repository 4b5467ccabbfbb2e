package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestConsumerAdminHTTP: DELETE …/consumers/{name} and POST …/consumers/{name}/reset on a
// real log node and the real in-process sequencer, through the Go client: both refused
// with 409 consumer_active while a member is live unless forced; resets to earliest,
// latest, an offset and a timestamp, per partition or all; bad input refused with the code
// and field at fault; a deleted consumer is gone.
func TestConsumerAdminHTTP(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := streamapi.NewClient(n.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	two := int32(2)
	if _, err := c.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "orders", Partitions: &two}); err != nil {
		t.Fatal(err)
	}
	p0 := int32(0)
	var recs []streamapi.Record
	for range 5 {
		recs = append(recs, streamapi.Record{Partition: &p0, Value: []byte(`1`)})
	}
	if _, err := c.Produce(ctx, "default", "orders", recs); err != nil {
		t.Fatal(err)
	}
	i64 := func(v int64) *int64 { return &v }
	committed := func() [2]int64 {
		t.Helper()
		d, err := c.DescribeConsumer(ctx, "default", "app")
		if err != nil {
			t.Fatal(err)
		}
		out := [2]int64{-1, -1}
		for _, p := range d.Partitions {
			out[p.Partition] = p.Committed
		}
		return out
	}
	if _, err := c.Heartbeat(ctx, "default", "app", streamapi.HeartbeatRequest{Stream: "orders", Member: "m1", SessionMs: 30000}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResetOffsets(ctx, "default", "app", streamapi.ResetOffsetsRequest{Stream: "orders", To: "earliest"}); streamapi.ErrorCode(err) != streamapi.CodeConsumerActive {
		t.Fatalf("reset with a live member: %v", err)
	}
	if err := c.DeleteConsumer(ctx, "default", "app", false); streamapi.ErrorCode(err) != streamapi.CodeConsumerActive {
		t.Fatalf("delete with a live member: %v", err)
	}
	res, err := c.ResetOffsets(ctx, "default", "app", streamapi.ResetOffsetsRequest{Stream: "orders", To: "offset", Offset: i64(2), Partitions: []int32{0}, Force: true})
	if err != nil || len(res.Offsets) != 1 || res.Offsets[0] != (streamapi.PartitionOffset{Partition: 0, Offset: 2}) {
		t.Fatalf("forced reset: %+v %v", res, err)
	}
	if d, _ := c.DescribeConsumer(ctx, "default", "app"); len(d.Members) != 0 || committed() != [2]int64{2, -1} {
		t.Fatalf("after a forced reset: %+v", d)
	}
	for _, tc := range []struct {
		req  streamapi.ResetOffsetsRequest
		want [2]int64
	}{
		{streamapi.ResetOffsetsRequest{Stream: "orders", To: "latest"}, [2]int64{5, 0}},
		{streamapi.ResetOffsetsRequest{Stream: "orders", To: "earliest", Partitions: []int32{0}}, [2]int64{0, 0}},
		{streamapi.ResetOffsetsRequest{Stream: "orders", To: "offset", Offset: i64(99)}, [2]int64{5, 0}},
		{streamapi.ResetOffsetsRequest{Stream: "orders", To: "timestamp", TimestampMs: i64(time.Now().Add(time.Hour).UnixMilli())}, [2]int64{5, 0}},
		{streamapi.ResetOffsetsRequest{Stream: "orders", To: "timestamp", TimestampMs: i64(0)}, [2]int64{0, 0}},
	} {
		if _, err := c.ResetOffsets(ctx, "default", "app", tc.req); err != nil {
			t.Fatalf("%+v: %v", tc.req, err)
		}
		if got := committed(); got != tc.want {
			t.Fatalf("%+v: committed %v, want %v", tc.req, got, tc.want)
		}
	}
	for _, tc := range []struct {
		body, code, says string
	}{
		{`{"stream":"orders","to":"start"}`, streamapi.CodeInvalidArgument, `"to": "start"`},
		{`{"stream":"orders","to":"offset"}`, streamapi.CodeInvalidArgument, `takes "offset"`},
		{`{"stream":"orders","to":"latest","timestamp_ms":5}`, streamapi.CodeInvalidArgument, `takes neither`},
		{`{"to":"latest"}`, streamapi.CodeInvalidArgument, `"stream" is required`},
		{`{"stream":"orders","to":"latest","partitions":[0,0]}`, streamapi.CodeInvalidArgument, "named twice"},
		{`{"stream":"orders","to":"latest","partitions":[7]}`, streamapi.CodePartitionNotFound, "partition 7"},
		{`{"stream":"nope","to":"latest"}`, streamapi.CodeStreamNotFound, ""},
		{`{"stream":"orders","to":"latest","extra":1}`, streamapi.CodeInvalidJSON, "extra"},
	} {
		resp, err := http.Post(n.srv.URL+"/v1/namespaces/default/consumers/app/reset", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		d := readDetail(t, resp)
		if d.Code != tc.code || !strings.Contains(d.Message, tc.says) {
			t.Errorf("%s: %d %+v, want %s saying %q", tc.body, resp.StatusCode, d, tc.code, tc.says)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, n.srv.URL+"/v1/namespaces/default/consumers/app?force=maybe", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if d := readDetail(t, resp); resp.StatusCode != 400 || d.Code != streamapi.CodeBadRequest {
		t.Fatalf("force=maybe: %d %+v", resp.StatusCode, d)
	}
	if err := c.DeleteConsumer(ctx, "default", "app", false); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.DescribeConsumer(ctx, "default", "app"); streamapi.ErrorCode(err) != streamapi.CodeConsumerNotFound {
		t.Fatalf("describe after delete: %v", err)
	}
	if err := c.DeleteConsumer(ctx, "default", "app", true); streamapi.ErrorCode(err) != streamapi.CodeConsumerNotFound {
		t.Fatalf("delete twice: %v", err)
	}
}

// readDetail reads an error answer's detail.
func readDetail(t *testing.T, resp *http.Response) streamapi.ErrorDetail {
	t.Helper()
	defer resp.Body.Close()
	var eb streamapi.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
		t.Fatalf("%d: not the error JSON: %v", resp.StatusCode, err)
	}
	return eb.Error
}
