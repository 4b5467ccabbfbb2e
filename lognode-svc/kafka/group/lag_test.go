package group

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/shared/meta"
)

// Lag per partition reaches /metrics: high watermark - committed, from the sequencer, with
// the groups held in memory beside it.
func TestLagMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, mc := newCoord(t, map[string]int32{"orders": 2}, func(cfg *Config) { cfg.Registry = reg })
	s := mustStream(t, mc, "orders")
	ctx := context.Background()
	if _, err := mc.CommitWal(ctx, meta.CommitWal{Object: "wal/lag-1", CreatedMs: time.Now().UnixMilli(), StampMs: time.Now().UnixMilli(),
		Chunks: []meta.Chunk{{StreamID: s.ID, Partition: 0, Records: 10, Offset: 0, Length: 100}, {StreamID: s.ID, Partition: 1, Records: 3, Offset: 100, Length: 10}}}); err != nil {
		t.Fatal(err)
	}
	codeOK(t, do[*kmsg.OffsetCommitResponse](t, c, commitReq("g", "", -1, "orders", map[int32]int64{0: 4, 1: 3})).Topics[0].Partitions[0].ErrorCode)
	join(t, c, "live", 10*time.Second, "orders")
	want := `
# HELP loam_kafka_group_lag Records of a partition not yet consumed by a Kafka consumer group (high watermark - committed offset, at least 0).
# TYPE loam_kafka_group_lag gauge
loam_kafka_group_lag{group="g",namespace="default",partition="0",topic="orders"} 6
loam_kafka_group_lag{group="g",namespace="default",partition="1",topic="orders"} 0
# HELP loam_kafka_group_members Members of the Kafka groups this node holds.
# TYPE loam_kafka_group_members gauge
loam_kafka_group_members 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "loam_kafka_group_lag", "loam_kafka_group_members"); err != nil {
		t.Fatal(err)
	}
	_, lags, err := Lag(ctx, mc, meta.DefaultNS, "g")
	if err != nil || len(lags) != 2 || lags[0].HighWatermark != 10 || lags[0].Lag != 6 {
		t.Fatalf("lag: %+v %v", lags, err)
	}
}
