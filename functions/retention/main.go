// Command retention is the retention function: a schedule fires shared/retention's sweep.
// Environment: see functions/internal/fnenv.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/loamhq/loam/functions/internal/fnenv"
	"github.com/loamhq/loam/shared/retention"
)

func main() {
	env := fnenv.Must(fnenv.Load(context.Background(), false))
	r := fnenv.Must(retention.New(retention.Config{Meta: env.Meta, Logger: env.Logger}))
	lambda.Start(r.Handler().Invoke)
}
