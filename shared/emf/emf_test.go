package emf

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestPublishGolden checks the exact line CloudWatch gets: rates over the interval, the
// dimensions, and the _aws metadata naming every metric.
func TestPublishGolden(t *testing.T) {
	reg := prometheus.NewRegistry()
	bytesC := prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_wal_bytes_total", Help: "h"})
	flushes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_wal_flushes_total", Help: "h"}, []string{"class"})
	commit := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "loam_wal_commit_seconds", Help: "h"})
	reg.MustRegister(bytesC, flushes, commit)
	commit.Observe(5) // before New: not counted
	bytesC.Add(1000)  // before New: not counted
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	var out bytes.Buffer
	p, err := New(Config{Gatherer: reg, Out: &out, Dimensions: map[string]string{"Zone": "eu-west-1a", "Deployment": "loam"}, Now: clk.now, Metrics: LogNodeMetrics})
	if err != nil {
		t.Fatal(err)
	}
	bytesC.Add(60 << 20)
	flushes.WithLabelValues("standard").Add(200)
	flushes.WithLabelValues("express").Add(40)
	commit.Observe(0.010)
	commit.Observe(0.020)
	clk.t = clk.t.Add(time.Minute)
	if err := p.Publish(); err != nil {
		t.Fatal(err)
	}
	const want = `{"CommitLatency":15,"Deployment":"loam","ProduceBytesPerSecond":1048576,"WALFlushErrorsPerSecond":0,"WALFlushesPerSecond":4,"Zone":"eu-west-1a","_aws":{"CloudWatchMetrics":[{"Dimensions":[["Deployment","Zone"]],"Metrics":[{"Name":"ProduceBytesPerSecond","Unit":"Bytes/Second"},{"Name":"WALFlushesPerSecond","Unit":"Count/Second"},{"Name":"WALFlushErrorsPerSecond","Unit":"Count/Second"},{"Name":"CommitLatency","Unit":"Milliseconds"}],"Namespace":"Loam"}],"Timestamp":1796126460000}}` + "\n"
	if out.String() != want {
		t.Fatalf("line:\n%s\nwant:\n%s", out.String(), want)
	}
	// The next interval counts only what happened in it.
	out.Reset()
	bytesC.Add(30)
	clk.t = clk.t.Add(30 * time.Second)
	if err := p.Publish(); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["ProduceBytesPerSecond"] != 1.0 || line["WALFlushesPerSecond"] != 0.0 || line["CommitLatency"] != 0.0 {
		t.Fatalf("second interval: %s", out.String())
	}
}

func TestConfigErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	for name, cfg := range map[string]Config{
		"no gatherer":   {Out: &bytes.Buffer{}, Metrics: LogNodeMetrics},
		"no output":     {Gatherer: reg, Metrics: LogNodeMetrics},
		"no metrics":    {Gatherer: reg, Out: &bytes.Buffer{}},
		"empty value":   {Gatherer: reg, Out: &bytes.Buffer{}, Metrics: LogNodeMetrics, Dimensions: map[string]string{"Zone": ""}},
		"metric's name": {Gatherer: reg, Out: &bytes.Buffer{}, Metrics: LogNodeMetrics, Dimensions: map[string]string{"ProduceBytesPerSecond": "x"}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestRunPublishesOnStop: Run writes a line per tick and a last one when its context ends.
func TestRunPublishesOnStop(t *testing.T) {
	reg := prometheus.NewRegistry()
	var out syncBuffer
	p, err := New(Config{Gatherer: reg, Out: &out, Interval: 10 * time.Millisecond, Metrics: SequencerMetrics})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	time.Sleep(55 * time.Millisecond)
	cancel()
	<-done
	if n := strings.Count(out.String(), "\n"); n < 2 {
		t.Fatalf("%d lines after 55 ms at a 10 ms interval", n)
	}
}

// TestGaugeValue: a gauge publishes its current value (a voter's Leader is 0 or 1).
func TestGaugeValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	leader := 0.0
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loam_sequencer_leader", Help: "h"}, func() float64 { return leader }))
	var out bytes.Buffer
	p, err := New(Config{Gatherer: reg, Out: &out, Metrics: SequencerMetrics, Dimensions: map[string]string{"Voter": "seq-1"}})
	if err != nil {
		t.Fatal(err)
	}
	leader = 1
	if err := p.Publish(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"Leader":1,`) || !strings.Contains(out.String(), `"Dimensions":[["Voter"]]`) {
		t.Fatalf("line %s", out.String())
	}
}
