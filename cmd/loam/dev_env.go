package main

import (
	"flag"

	"github.com/loamhq/loam/shared/envflag"
)

// devVars are the environment variables of loam dev's flags not named by envflag's rule
// (every other flag --x-y is also set by LOAM_X_Y; docs/configuration.md). The AWS SDK's
// own names stay aliases.
var devVars = envflag.Vars{
	"s3-endpoint": {"LOAM_S3_ENDPOINT", "AWS_ENDPOINT_URL"},
	"s3-region":   {"LOAM_S3_REGION", "AWS_REGION"},
	"aws":         {"LOAM_AWS_ENDPOINT"},
	"node-id":     {"LOAM_NODE_ID"},
}

// inspectDevFlags, when set, receives loam dev's flag set before it parses anything, and
// runDev returns: the configuration table's test reads the real flags this way.
var inspectDevFlags func(*flag.FlagSet)
