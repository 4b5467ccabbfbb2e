package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestConsumersHTTP: the consumer routes on a real log node and the real in-process
// sequencer, through the Go client: heartbeats lease partitions, commits are fenced by
// epoch (409 stale_consumer_epoch, nothing committed), describe shows offsets, leases and
// lag, list names the consumer, /metrics carries the lag, and bad input is refused with
// codes that say what is wrong.
func TestConsumersHTTP(t *testing.T) {
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
	a, err := c.Heartbeat(ctx, "default", "app", streamapi.HeartbeatRequest{Stream: "orders", Member: "m1", SessionMs: 30000})
	if err != nil || len(a.Leases) != 2 || a.Members != 1 || a.ExpiresMs-a.ClockMs != 30000 {
		t.Fatalf("heartbeat: %+v %v", a, err)
	}
	// m2 joins; m1's next heartbeat releases partition 1, which m2 then holds at epoch 2.
	if _, err := c.Heartbeat(ctx, "default", "app", streamapi.HeartbeatRequest{Stream: "orders", Member: "m2"}); err != nil {
		t.Fatal(err)
	}
	if a, err = c.Heartbeat(ctx, "default", "app", streamapi.HeartbeatRequest{Stream: "orders", Member: "m1", SessionMs: 30000}); err != nil || len(a.Leases) != 1 {
		t.Fatalf("m1: %+v %v", a, err)
	}
	b, err := c.Heartbeat(ctx, "default", "app", streamapi.HeartbeatRequest{Stream: "orders", Member: "m2"})
	if err != nil || len(b.Leases) != 1 || b.Leases[0].Partition != 1 || b.Leases[0].Epoch != 2 {
		t.Fatalf("m2: %+v %v", b, err)
	}
	err = c.CommitOffsets(ctx, "default", "app", streamapi.CommitOffsetsRequest{Stream: "orders", Member: "m1",
		Offsets: []streamapi.CommitOffset{{Partition: 0, Offset: 3, Metadata: "ok", Epoch: 1}, {Partition: 1, Offset: 0, Epoch: 1}}})
	if streamapi.ErrorCode(err) != streamapi.CodeStaleConsumerEpoch {
		t.Fatalf("stale commit: %v", err)
	}
	if err := c.CommitOffsets(ctx, "default", "app", streamapi.CommitOffsetsRequest{Stream: "orders", Member: "m1",
		Offsets: []streamapi.CommitOffset{{Partition: 0, Offset: 3, Metadata: "ok", Epoch: 1}}}); err != nil {
		t.Fatal(err)
	}
	d, err := c.DescribeConsumer(ctx, "default", "app")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Partitions) != 2 || d.Partitions[0].Committed != 3 || d.Partitions[0].Lag != 2 || d.Partitions[0].HighWatermark != 5 ||
		d.Partitions[0].Metadata != "ok" || d.Partitions[0].Holder != "m1" || d.Partitions[1].Committed != -1 || d.Partitions[1].Holder != "m2" ||
		len(d.Members) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	if names, err := c.ListConsumers(ctx, "default"); err != nil || len(names) != 1 || names[0] != "app" {
		t.Fatalf("list: %v %v", names, err)
	}
	resp, err := http.Get(n.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `loam_consumer_lag{consumer="app",namespace="default",partition="0",stream="orders"} 2`; !strings.Contains(string(body), want) {
		t.Fatalf("metrics lack %s:\n%s", want, grepLines(string(body), "loam_consumer"))
	}
	if !strings.Contains(string(body), "loam_consumer_lag_series_dropped 0") {
		t.Fatalf("metrics: %s", grepLines(string(body), "loam_consumer"))
	}
	// Leaving releases at once: m2's next heartbeat holds both.
	if _, err := c.Heartbeat(ctx, "default", "app", streamapi.HeartbeatRequest{Stream: "orders", Member: "m1", Leave: true}); err != nil {
		t.Fatal(err)
	}
	if b, err = c.Heartbeat(ctx, "default", "app", streamapi.HeartbeatRequest{Stream: "orders", Member: "m2"}); err != nil || len(b.Leases) != 2 {
		t.Fatalf("m2 after m1 left: %+v %v", b, err)
	}

	base := n.srv.URL + "/v1/namespaces/default/consumers/app"
	for _, tc := range []struct {
		path, body, code string
		status           int
	}{
		{"/heartbeat", `{"stream":"orders"}`, streamapi.CodeInvalidArgument, 400},
		{"/heartbeat", `{"stream":"orders","member":"m","session_ms":5}`, streamapi.CodeInvalidArgument, 400},
		{"/heartbeat", `{"stream":"nosuch","member":"m"}`, streamapi.CodeStreamNotFound, 404},
		{"/heartbeat", `{"stream":"orders","member":"m","extra":1}`, streamapi.CodeInvalidJSON, 400},
		{"/offsets", `{"stream":"orders","offsets":[]}`, streamapi.CodeInvalidArgument, 400},
		{"/offsets", `{"stream":"orders","offsets":[{"partition":0,"offset":1}]}`, streamapi.CodeStaleConsumerEpoch, 409},
		{"/offsets", `{"stream":"orders","member":"m2","offsets":[{"partition":0,"offset":99,"epoch":2}]}`, streamapi.CodeOffsetOutOfRange, 416},
		{"/offsets", `{"stream":"orders","member":"m2","offsets":[{"partition":0,"offset":1,"metadata":"` + strings.Repeat("x", 4097) + `","epoch":2}]}`, streamapi.CodeInvalidArgument, 400},
		{"/offsets", `{"stream":"orders","member":"m2","offsets":[{"partition":5,"offset":1,"epoch":2}]}`, streamapi.CodePartitionNotFound, 404},
	} {
		st, out := post(t, base+tc.path, tc.body)
		if st != tc.status || errCode(out) != tc.code {
			t.Errorf("%s %.80s: %d %v, want %d %s", tc.path, tc.body, st, out, tc.status, tc.code)
		}
	}
	if _, err := c.DescribeConsumer(ctx, "default", "nobody"); streamapi.ErrorCode(err) != streamapi.CodeConsumerNotFound {
		t.Fatalf("describe nobody: %v", err)
	}
	if _, err := c.ListConsumers(ctx, "nons"); streamapi.ErrorCode(err) != streamapi.CodeNamespaceNotFound {
		t.Fatalf("list in a missing namespace: %v", err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
