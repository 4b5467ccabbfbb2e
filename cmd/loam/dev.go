package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/loamhq/loam/local/devcluster"
)

const devUsage = `usage: loam dev [flags]

Runs the embedded cluster: a single-voter Raft sequencer and a log node in one process,
on a filesystem bucket under --data-dir (or any S3 API with --bucket s3://NAME). A restart
on the same data directory keeps all data. Stop it with Ctrl-C (SIGINT) or SIGTERM.

Flags:
`

// runDev is `loam dev`.
func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), devUsage)
		fs.PrintDefaults()
	}
	var cfg devcluster.Config
	host := fs.String("host", envOr("LOAM_HOST", "127.0.0.1"), "address every port binds to (env LOAM_HOST)")
	fs.StringVar(&cfg.DataDir, "data-dir", envOr("LOAM_DATA_DIR", "loam-data"), "directory for the bucket and the sequencer's state (env LOAM_DATA_DIR)")
	fs.StringVar(&cfg.Bucket, "bucket", os.Getenv("LOAM_BUCKET"), "s3://NAME[/PREFIX] to keep data on an S3 API instead of the filesystem (env LOAM_BUCKET)")
	fs.StringVar(&cfg.S3Endpoint, "s3-endpoint", envOr("LOAM_S3_ENDPOINT", os.Getenv("AWS_ENDPOINT_URL")), "S3 API endpoint URL, e.g. http://127.0.0.1:7000 (env LOAM_S3_ENDPOINT or AWS_ENDPOINT_URL); credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
	fs.StringVar(&cfg.S3Region, "s3-region", os.Getenv("AWS_REGION"), "S3 region (env AWS_REGION; default us-east-1)")
	httpPort := fs.Int("http-port", 8080, "native HTTP API port")
	rpcPort := fs.Int("sequencer-port", 7070, "sequencer gRPC port")
	raftPort := fs.Int("raft-port", 7071, "sequencer Raft port")
	fs.DurationVar(&cfg.FlushInterval, "flush-interval", 250*time.Millisecond, "standard-class WAL flush interval")
	fs.StringVar(&cfg.NodeID, "node-id", "dev-1", "log node id (names its WAL objects)")
	level := fs.String("log-level", envOr("LOAM_LOG_LEVEL", "info"), "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("dev: unexpected argument %q", fs.Arg(0))}
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return usageError{fmt.Errorf("dev: --log-level %q: %w", *level, err)}
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	cfg.HTTPAddr = fmt.Sprintf("%s:%d", *host, *httpPort)
	cfg.SequencerRPC = fmt.Sprintf("%s:%d", *host, *rpcPort)
	cfg.SequencerRaft = fmt.Sprintf("%s:%d", *host, *raftPort)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := devcluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	c.PrintBanner(os.Stdout)
	<-ctx.Done()
	fmt.Fprintln(os.Stdout, "loam dev: stopping (flushing buffered writes)")
	sctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	return c.Close(sctx)
}

func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}
