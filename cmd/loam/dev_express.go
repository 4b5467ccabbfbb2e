package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/loamhq/loam/local/devcluster"
)

// devExpressFlags are loam dev's express-class flags: three directories (the default,
// under the data directory) or three S3 buckets on --s3-endpoint.
type devExpressFlags struct {
	dirs, buckets string
	off           bool
}

func (f *devExpressFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dirs, "express-dirs", os.Getenv("LOAM_EXPRESS_DIRS"), "the express class's three zonal buckets as directories, comma-separated (default <data-dir>/express/zone-a,zone-b,zone-c; env LOAM_EXPRESS_DIRS)")
	fs.StringVar(&f.buckets, "express-buckets", os.Getenv("LOAM_EXPRESS_BUCKETS"), "the express class's three zonal buckets as s3://A,s3://B,s3://C on --s3-endpoint (env LOAM_EXPRESS_BUCKETS)")
	fs.BoolVar(&f.off, "no-express", false, "serve no express class (streams of class express are refused)")
}

// apply sets cfg.Express and returns, for a supervised cluster, the log nodes' express
// settings: LOAM_EXPRESS_BUCKETS and LOAM_EXPRESS_ZONES values (nil: none).
func (f *devExpressFlags) apply(cfg *devcluster.Config) ([]string, error) {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	cfg.Express = devcluster.ExpressConfig{Disabled: f.off, Dirs: split(f.dirs), Buckets: split(f.buckets)}
	if f.off {
		if f.dirs != "" || f.buckets != "" {
			return nil, fmt.Errorf("dev: --no-express with --express-dirs or --express-buckets")
		}
		return nil, nil
	}
	urls, err := devcluster.ExpressURLs(cfg.Express, cfg.S3Endpoint, cfg.S3Region, cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("dev: --express-dirs/--express-buckets: %w", err)
	}
	return []string{strings.Join(urls, ","), strings.Join(devcluster.ExpressZones, ",")}, nil
}

// expressEnv hands a supervised cluster's log nodes their express buckets through their
// environment (lognode-svc reads LOAM_EXPRESS_BUCKETS and LOAM_EXPRESS_ZONES), so directory
// names need no quoting. loam dev's own LOAM_EXPRESS_* variables are not passed on as such
// (the children get none of loam dev's variables): these entries are what they get.
func expressEnv(v []string) []string {
	if v == nil {
		return nil
	}
	return []string{"LOAM_EXPRESS_BUCKETS=" + v[0], "LOAM_EXPRESS_ZONES=" + v[1]}
}
