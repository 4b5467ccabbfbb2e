package devcluster

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/loamhq/loam/shared/objstore"
)

// ExpressConfig is the express class of the embedded cluster (docs/express.md): three
// zonal buckets, by default three directories under the data directory.
type ExpressConfig struct {
	Disabled bool
	// Buckets are the three zonal buckets as objstore.Open takes them (s3:// URLs get
	// Config.S3Endpoint and S3Region when they name none); empty: Dirs.
	Buckets []string
	// Dirs are three directories; empty: <data-dir>/express/zone-a, zone-b, zone-c.
	Dirs []string
}

// ExpressZones are the zones of the express buckets in loam dev.
var ExpressZones = []string{"zone-a", "zone-b", "zone-c"}

// ExpressURLs are the bucket URLs of cfg (lognode-svc --express-buckets): Buckets with
// the S3 endpoint and region, else Dirs, else three directories under dataDir.
func ExpressURLs(cfg ExpressConfig, endpoint, region, dataDir string) ([]string, error) {
	if len(cfg.Buckets) > 0 && len(cfg.Dirs) > 0 {
		return nil, fmt.Errorf("devcluster: express: buckets and directories both given: pick one")
	}
	var urls []string
	switch {
	case len(cfg.Buckets) > 0:
		for _, b := range cfg.Buckets {
			if !strings.HasPrefix(b, "s3://") || strings.Contains(b, "?") {
				return nil, fmt.Errorf("devcluster: express bucket %q: want s3://NAME", b)
			}
			q := url.Values{"create_bucket": {"true"}}
			if endpoint != "" {
				q.Set("endpoint", endpoint)
				q.Set("path_style", "true")
			}
			if region != "" {
				q.Set("region", region)
			}
			urls = append(urls, b+"?"+q.Encode())
		}
	case len(cfg.Dirs) > 0:
		for _, d := range cfg.Dirs {
			abs, err := filepath.Abs(d)
			if err != nil {
				return nil, fmt.Errorf("devcluster: express directory %q: %w", d, err)
			}
			urls = append(urls, abs)
		}
	default:
		for _, z := range ExpressZones {
			abs, err := filepath.Abs(filepath.Join(dataDir, "express", z))
			if err != nil {
				return nil, err
			}
			urls = append(urls, abs)
		}
	}
	if len(urls) != 3 {
		return nil, fmt.Errorf("devcluster: express: %d buckets, want 3 (one per zone)", len(urls))
	}
	return urls, nil
}

// openExpress opens the express bucket (nil when disabled); a latency model other than
// none delays its zones by S3 Express One Zone's.
func (c *Cluster) openExpress(ctx context.Context, dir string) (*objstore.Express, error) {
	if c.cfg.Express.Disabled {
		return nil, nil
	}
	urls, err := ExpressURLs(c.cfg.Express, c.cfg.S3Endpoint, c.cfg.S3Region, dir)
	if err != nil {
		return nil, err
	}
	e, err := objstore.OpenExpress(ctx, urls, ExpressZones, ExpressZones[0])
	if err != nil {
		return nil, fmt.Errorf("devcluster: %w", err)
	}
	if m := c.cfg.ObjstoreLatency; m != "" && m != "none" {
		// Re-wrap the zones with the S3 Express model.
		zs := e.Zones()
		zones := make([]objstore.Zone, 3)
		for i, z := range zs {
			zones[i] = objstore.Zone{Name: z.Name, Bucket: objstore.WithLatencyModel(z.Bucket, objstore.S3Express, uint64(2+i))}
		}
		if e, err = objstore.NewExpress(objstore.ExpressConfig{Zones: zones, Local: ExpressZones[0], Logger: c.cfg.Logger}); err != nil {
			return nil, fmt.Errorf("devcluster: %w", err)
		}
	}
	return e, nil
}

// expressDue reports whether the watcher should notify the segmenter of key now: an express
// WAL object once it is the segmenter's express age old, so one segment takes that long of
// a partition's express objects (the delayed notification a log node sends in AWS).
func expressDue(o objstore.ObjectInfo, now time.Time, age time.Duration) bool {
	return !objstore.IsExpressKey(o.Key) || now.Sub(o.LastModified) >= age
}

// expressBucket is e as a Bucket, nil when e is.
func expressBucket(e *objstore.Express) objstore.Bucket {
	if e == nil {
		return nil
	}
	return e
}

// expressBanner describes the express class's buckets for the banner ("" when not served).
func (c *Cluster) expressBanner() string {
	if c.cfg.Express.Disabled {
		return ""
	}
	urls, err := ExpressURLs(c.cfg.Express, c.cfg.S3Endpoint, c.cfg.S3Region, c.cfg.DataDir)
	if err != nil {
		return ""
	}
	for i, u := range urls {
		urls[i], _, _ = strings.Cut(u, "?")
	}
	return fmt.Sprintf("5 ms flush, two of three zonal buckets: %s (streams: \"class\": \"express\")", strings.Join(urls, ", "))
}
