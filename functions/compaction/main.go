// Command compaction is the compaction function: a schedule fires shared/compaction's sweep
// over the streams with cleanup_policy=compact. Environment: see functions/internal/fnenv,
// plus LOAM_TOMBSTONE_RETENTION (default 24h) and LOAM_SEGMENT_TARGET_BYTES (default 128MiB).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/loamhq/loam/functions/internal/fnenv"
	"github.com/loamhq/loam/shared/compaction"
)

func main() {
	env := fnenv.Must(fnenv.Load(context.Background(), false))
	c := fnenv.Must(compaction.New(compaction.Config{
		Bucket:             env.Bucket,
		Meta:               env.Meta,
		TombstoneRetention: fnenv.Must(fnenv.Duration("LOAM_TOMBSTONE_RETENTION", 0)),
		TargetBytes:        fnenv.Must(fnenv.Bytes("LOAM_SEGMENT_TARGET_BYTES", 0)),
		Logger:             env.Logger,
	}))
	lambda.Start(c.Handler().Invoke)
}
