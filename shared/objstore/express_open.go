package objstore

import (
	"context"
	"fmt"
)

// OpenExpress opens the express class's bucket: three zonal buckets by URL (as
// Open takes them: s3://NAME?endpoint=..., file:///DIR or a directory) in zones
// named zones (default zone-a, zone-b, zone-c), reads trying local first (default: the first
// zone).
func OpenExpress(ctx context.Context, urls, zones []string, local string) (*Express, error) {
	if len(urls) != 3 {
		return nil, fmt.Errorf("objstore: express: %d buckets given, want 3 (one per zone)", len(urls))
	}
	if len(zones) == 0 {
		zones = []string{"zone-a", "zone-b", "zone-c"}
	}
	if len(zones) != 3 {
		return nil, fmt.Errorf("objstore: express: %d zones given, want 3 (one per bucket)", len(zones))
	}
	zs := make([]Zone, 3)
	for i, u := range urls {
		b, err := Open(ctx, u)
		if err != nil {
			for _, z := range zs[:i] {
				z.Bucket.Close()
			}
			return nil, fmt.Errorf("objstore: express: bucket of zone %s: %w", zones[i], err)
		}
		zs[i] = Zone{Name: zones[i], Bucket: b}
	}
	e, err := NewExpress(ExpressConfig{Zones: zs, Local: local})
	if err != nil {
		for _, z := range zs {
			z.Bucket.Close()
		}
		return nil, fmt.Errorf("objstore: express: %w", err)
	}
	return e, nil
}
