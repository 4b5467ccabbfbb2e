package fnenv

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/loamhq/loam/shared/objstore"
)

// expressBucket is base routed with the express bucket LOAM_EXPRESS_BUCKETS names (zones
// LOAM_EXPRESS_ZONES), or base when it is unset.
func expressBucket(ctx context.Context, base objstore.Bucket) (objstore.Bucket, error) {
	v := os.Getenv("LOAM_EXPRESS_BUCKETS")
	if v == "" {
		return base, nil
	}
	urls := splitList(v)
	var zones []string
	if z := os.Getenv("LOAM_EXPRESS_ZONES"); z != "" {
		zones = splitList(z)
	}
	e, err := objstore.OpenExpress(ctx, urls, zones, "")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("fnenv: LOAM_EXPRESS_BUCKETS: %w", err), base.Close())
	}
	return objstore.NewRouted(base, e)
}
