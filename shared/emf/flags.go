package emf

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Flags are the command-line settings every service reads the same way: --emf-interval
// (LOAM_EMF_INTERVAL; 0, the default, publishes nothing), --emf-namespace
// (LOAM_EMF_NAMESPACE, default Loam) and --emf-deployment (LOAM_EMF_DEPLOYMENT: the
// Deployment dimension; empty: none).
type Flags struct {
	Interval   string
	Namespace  string
	Deployment string
}

// Register adds the flags to fs, their defaults from the environment.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Interval, "emf-interval", envOr("LOAM_EMF_INTERVAL", "0"),
		"write CloudWatch embedded-metric-format lines to stdout this often (e.g. 60s); 0: never")
	fs.StringVar(&f.Namespace, "emf-namespace", envOr("LOAM_EMF_NAMESPACE", "Loam"), "CloudWatch namespace of the --emf-interval metrics")
	fs.StringVar(&f.Deployment, "emf-deployment", envOr("LOAM_EMF_DEPLOYMENT", ""), "value of the Deployment dimension of the --emf-interval metrics (empty: no such dimension)")
}

// Start publishes metrics from g to stdout until ctx ends, when an interval is set, with
// the Deployment dimension and extra (dimensions with empty values are left out).
func (f *Flags) Start(ctx context.Context, g prometheus.Gatherer, metrics []Metric, extra map[string]string, log *slog.Logger) error {
	interval, err := time.ParseDuration(f.Interval)
	switch {
	case err != nil:
		return fmt.Errorf("--emf-interval (LOAM_EMF_INTERVAL) %q: not a duration such as 60s", f.Interval)
	case interval == 0:
		return nil
	case interval < time.Second:
		return fmt.Errorf("--emf-interval %v: at least 1s (CloudWatch's finest resolution)", interval)
	}
	dims := map[string]string{}
	if f.Deployment != "" {
		dims["Deployment"] = f.Deployment
	}
	for k, v := range extra {
		if v != "" {
			dims[k] = v
		}
	}
	p, err := New(Config{Gatherer: g, Out: os.Stdout, Namespace: f.Namespace, Dimensions: dims, Interval: interval, Metrics: metrics})
	if err != nil {
		return fmt.Errorf("--emf-*: %w", err)
	}
	go func() {
		if err := p.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("emf metrics stopped", "err", err)
		}
	}()
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
