package objstore

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WatchFaultProfile re-reads the profile in file every interval until ctx ends and, when
// its contents change, puts it in force on f (its schedules then start again). A file that
// does not parse is logged and ignored: the profile in force stays. loaded is the content
// f's current profile came from.
func WatchFaultProfile(ctx context.Context, f *FaultBucket, file string, loaded []byte, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		data, err := os.ReadFile(file)
		if err != nil {
			log.Warn("fault profile: keeping the one in force", "file", file, "err", err)
			continue
		}
		if bytes.Equal(data, loaded) {
			continue
		}
		loaded = data
		p, err := ParseFaultProfile(data)
		if err != nil {
			log.Error("fault profile: keeping the one in force", "file", file, "err", err)
			continue
		}
		f.SetProfile(p)
		log.Warn("fault profile reloaded", "file", file, "rules", len(p.Rules))
	}
}

var (
	faultInjectedDesc = prometheus.NewDesc("loam_objstore_faults_injected_total",
		"Faults the fault profile injected into object-store calls (a testing aid), by op and fault.",
		[]string{"op", "fault"}, nil)
	faultCallsDesc = prometheus.NewDesc("loam_objstore_fault_calls_total",
		"Object-store calls that passed the fault-injecting bucket, hit or not, by op.",
		[]string{"op"}, nil)
)

// Describe implements prometheus.Collector.
func (f *FaultBucket) Describe(ch chan<- *prometheus.Desc) {
	ch <- faultInjectedDesc
	ch <- faultCallsDesc
}

// Collect implements prometheus.Collector: every (op, fault) pair, zero included, and the
// calls by op.
func (f *FaultBucket) Collect(ch chan<- prometheus.Metric) {
	for i, op := range faultOps {
		ch <- prometheus.MustNewConstMetric(faultCallsDesc, prometheus.CounterValue, float64(f.calls[i].Load()), op)
		for j, k := range faultKinds {
			if ops, ok := faultOpsFor[k]; ok && !contains(ops, op) {
				continue
			}
			ch <- prometheus.MustNewConstMetric(faultInjectedDesc, prometheus.CounterValue, float64(f.counts[i][j].Load()), op, k)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
