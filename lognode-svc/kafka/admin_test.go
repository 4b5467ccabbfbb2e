package kafka_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAdmin drives topic admin through kadm: create (with configs, and the refusals),
// list, create partitions, describe and alter configs (whole and incremental), describe
// cluster, delete.
func TestAdmin(t *testing.T) {
	e := start(t)
	adm := e.admin(t)
	c := ctx(t)
	ms := "3600000"
	res, err := adm.CreateTopic(c, 3, -1, map[string]*string{"retention.ms": &ms}, "a")
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	if res.NumPartitions != 3 {
		t.Fatalf("created with %d partitions", res.NumPartitions)
	}
	if res, _ := adm.CreateTopic(c, 1, 1, nil, "a"); res.Err != kerr.TopicAlreadyExists {
		t.Fatalf("create again: %v", res.Err)
	}
	if res, _ := adm.CreateTopic(c, 1, 1, nil, "bad/name"); res.Err != kerr.InvalidTopicException {
		t.Fatalf("bad name: %v", res.Err)
	}
	bogus := "1"
	if res, _ := adm.CreateTopic(c, 1, 1, map[string]*string{"min.insync.replicas": &bogus}, "b"); res.Err != kerr.InvalidConfig {
		t.Fatalf("unknown config: %v", res.Err)
	}
	if res, _ := adm.CreateTopic(c, 0, 1, nil, "b"); res.Err != kerr.InvalidPartitions {
		t.Fatalf("0 partitions: %v", res.Err)
	}
	td, err := adm.ListTopics(c)
	if err != nil || !td.Has("a") || td.Has("b") || len(td["a"].Partitions) != 3 {
		t.Fatalf("list: %v %v", err, td.Names())
	}
	if r, err := adm.CreatePartitions(c, 2, "a"); err != nil || r["a"].Err != nil {
		t.Fatalf("create partitions: %v %v", err, r["a"].Err)
	}
	if r, _ := adm.UpdatePartitions(c, 2, "a"); r["a"].Err != kerr.InvalidPartitions {
		t.Fatalf("shrink: %v", r["a"].Err)
	}
	if td, _ := adm.ListTopics(c, "a"); len(td["a"].Partitions) != 5 {
		t.Fatalf("after create partitions: %d", len(td["a"].Partitions))
	}
	cfgs := func() map[string]string {
		rc, err := adm.DescribeTopicConfigs(c, "a")
		if err != nil || rc[0].Err != nil {
			t.Fatalf("describe configs: %v %v", err, rc[0].Err)
		}
		m := map[string]string{}
		for _, kv := range rc[0].Configs {
			m[kv.Key] = kv.MaybeValue()
		}
		return m
	}
	if m := cfgs(); m["retention.ms"] != "3600000" || m["retention.bytes"] != "-1" || m["cleanup.policy"] != "delete" {
		t.Fatalf("configs: %v", m)
	}
	compact, rb := "compact", "1048576"
	if r, err := adm.AlterTopicConfigs(c, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: &compact}, {Op: kadm.SetConfig, Name: "retention.bytes", Value: &rb}}, "a"); err != nil || r[0].Err != nil {
		t.Fatalf("incremental alter: %v %v", err, r[0].Err)
	}
	if m := cfgs(); m["retention.ms"] != "3600000" || m["retention.bytes"] != "1048576" || m["cleanup.policy"] != "compact" {
		t.Fatalf("configs after incremental alter: %v", m)
	}
	if r, _ := adm.AlterTopicConfigs(c, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: &rb}}, "a"); r[0].Err != kerr.InvalidConfig {
		t.Fatalf("incremental alter of an unserved config: %v", r[0].Err)
	}
	if r, err := adm.AlterTopicConfigsState(c, []kadm.AlterConfig{{Name: "retention.bytes", Value: &rb}}, "a"); err != nil || r[0].Err != nil {
		t.Fatalf("alter: %v %v", err, r[0].Err)
	}
	if m := cfgs(); m["retention.ms"] != "604800000" || m["retention.bytes"] != "1048576" || m["cleanup.policy"] != "delete" {
		t.Fatalf("configs after a whole alter (unnamed ones reset): %v", m)
	}
	meta, err := adm.BrokerMetadata(c)
	if err != nil || len(meta.Brokers) != 1 || meta.Cluster != "loam" {
		t.Fatalf("broker metadata: %v %+v", err, meta)
	}
	if r, err := adm.DeleteTopics(c, "a", "missing"); err != nil || r["a"].Err != nil || r["missing"].Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("delete: %v %v %v", err, r["a"].Err, r["missing"].Err)
	}
	if td, _ := e.admin(t).ListTopics(c); td.Has("a") { // a new client: kgo caches metadata
		t.Fatal("topic a still listed after delete")
	}
}

// TestListOffsets: earliest, latest, and by timestamp through the index's max
// timestamps, over several commits.
func TestListOffsets(t *testing.T) {
	e := start(t)
	e.createTopic(t, "lo", 1)
	p := e.client(t, kgo.DefaultProduceTopic("lo"))
	base := time.UnixMilli(1732870000000)
	for i := range 10 { // ten commits: ten index entries
		if err := p.ProduceSync(ctx(t), &kgo.Record{Value: []byte("v"), Timestamp: base.Add(time.Duration(i) * time.Minute)}, &kgo.Record{Value: []byte("w"), Timestamp: base.Add(time.Duration(i)*time.Minute + time.Second)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := e.admin(t)
	c := ctx(t)
	start, err := adm.ListStartOffsets(c, "lo")
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(c, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := start.Lookup("lo", 0); o.Offset != 0 {
		t.Fatalf("start %d", o.Offset)
	}
	if o, _ := end.Lookup("lo", 0); o.Offset != 20 {
		t.Fatalf("end %d", o.Offset)
	}
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{
		{base.Add(-time.Hour), 0},
		{base.Add(3 * time.Minute), 6},
		{base.Add(3*time.Minute + time.Millisecond), 7},
		{base.Add(9*time.Minute + time.Second), 19},
		{base.Add(time.Hour), 20}, // none that late: the broker answers -1, kadm the end offset
	} {
		lo, err := adm.ListOffsetsAfterMilli(c, tc.at.UnixMilli(), "lo")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := lo.Lookup("lo", 0)
		if o.Err != nil || o.Offset != tc.want {
			t.Fatalf("offset after %v: %d (%v), want %d", tc.at, o.Offset, o.Err, tc.want)
		}
	}
}
