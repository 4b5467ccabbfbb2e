package pricing

import (
	"math"
	"testing"
)

var testMeasured = Measured{FlushInterval: 0.25, MaxBufferBytes: 8 << 20, PutsPerFlush: 1, CommitsPerFlush: 1, CommitBytes: 512,
	SegmenterGetsPerWAL: 9, SegmentPutsPerGiB: 8, SegmentTargetBytes: 128 << 20, CoordWritesPerWAL: 3, CoordReadsPerWAL: 0.1,
	RegistryWritesPerNodeHour: 1080}

func TestNodesAndFlushes(t *testing.T) {
	d := DefaultDeployment
	for _, c := range []struct {
		mibps float64
		nodes int
	}{{1, 3}, {10, 3}, {96, 3}, {100, 6}, {300, 12}} {
		if got := d.Nodes(c.mibps * (1 << 20)); got != c.nodes {
			t.Errorf("%v MiB/s: %d nodes, want %d", c.mibps, got, c.nodes)
		}
	}
	m := testMeasured
	if f := m.FlushesPerSecond(0); f != 0 {
		t.Errorf("idle node flushes %v/s", f)
	}
	if f := m.FlushesPerSecond(1 << 20); f != 4 {
		t.Errorf("1 MiB/s: %v flushes/s, want 4 (the interval)", f)
	}
	if f := m.FlushesPerSecond(64 << 20); f != 8 {
		t.Errorf("64 MiB/s: %v flushes/s, want 8 (the buffer fills first)", f)
	}
}

// TestLoamBill pins the bill's arithmetic at 10 MiB/s on three nodes.
func TestLoamBill(t *testing.T) {
	lines := LoamBill(testMeasured, DefaultDeployment, 10<<20)
	got := map[string]float64{}
	for _, l := range lines {
		got[l.Item] = l.Monthly
	}
	walObjects := 3 * 4.0 * SecondsPerMonth // 3 nodes × 4 flushes/s
	for item, want := range map[string]float64{
		"S3 PUT (WAL objects)": walObjects / 1000 * S3StandardPutPer1000,
		"S3 GET (segmenter)":   walObjects * 9 / 1000 * S3StandardGetPer1000,
		"S3 PUT (segments)":    10.0 / 1024 * SecondsPerMonth * 8 / 1000 * S3StandardPutPer1000,
		"Fargate (log nodes)":  3 * (FargateArmPerVCPUHour + 2*FargateArmPerGBHour) * HoursPerMonth,
		"S3 storage":           10.0/1024*7*86400*S3StandardStoragePerGBMonth + 10.0/1024*20*60*S3StandardStoragePerGBMonth,
	} {
		if math.Abs(got[item]-want) > 0.01 {
			t.Errorf("%s: $%.2f, want $%.2f", item, got[item], want)
		}
	}
	if len(lines) != 11 || Total(lines) <= 0 {
		t.Fatalf("%d lines, total %v", len(lines), Total(lines))
	}
	k := KafkaBill(DefaultDeployment, 10<<20)
	if Total(k) < Total(lines) {
		t.Errorf("Kafka RF 3 $%.0f below Loam $%.0f: cross-zone replication alone should exceed it", Total(k), Total(lines))
	}
}

// TestExpressBill: the express class flushes every 5 ms and PUTs each WAL object to three
// S3 Express buckets at their prices.
func TestExpressBill(t *testing.T) {
	lines := ClassBill(testMeasured, DefaultDeployment, ExpressClass, 10<<20)
	got := map[string]float64{}
	for _, l := range lines {
		got[l.Item] = l.Monthly
	}
	// 3 nodes at 3.3 MiB/s each: objects of ~17 KiB, under the 512 KiB fee threshold.
	want := 3 * 200.0 * 3 * SecondsPerMonth / 1000 * S3ExpressPutPer1000
	if math.Abs(got["S3 PUT (WAL objects)"]-want) > 0.01 {
		t.Errorf("express WAL PUTs $%.2f, want $%.2f", got["S3 PUT (WAL objects)"], want)
	}
}
