package lognodecmd

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/objstore"
)

// expressFlags are the express class's flags (docs/express.md): the three zonal buckets,
// their zones (the node's --zone picks the one it reads first), the flush interval, and the
// segmenter's queue the node notifies of each committed express WAL object.
type expressFlags struct {
	buckets, zones, endpoint, region string
	flush                            time.Duration
	queue, queueEndpoint             string
	delay                            time.Duration
}

func (f *expressFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.buckets, "express-buckets", os.Getenv("LOAM_EXPRESS_BUCKETS"), "the express class's three zonal buckets, comma-separated, one per zone of --express-zones: s3://NAME (S3 Express One Zone directory buckets), file:///DIR or directories; empty: streams of class express are refused (env LOAM_EXPRESS_BUCKETS)")
	fs.StringVar(&f.zones, "express-zones", env("LOAM_EXPRESS_ZONES", "zone-a,zone-b,zone-c"), "the zones of --express-buckets, comma-separated; reads try the bucket of --zone first (env LOAM_EXPRESS_ZONES)")
	fs.StringVar(&f.endpoint, "express-endpoint", os.Getenv("LOAM_EXPRESS_ENDPOINT"), "S3 API endpoint of s3:// --express-buckets that name none (an emulator; path-style)")
	fs.StringVar(&f.region, "express-region", os.Getenv("LOAM_EXPRESS_REGION"), "region of s3:// --express-buckets that name none")
	fs.DurationVar(&f.flush, "express-flush-interval", writer.ExpressFlushInterval, "express-class WAL flush interval")
	fs.StringVar(&f.queue, "express-notify-queue", os.Getenv("LOAM_EXPRESS_NOTIFY_QUEUE"), "SQS queue URL of the segmenter: the node sends it an S3 event for each express WAL object it committed (directory buckets send none); empty: the segmenter finds them by listing (loam dev) or its sweep")
	fs.StringVar(&f.queueEndpoint, "express-notify-endpoint", os.Getenv("LOAM_EXPRESS_NOTIFY_ENDPOINT"), "SQS endpoint of --express-notify-queue (an emulator)")
	fs.DurationVar(&f.delay, "express-notify-delay", 2*time.Second, "SQS delay of those notifications: the segmenter's express age (LOAM_SEGMENT_EXPRESS_AGE), so one segment covers that long of a partition's express objects")
}

// bucketURLs are the three bucket URLs, s3:// ones given --express-endpoint and
// --express-region when they name none.
func (f *expressFlags) bucketURLs() ([]string, error) {
	urls := strings.Split(f.buckets, ",")
	if len(urls) != 3 {
		return nil, fmt.Errorf("--express-buckets %q: %d buckets, want 3 (one per zone)", f.buckets, len(urls))
	}
	for i, u := range urls {
		u = strings.TrimSpace(u)
		if u == "" {
			return nil, fmt.Errorf("--express-buckets %q: bucket %d is empty", f.buckets, i+1)
		}
		if strings.HasPrefix(u, "s3://") && (f.endpoint != "" || f.region != "") {
			pu, err := url.Parse(u)
			if err != nil {
				return nil, fmt.Errorf("--express-buckets: %q: %w", u, err)
			}
			q := pu.Query()
			if f.endpoint != "" && q.Get("endpoint") == "" {
				q.Set("endpoint", f.endpoint)
				q.Set("path_style", "true")
			}
			if f.region != "" && q.Get("region") == "" {
				q.Set("region", f.region)
			}
			pu.RawQuery = q.Encode()
			u = pu.String()
		}
		urls[i] = u
	}
	return urls, nil
}

// apply opens the express bucket into cfg (reads first from zone's) and, with
// --express-notify-queue, starts the notifier. It returns what to close after the node (nil
// without --express-buckets): the notifier's last send, then the bucket.
func (f *expressFlags) apply(ctx context.Context, cfg *node.Config, zone string, log *slog.Logger) (objstore.Bucket, error) {
	if f.buckets == "" {
		if f.queue != "" {
			return nil, fmt.Errorf("--express-notify-queue needs --express-buckets")
		}
		return nil, nil
	}
	urls, err := f.bucketURLs()
	if err != nil {
		return nil, err
	}
	zones := strings.Split(f.zones, ",")
	local := zone
	if !contains(zones, zone) {
		if zone != "" {
			log.Warn("--zone is none of --express-zones: express reads try the first zone first", "zone", zone, "express_zones", f.zones)
		}
		local = ""
	}
	e, err := objstore.OpenExpress(ctx, urls, zones, local)
	if err != nil {
		return nil, fmt.Errorf("--express-buckets: %w", err)
	}
	cfg.ExpressBucket, cfg.ExpressFlushInterval = e, f.flush
	if f.queue == "" {
		return e, nil
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("--express-notify-queue: aws config: %w", err)
	}
	client := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		if f.queueEndpoint != "" {
			o.BaseEndpoint = aws.String(f.queueEndpoint)
		}
	})
	q := &node.ExpressQueue{Client: client, QueueURL: f.queue, Bucket: "loam-express", Region: awsCfg.Region, Delay: f.delay, Logger: log}
	if f.delay < 0 || f.delay > 15*time.Minute {
		e.Close()
		return nil, fmt.Errorf("--express-notify-delay %v: want 0 to 15m (SQS DelaySeconds)", f.delay)
	}
	cfg.ExpressOffload = q
	// The queue outlives the signal: the node's drain commits more express objects after
	// it, and Close (after the node's) sends them before closing the bucket.
	qctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); q.Run(qctx) }()
	return &queueCloser{Bucket: e, stop: func() { cancel(); <-done }}, nil
}

// queueCloser closes the express bucket after the notifier has sent what it holds.
type queueCloser struct {
	objstore.Bucket
	stop func()
}

func (c *queueCloser) Close() error {
	c.stop()
	return c.Bucket.Close()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
