package devcluster

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/shared/objstore"
)

// wrapFaults wraps c.bucket in a fault-injecting bucket when cfg.FaultProfile names a
// profile, and re-reads the file every second until Close.
func (c *Cluster) wrapFaults() error {
	if c.cfg.FaultProfile == "" {
		return nil
	}
	data, err := os.ReadFile(c.cfg.FaultProfile)
	if err != nil {
		return fmt.Errorf("devcluster: fault profile: %w", err)
	}
	p, err := objstore.ParseFaultProfile(data)
	if err != nil {
		return fmt.Errorf("devcluster: fault profile %s: %w", c.cfg.FaultProfile, err)
	}
	c.faults = objstore.WithFaults(c.bucket, p)
	c.bucket = c.faults
	ctx, cancel := context.WithCancel(context.Background())
	c.stopFaults = cancel
	c.cfg.Logger.Warn("injecting object-store faults (a testing aid)", "file", c.cfg.FaultProfile, "rules", len(p.Rules))
	go objstore.WatchFaultProfile(ctx, c.faults, c.cfg.FaultProfile, data, time.Second, c.cfg.Logger)
	return nil
}

// Faults is the fault-injecting bucket of Config.FaultProfile (nil without one).
func (c *Cluster) Faults() *objstore.FaultBucket { return c.faults }

func (c *Cluster) collectors() []prometheus.Collector {
	if c.faults == nil {
		return nil
	}
	return []prometheus.Collector{c.faults}
}
