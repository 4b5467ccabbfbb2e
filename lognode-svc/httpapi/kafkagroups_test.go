package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// The Kafka group routes answer the sequencer's groups, offsets and lag; an unknown group
// is 404 kafka_group_not_found; other methods are 405.
func TestKafkaGroupRoutes(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	ctx := context.Background()
	s, err := n.meta.CreateStream(ctx, meta.StreamConfig{Name: "orders", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	if _, err := n.meta.CommitWal(ctx, meta.CommitWal{Object: "wal/kg-1", CreatedMs: now, StampMs: now,
		Chunks: []meta.Chunk{{StreamID: s.ID, Partition: 1, Records: 8, Length: 10}}}); err != nil {
		t.Fatal(err)
	}
	g, err := n.meta.AdvanceKafkaGroup(ctx, "default", "app/one", 0, "consumer")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.meta.CommitKafkaOffsets(ctx, meta.KafkaOffsetCommit{Namespace: "default", Group: "app/one", Generation: g.Generation, Epoch: g.Epoch,
		Offsets: []meta.KafkaOffset{{Topic: "orders", Partition: 1, Offset: 3, LeaderEpoch: -1, Metadata: "m"}}}); err != nil {
		t.Fatal(err)
	}
	c, err := streamapi.NewClient(n.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := c.ListKafkaGroups(ctx, "default")
	if err != nil || len(gs) != 1 || gs[0].Group != "app/one" || gs[0].Generation != 1 || gs[0].ProtocolType != "consumer" {
		t.Fatalf("list: %+v %v", gs, err)
	}
	d, err := c.DescribeKafkaGroup(ctx, "default", "app/one")
	if err != nil || d.Epoch != g.Epoch || len(d.Partitions) != 1 {
		t.Fatalf("describe: %+v %v", d, err)
	}
	if p := d.Partitions[0]; p.Topic != "orders" || p.Partition != 1 || p.Committed != 3 || p.HighWatermark != 8 || p.Lag != 5 || p.Metadata != "m" {
		t.Fatalf("partition: %+v", p)
	}
	_, err = c.DescribeKafkaGroup(ctx, "default", "nope")
	var ae *streamapi.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Detail.Code != streamapi.CodeKafkaGroupNotFound {
		t.Fatalf("unknown group: %v", err)
	}
	resp, err := http.Post(n.srv.URL+"/v1/namespaces/default/kafka-groups", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
}
