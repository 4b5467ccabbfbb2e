package group

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/shared/meta"
)

// maxLagSeries bounds the loam_kafka_group_lag series one scrape reports.
const maxLagSeries = 1000

var (
	lagDesc = prometheus.NewDesc("loam_kafka_group_lag",
		"Records of a partition not yet consumed by a Kafka consumer group (high watermark - committed offset, at least 0).",
		[]string{"namespace", "group", "topic", "partition"}, nil)
	lagDroppedDesc = prometheus.NewDesc("loam_kafka_group_lag_series_dropped",
		"Kafka group partitions left out of loam_kafka_group_lag by its series cap in this scrape.", nil, nil)
	groupsDesc = prometheus.NewDesc("loam_kafka_groups",
		"Kafka groups this node holds in memory, by kind (classic, consumer) and state.", []string{"kind", "state"}, nil)
	membersDesc = prometheus.NewDesc("loam_kafka_group_members",
		"Members of the Kafka groups this node holds.", nil, nil)
)

// GroupLag is one committed partition of a group with its lag.
type GroupLag struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     int64  `json:"committed"`
	HighWatermark int64  `json:"high_watermark"`
	Lag           int64  `json:"lag"`
	Metadata      string `json:"metadata,omitempty"`
	CommittedMs   int64  `json:"committed_ms"`
}

// Lag answers a group's committed offsets with the lag of each partition, read from the
// sequencer (partitions of topics deleted since are left out). Tools (loam kafka-groups
// describe) and the lag collector use it.
func Lag(ctx context.Context, m meta.Client, ns, group string) (meta.KafkaGroupState, []GroupLag, error) {
	st, err := m.DescribeKafkaGroup(ctx, ns, group)
	if err != nil {
		return st, nil, err
	}
	hwm := map[string][]meta.PartitionState{}
	var out []GroupLag
	for _, o := range st.Offsets {
		ps, ok := hwm[o.Topic]
		if !ok {
			_, ps, err = m.GetStream(ctx, ns, o.Topic)
			if err != nil {
				ps = nil
			}
			hwm[o.Topic] = ps
		}
		if int(o.Partition) >= len(ps) {
			continue
		}
		h := ps[o.Partition].HighWatermark
		out = append(out, GroupLag{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, HighWatermark: h,
			Lag: max(h-o.Offset, 0), Metadata: o.Metadata, CommittedMs: o.CommittedMs})
	}
	return st, out, nil
}

// lagCollector reports, at each scrape, the lag of every committed partition of every Kafka
// group of every namespace, read from the sequencer within timeout. Label cardinality is
// bounded: at most max series (namespaces, groups and partitions in name order), the
// partitions past the cap counted in loam_kafka_group_lag_series_dropped. Every log node
// answers the same figures.
type lagCollector struct {
	meta    meta.Client
	max     int
	timeout time.Duration
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lagDesc
	ch <- lagDroppedDesc
}

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	n, dropped := 0, 0
	namespaces, err := c.meta.ListNamespaces(ctx)
	if err != nil {
		return
	}
	for _, ns := range namespaces {
		groups, err := c.meta.ListKafkaGroups(ctx, ns)
		if err != nil {
			continue
		}
		for _, g := range groups {
			if n >= c.max {
				if st, err := c.meta.DescribeKafkaGroup(ctx, ns, g.Group); err == nil {
					dropped += len(st.Offsets)
				}
				continue
			}
			_, lags, err := Lag(ctx, c.meta, ns, g.Group)
			if err != nil {
				continue
			}
			for _, l := range lags {
				if n >= c.max {
					dropped++
					continue
				}
				n++
				ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(l.Lag), ns, g.Group, l.Topic, strconv.Itoa(int(l.Partition)))
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(lagDroppedDesc, prometheus.GaugeValue, float64(dropped))
}

// groupsCollector reports the groups held in memory by kind and state, and their members.
type groupsCollector struct{ c *Coordinator }

func (gc *groupsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupsDesc
	ch <- membersDesc
}

func (gc *groupsCollector) Collect(ch chan<- prometheus.Metric) {
	gc.c.mu.Lock()
	gs := make([]*group, 0, len(gc.c.groups))
	for _, g := range gc.c.groups {
		gs = append(gs, g)
	}
	gc.c.mu.Unlock()
	type ks struct{ kind, state string }
	counts := map[ks]int{}
	members := 0
	for _, g := range gs {
		g.mu.Lock()
		if !g.dead {
			st := g.state
			if g.kind == kindConsumer && g.cg != nil {
				st = g.cg.state(g)
				members += len(g.cg.members)
			} else {
				members += len(g.members)
			}
			counts[ks{g.kind.String(), st.String()}]++
		}
		g.mu.Unlock()
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(groupsDesc, prometheus.GaugeValue, float64(n), k.kind, k.state)
	}
	ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(members))
}
