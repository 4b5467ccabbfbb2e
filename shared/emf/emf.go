// Package emf publishes a service's Prometheus metrics to CloudWatch through the embedded
// metric format: every interval it writes one JSON line to its output (the container's
// stdout, which the awslogs driver ships to CloudWatch Logs) from which CloudWatch extracts
// the metrics. A log node publishes its load (ProduceBytesPerSecond: committed WAL bytes per
// second of this node, whatever surface they came through), which the deployment's
// autoscaling tracks, and its mean commit latency; a sequencer voter publishes whether it
// leads, which an alarm sums over the voters.
//
// A line looks like:
//
//	{"_aws":{"Timestamp":1796126400000,"CloudWatchMetrics":[{"Namespace":"Loam",
//	 "Dimensions":[["Deployment","Zone"]],"Metrics":[{"Name":"ProduceBytesPerSecond",
//	 "Unit":"Bytes/Second"}]}]},"Deployment":"loam","Zone":"eu-west-1a",
//	 "ProduceBytesPerSecond":1048576}
package emf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is how a metric's value comes from its Prometheus family (summed over label sets).
type Kind int

const (
	Rate  Kind = iota // a counter's increase per second over the interval
	Mean              // a histogram's mean observation over the interval (ΔSum / ΔCount; 0 when none)
	Value             // a gauge's (or counter's) current value
)

// Metric is one published metric.
type Metric struct {
	Name   string  // EMF metric name
	Family string  // Prometheus metric family, e.g. loam_wal_bytes_total
	Kind   Kind    // how the value is derived
	Scale  float64 // multiplies the value (e.g. 1000 for seconds → milliseconds); 0: 1
	Unit   string  // CloudWatch unit, e.g. Bytes/Second, Milliseconds, Count
}

// LogNodeMetrics are what a log node publishes.
var LogNodeMetrics = []Metric{
	{Name: "ProduceBytesPerSecond", Family: "loam_wal_bytes_total", Kind: Rate, Unit: "Bytes/Second"},
	{Name: "WALFlushesPerSecond", Family: "loam_wal_flushes_total", Kind: Rate, Unit: "Count/Second"},
	{Name: "WALFlushErrorsPerSecond", Family: "loam_wal_flush_errors_total", Kind: Rate, Unit: "Count/Second"},
	{Name: "CommitLatency", Family: "loam_wal_commit_seconds", Kind: Mean, Scale: 1000, Unit: "Milliseconds"},
}

// SequencerMetrics are what a sequencer voter publishes.
var SequencerMetrics = []Metric{
	{Name: "Leader", Family: "loam_sequencer_leader", Kind: Value, Unit: "Count"},
}

// Config configures a Publisher.
type Config struct {
	Gatherer   prometheus.Gatherer
	Out        io.Writer         // where lines go (stdout in a container)
	Namespace  string            // CloudWatch namespace (default Loam)
	Dimensions map[string]string // dimension name → value, e.g. Deployment, Zone; at most 30
	Interval   time.Duration     // default 60 s; CloudWatch's standard resolution is 60 s
	Metrics    []Metric          // required
	Now        func() time.Time
}

// Publisher writes one EMF line per interval. Its memory is two numbers per metric.
type Publisher struct {
	cfg  Config
	dims []string
	mu   sync.Mutex
	last map[string]sample
	at   time.Time
}

// sample is a family's total: a counter's or gauge's value, or a histogram's sum and count.
type sample struct{ v, count float64 }

// New checks cfg and returns a Publisher whose baseline is the counters' values now.
func New(cfg Config) (*Publisher, error) {
	if cfg.Gatherer == nil || cfg.Out == nil {
		return nil, errors.New("emf: Gatherer and Out are required")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "Loam"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if len(cfg.Metrics) == 0 {
		return nil, errors.New("emf: no Metrics")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if len(cfg.Dimensions) > 30 {
		return nil, fmt.Errorf("emf: %d dimensions; CloudWatch allows 30", len(cfg.Dimensions))
	}
	p := &Publisher{cfg: cfg}
	for k, v := range cfg.Dimensions {
		if k == "" || v == "" {
			return nil, fmt.Errorf("emf: dimension %q=%q: names and values must not be empty", k, v)
		}
		for _, m := range cfg.Metrics {
			if k == m.Name || k == "_aws" {
				return nil, fmt.Errorf("emf: dimension %q collides with a metric or the _aws member", k)
			}
		}
		p.dims = append(p.dims, k)
	}
	sort.Strings(p.dims)
	last, err := p.counters()
	if err != nil {
		return nil, err
	}
	p.last, p.at = last, cfg.Now()
	return p, nil
}

// Run publishes every interval until ctx ends, then once more (the last partial interval).
func (p *Publisher) Run(ctx context.Context) error {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.Publish()
			return ctx.Err()
		case <-t.C:
			if err := p.Publish(); err != nil {
				return err
			}
		}
	}
}

// Publish writes the rates since the previous Publish (or New) as one line.
func (p *Publisher) Publish() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	cur, err := p.counters()
	if err != nil {
		return err
	}
	secs := now.Sub(p.at).Seconds()
	line := map[string]any{}
	defs := make([]map[string]string, 0, len(p.cfg.Metrics))
	for _, m := range p.cfg.Metrics {
		c, l := cur[m.Family], p.last[m.Family]
		if c.v < l.v || c.count < l.count { // the family was reset: count from zero
			l = sample{}
		}
		var v float64
		switch m.Kind {
		case Rate:
			if secs > 0 {
				v = (c.v - l.v) / secs
			}
		case Mean:
			if n := c.count - l.count; n > 0 {
				v = (c.v - l.v) / n
			}
		case Value:
			v = c.v
		}
		if m.Scale != 0 {
			v *= m.Scale
		}
		line[m.Name] = math.Round(v*1000) / 1000
		defs = append(defs, map[string]string{"Name": m.Name, "Unit": m.Unit})
	}
	for _, k := range p.dims {
		line[k] = p.cfg.Dimensions[k]
	}
	line["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  p.cfg.Namespace,
			"Dimensions": [][]string{append([]string{}, p.dims...)},
			"Metrics":    defs,
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	p.last, p.at = cur, now
	_, err = p.cfg.Out.Write(append(b, '\n'))
	return err
}

// counters sums each metric's family over its label sets (absent families are 0).
func (p *Publisher) counters() (map[string]sample, error) {
	mfs, err := p.cfg.Gatherer.Gather()
	if err != nil {
		return nil, fmt.Errorf("emf: gather: %w", err)
	}
	want := map[string]bool{}
	for _, m := range p.cfg.Metrics {
		want[m.Family] = true
	}
	out := map[string]sample{}
	for _, mf := range mfs {
		if !want[mf.GetName()] {
			continue
		}
		s := out[mf.GetName()]
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				s.v += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				s.v += m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				s.v += m.GetUntyped().GetValue()
			case m.GetHistogram() != nil:
				s.v += m.GetHistogram().GetSampleSum()
				s.count += float64(m.GetHistogram().GetSampleCount())
			}
		}
		out[mf.GetName()] = s
	}
	return out, nil
}
