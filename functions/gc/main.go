// Command gc is the GC function: a schedule fires shared/gc, which deletes retired objects
// after LOAM_GC_GRACE (default 10m; express WAL objects after LOAM_GC_EXPRESS_GRACE, default
// 1m), and orphans older than LOAM_GC_ORPHAN_AGE (default: the
// writer budget + the segmenter lease TTL) once they stayed orphans for the grace period.
// The orphan sweep runs at most every LOAM_GC_ORPHAN_INTERVAL (default 1h) across
// invocations: its clock is in the coordination store. Environment: see
// functions/internal/fnenv.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/loamhq/loam/functions/internal/fnenv"
	"github.com/loamhq/loam/shared/gc"
)

func main() {
	env := fnenv.Must(fnenv.Load(context.Background(), true))
	g := fnenv.Must(gc.New(gc.Config{
		Bucket:         env.Bucket,
		Meta:           env.Meta,
		Coord:          env.Coord,
		Grace:          fnenv.Must(fnenv.Duration("LOAM_GC_GRACE", 0)),
		ExpressGrace:   fnenv.Must(fnenv.Duration("LOAM_GC_EXPRESS_GRACE", 0)),
		OrphanAge:      fnenv.Must(fnenv.Duration("LOAM_GC_ORPHAN_AGE", 0)),
		OrphanInterval: fnenv.Must(fnenv.Duration("LOAM_GC_ORPHAN_INTERVAL", 0)),
		Logger:         env.Logger,
	}))
	lambda.Start(g.Handler().Invoke)
}
