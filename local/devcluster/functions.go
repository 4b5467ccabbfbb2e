package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loamhq/loam/shared/compaction"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/gc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/notify"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/retention"
	"github.com/loamhq/loam/shared/segmenter"
)

// FunctionsConfig tunes the background functions the embedded cluster runs in-process:
// the same handlers as the Lambda functions (shared/segmenter, retention, compaction, gc),
// fed the same S3 event JSON. Zero values take the defaults below, which are small so a
// laptop shows segments appearing and WAL objects going away within a minute.
type FunctionsConfig struct {
	Disabled           bool          // run no background functions
	SegmentTargetBytes int64         // default 16 MiB
	SegmentMaxAge      time.Duration // default 30 s
	GCGrace            time.Duration // default 30 s
	// SweepInterval is how often the sweeps (segmenter, retention, compaction, gc) run;
	// default 5 s.
	SweepInterval time.Duration
	// WatchInterval is how often the bucket's wal/ is listed for new objects; default 500 ms.
	WatchInterval time.Duration
	// KMSEndpoint is the KMS the segmenter and compaction open and seal keyed namespaces'
	// data with (loam dev --kms; docs/encryption.md); empty: none, their partitions stay
	// in the WAL.
	KMSEndpoint string
}

// Defaults of FunctionsConfig.
const (
	DefaultSegmentTargetBytes = 16 << 20
	DefaultSegmentMaxAge      = 30 * time.Second
	DefaultGCGrace            = 30 * time.Second
	DefaultSweepInterval      = 5 * time.Second
	DefaultWatchInterval      = 500 * time.Millisecond
	devBucketName             = "loam-dev"
)

func (f *FunctionsConfig) defaults() {
	if f.SegmentTargetBytes == 0 {
		f.SegmentTargetBytes = DefaultSegmentTargetBytes
	}
	if f.SegmentMaxAge == 0 {
		f.SegmentMaxAge = DefaultSegmentMaxAge
	}
	if f.GCGrace == 0 {
		f.GCGrace = DefaultGCGrace
	}
	if f.SweepInterval == 0 {
		f.SweepInterval = DefaultSweepInterval
	}
	if f.WatchInterval == 0 {
		f.WatchInterval = DefaultWatchInterval
	}
}

// functions runs the handlers: a watcher lists wal/ and fires the segmenter with the S3
// event notification of each new WAL object (the event S3 would send), and a timer fires
// the sweeps with the scheduled-event payload EventBridge would send.
type functions struct {
	cfg    FunctionsConfig
	bucket objstore.Bucket
	log    *slog.Logger
	seg    notify.Handler
	sweeps []sweep
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seen   map[string]bool
	// notified counts the notifications the AWS mode's poller handed to the segmenter.
	notified *atomic.Int64
}

type sweep struct {
	name string
	h    notify.Handler
}

// scheduledEvent is the payload EventBridge sends on a schedule.
const scheduledEvent = `{"version":"0","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`

func startFunctions(c *Cluster) (*functions, error) {
	fc := c.cfg.Functions
	if fc.KMSEndpoint == "" {
		fc.KMSEndpoint = c.cfg.KMSEndpoint // the log node's KMS
	}
	f, seg, err := newFunctions(c.bucket, c.client, c.coord, fc, c.cfg.Logger)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.wg.Add(2)
	if c.aws != nil {
		// Notifications arrive through the queue, as Lambda's SQS event source delivers them.
		p := c.aws.poller(f, seg.HandleS3, c.cfg.AWS.Region)
		f.notified = &c.aws.handled
		go func() { defer f.wg.Done(); p.Run(ctx) }()
	} else {
		go func() { defer f.wg.Done(); f.watch(ctx) }()
	}
	go func() { defer f.wg.Done(); f.sweepLoop(ctx) }()
	return f, nil
}

// Functions are the background functions run outside an embedded cluster: `loam dev
// --sequencers N --nodes M` runs them in its supervising process against the voters, the
// bucket and the shared coordination store.
type Functions struct{ f *functions }

// StartFunctions runs the segmenter (on each new WAL object, found by listing wal/), and the
// sweeps of the segmenter, retention, compaction and GC, until Close.
func StartFunctions(bucket objstore.Bucket, m meta.Client, store coord.Store, cfg FunctionsConfig, log *slog.Logger) (*Functions, error) {
	if log == nil {
		log = slog.Default()
	}
	f, _, err := newFunctions(bucket, m, store, cfg, log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.wg.Add(2)
	go func() { defer f.wg.Done(); f.watch(ctx) }()
	go func() { defer f.wg.Done(); f.sweepLoop(ctx) }()
	return &Functions{f}, nil
}

// Describe is the banner line of the functions.
func (f *Functions) Describe() string { return f.f.describe() }

// Close stops them, waiting for runs in flight.
func (f *Functions) Close() { f.f.close() }

func newFunctions(bucket objstore.Bucket, client meta.Client, store coord.Store, cfg FunctionsConfig, logger *slog.Logger) (*functions, *segmenter.Segmenter, error) {
	cfg.defaults()
	log := logger.With("svc", "functions")
	keys, err := functionKeys(client, bucket, cfg.KMSEndpoint, log) // functions_kms.go
	if err != nil {
		return nil, nil, err
	}
	seg, err := segmenter.New(segmenter.Config{Bucket: bucket, Meta: client, Coord: store, TargetBytes: cfg.SegmentTargetBytes,
		MaxAge: cfg.SegmentMaxAge, Holder: "dev-segmenter", Logger: log.With("fn", "segmenter"), Keys: keys})
	if err != nil {
		return nil, nil, err
	}
	ret, err := retention.New(retention.Config{Meta: client, Logger: log.With("fn", "retention")})
	if err != nil {
		return nil, nil, err
	}
	comp, err := compaction.New(compaction.Config{Bucket: bucket, Meta: client, Coord: store, TargetBytes: cfg.SegmentTargetBytes,
		Holder: "dev-compactor", Logger: log.With("fn", "compaction"), Keys: keys})
	if err != nil {
		return nil, nil, err
	}
	g, err := gc.New(gc.Config{Bucket: bucket, Meta: client, Coord: store, Grace: cfg.GCGrace,
		OrphanInterval: 10 * time.Minute, Logger: log.With("fn", "gc")})
	if err != nil {
		return nil, nil, err
	}
	f := &functions{cfg: cfg, bucket: bucket, log: log, seg: seg.Handler(), seen: map[string]bool{},
		sweeps: []sweep{{"segmenter", seg.Handler()}, {"retention", ret.Handler()}, {"compaction", comp.Handler()}, {"gc", g.Handler()}}}
	return f, seg, nil
}

func (f *functions) close() {
	f.cancel()
	f.wg.Wait()
}

// watch lists wal/ every WatchInterval and notifies the segmenter of each object not seen
// before, in key order (WAL keys carry a ULID, so that is creation order per node).
func (f *functions) watch(ctx context.Context) {
	t := time.NewTicker(f.cfg.WatchInterval)
	defer t.Stop()
	for {
		if err := f.scan(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("listing wal/ failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (f *functions) scan(ctx context.Context) error {
	var fresh []notify.Object
	now := map[string]bool{}
	err := f.bucket.List(ctx, "wal/", func(o objstore.ObjectInfo) error {
		if !expressDue(o, time.Now(), segmenter.DefaultExpressAge) {
			return nil // notified once old enough (express.go)
		}
		now[o.Key] = true
		if !f.seen[o.Key] && segmenter.IsWALKey(o.Key) {
			fresh = append(fresh, notify.Object{Bucket: devBucketName, Key: o.Key, Size: o.Size, EventTime: o.LastModified,
				ETag: strconv.FormatInt(o.Size, 16), Sequencer: strconv.FormatInt(o.LastModified.UnixNano(), 16)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	f.seen = now // forget deleted objects
	for len(fresh) > 0 {
		n := min(len(fresh), 10)
		payload, err := json.Marshal(notify.NewS3Event("local", fresh[:n]...))
		if err != nil {
			return err
		}
		if _, err := f.seg.Invoke(ctx, payload); err != nil && ctx.Err() == nil {
			// As with S3 → Lambda, a failed event is retried: forget these so the next
			// listing notifies them again (handling is idempotent).
			for _, o := range fresh[:n] {
				delete(f.seen, o.Key)
			}
			f.log.Warn("segmenter failed", "err", err)
		}
		fresh = fresh[n:]
	}
	return nil
}

// sweepLoop fires every sweep each SweepInterval.
func (f *functions) sweepLoop(ctx context.Context) {
	t := time.NewTicker(f.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range f.sweeps {
			if _, err := s.h.Invoke(ctx, json.RawMessage(scheduledEvent)); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				f.log.Warn("sweep failed", "fn", s.name, "err", err)
			}
		}
	}
}

// describe is the banner line of the functions.
func (f *functions) describe() string {
	trigger := "wal/ listed every " + f.cfg.WatchInterval.String()
	if f.notified != nil {
		trigger = "fired by S3 notifications through SQS"
	}
	return fmt.Sprintf("segmenter %s; segment target %d B, max age %v; gc grace %v; sweeps every %v",
		trigger, f.cfg.SegmentTargetBytes, f.cfg.SegmentMaxAge, f.cfg.GCGrace, f.cfg.SweepInterval)
}
