package emf

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestEMFFlags(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	parse := func(args ...string) *Flags {
		var f Flags
		fs := flag.NewFlagSet("svc", flag.ContinueOnError)
		f.Register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &f
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := parse().Start(ctx, reg, LogNodeMetrics, nil, log); err != nil {
		t.Fatalf("off by default: %v", err)
	}
	if err := parse("--emf-interval", "60s", "--emf-deployment", "prod").Start(ctx, reg, LogNodeMetrics, map[string]string{"Zone": "eu-west-1a"}, log); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"sixty", "500ms"} {
		if err := parse("--emf-interval", bad).Start(ctx, reg, LogNodeMetrics, nil, log); err == nil || !strings.Contains(err.Error(), "--emf-interval") {
			t.Errorf("--emf-interval %s: %v", bad, err)
		}
	}
	t.Setenv("LOAM_EMF_INTERVAL", "1m")
	if f := parse(); f.Interval != "1m" {
		t.Errorf("LOAM_EMF_INTERVAL not the default: %q", f.Interval)
	}
}
