package writer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/walfmt"
)

// Flush intervals of the buffered classes.
const (
	StandardFlushInterval = 250 * time.Millisecond
	ExpressFlushInterval  = 5 * time.Millisecond
)

// ClassesConfig configures the write paths of every class one node serves. Each class is
// its own Buffered writer: its own buffer, flush timer, in-flight flushes and pending-byte
// bound, so an express produce never waits for a standard flush (nor the reverse), and an
// idle class makes no PUTs.
type ClassesConfig struct {
	NodeID   string
	Meta     meta.Client
	Now      func() time.Time
	OnCommit func([]Committed)
	Logger   *slog.Logger

	// Standard is the standard class's writer configuration (Bucket required); NodeID,
	// Meta, Now, OnCommit and Logger are filled from the fields above when zero, Class is
	// set, FlushInterval defaults to StandardFlushInterval.
	Standard Config
	// Express is the express class's writer configuration: Bucket is the two-of-three
	// zonal bucket (objstore.Express); nil Bucket: the class is not served. FlushInterval
	// defaults to ExpressFlushInterval. Its WAL objects are wal/express/<node>/<ulid>.wal.
	Express Config
	// Registry, when set, gets each class's writer metrics: the standard class's under
	// their plain names (loam_wal_*), the express class's prefixed express_ (express_loam_wal_*).
	Registry prometheus.Registerer
}

// Classes is the write path of each class a node serves, keyed by the class names of
// streams (meta.ClassStandard, meta.ClassExpress): the map the node's APIs route produces
// through.
type Classes struct {
	Standard *Buffered
	Express  *Buffered // nil: not served
}

// NewClasses starts the writers of cfg.
func NewClasses(cfg ClassesConfig) (*Classes, error) {
	fill := func(c *Config, class walfmt.Class, flush time.Duration, reg prometheus.Registerer) {
		c.Class = class
		if c.NodeID == "" {
			c.NodeID = cfg.NodeID
		}
		if c.Meta == nil {
			c.Meta = cfg.Meta
		}
		if c.Now == nil {
			c.Now = cfg.Now
		}
		if c.OnCommit == nil {
			c.OnCommit = cfg.OnCommit
		}
		if c.Logger == nil && cfg.Logger != nil {
			c.Logger = cfg.Logger.With("class", class.String())
		}
		if c.FlushInterval <= 0 {
			c.FlushInterval = flush
		}
		if c.Metrics == nil && reg != nil {
			c.Metrics = NewMetrics(reg)
		}
	}
	std := cfg.Standard
	fill(&std, walfmt.ClassStandard, StandardFlushInterval, cfg.Registry)
	s, err := NewBuffered(std)
	if err != nil {
		return nil, fmt.Errorf("standard class: %w", err)
	}
	out := &Classes{Standard: s}
	if cfg.Express.Bucket == nil {
		return out, nil
	}
	exp := cfg.Express
	var reg prometheus.Registerer
	if cfg.Registry != nil {
		reg = prometheus.WrapRegistererWithPrefix("express_", cfg.Registry)
	}
	fill(&exp, walfmt.ClassExpress, ExpressFlushInterval, reg)
	if exp.MaxBufferBytes <= 0 {
		exp.MaxBufferBytes = std.MaxBufferBytes
	}
	e, err := NewBuffered(exp)
	if err != nil {
		s.Close(context.Background())
		return nil, fmt.Errorf("express class: %w", err)
	}
	out.Express = e
	return out, nil
}

// Map is the writers keyed by class name.
func (c *Classes) Map() map[string]Writer {
	m := map[string]Writer{meta.ClassStandard: c.Standard}
	if c.Express != nil {
		m[meta.ClassExpress] = c.Express
	}
	return m
}

// Close flushes and stops every class's writer.
func (c *Classes) Close(ctx context.Context) error {
	err := c.Standard.Close(ctx)
	if c.Express != nil {
		err = errors.Join(err, c.Express.Close(ctx))
	}
	return err
}
