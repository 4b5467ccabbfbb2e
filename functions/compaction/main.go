// Command compaction is the compaction function: a schedule fires shared/compaction's sweep
// over the streams with cleanup_policy=compact. Environment: see functions/internal/fnenv
// (the coordination table keeps each partition's cleaned point), plus
// LOAM_TOMBSTONE_RETENTION (default 24h), LOAM_SEGMENT_TARGET_BYTES (default 128MiB) and
// LOAM_COMPACTION_KEYMAP_BYTES (the key map of one pass, default 64MiB), and the namespace
// key variables of fnenv.LoadKeys (LOAM_KMS, ...: keyed namespaces' segments).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/loamhq/loam/functions/internal/fnenv"
	"github.com/loamhq/loam/shared/compaction"
)

func main() {
	env := fnenv.Must(fnenv.Load(context.Background(), true))
	keys := fnenv.Must(env.LoadKeys(context.Background()))
	c := fnenv.Must(compaction.New(compaction.Config{
		Keys:               keys.Catalog,
		SSEKMS:             keys.SSEKMS,
		PageSize:           keys.PageSize,
		Bucket:             env.Bucket,
		Meta:               env.Meta,
		Coord:              env.Coord,
		TombstoneRetention: fnenv.Must(fnenv.Duration("LOAM_TOMBSTONE_RETENTION", 0)),
		TargetBytes:        fnenv.Must(fnenv.Bytes("LOAM_SEGMENT_TARGET_BYTES", 0)),
		KeyMapBytes:        fnenv.Must(fnenv.Bytes("LOAM_COMPACTION_KEYMAP_BYTES", 0)),
		Logger:             env.Logger,
	}))
	lambda.Start(c.Handler().Invoke)
}
