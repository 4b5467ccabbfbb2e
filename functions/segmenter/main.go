// Command segmenter is the segmenter function: WAL-object-created notifications (S3 events,
// directly or through SQS) and a schedule fire shared/segmenter. Environment: see
// functions/internal/fnenv, plus LOAM_SEGMENT_TARGET_BYTES (default 128MiB),
// LOAM_SEGMENT_MAX_AGE (default 10m) and LOAM_SEGMENT_EXPRESS_AGE (default 2s: express WAL
// objects, whose notifications the log nodes send, are segmented once this old), and the
// namespace key variables of fnenv.LoadKeys (LOAM_KMS, ...: keyed namespaces' segments).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/loamhq/loam/functions/internal/fnenv"
	"github.com/loamhq/loam/shared/segmenter"
)

func main() {
	env := fnenv.Must(fnenv.Load(context.Background(), true))
	keys := fnenv.Must(env.LoadKeys(context.Background()))
	s := fnenv.Must(segmenter.New(segmenter.Config{
		Keys:        keys.Catalog,
		SSEKMS:      keys.SSEKMS,
		PageSize:    keys.PageSize,
		Bucket:      env.Bucket,
		Meta:        env.Meta,
		Coord:       env.Coord,
		KeyPrefix:   env.KeyPrefix,
		TargetBytes: fnenv.Must(fnenv.Bytes("LOAM_SEGMENT_TARGET_BYTES", 0)),
		MaxAge:      fnenv.Must(fnenv.Duration("LOAM_SEGMENT_MAX_AGE", 0)),
		ExpressAge:  fnenv.Must(fnenv.Duration("LOAM_SEGMENT_EXPRESS_AGE", 0)),
		Logger:      env.Logger,
	}))
	lambda.Start(s.Handler().Invoke)
}
