package lognodecmd

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
)

func TestExpressFlags(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	parse := func(zone string, args ...string) (node.Config, error) {
		var f expressFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			return node.Config{}, err
		}
		var cfg node.Config
		b, err := f.apply(context.Background(), &cfg, zone, log)
		if b != nil {
			t.Cleanup(func() { b.Close() })
		}
		return cfg, err
	}
	cfg, err := parse("z1")
	if err != nil || cfg.ExpressBucket != nil {
		t.Fatalf("no flags: %v %v", cfg.ExpressBucket, err)
	}
	d := t.TempDir()
	dirs := filepath.Join(d, "a") + "," + filepath.Join(d, "b") + "," + filepath.Join(d, "c")
	cfg, err = parse("z2", "--express-buckets", dirs, "--express-zones", "z1,z2,z3", "--express-flush-interval", "7ms")
	if err != nil || cfg.ExpressBucket == nil || cfg.ExpressFlushInterval.Milliseconds() != 7 {
		t.Fatalf("three directories: %+v %v", cfg, err)
	}
	ctx := context.Background()
	if err := cfg.ExpressBucket.Put(ctx, "wal/express/n/x.wal", []byte("x")); err != nil {
		t.Fatal(err)
	}
	e := cfg.ExpressBucket.(*objstore.Express)
	if zs := e.Zones(); zs[1].Name != "z2" {
		t.Fatalf("zones %v", zs)
	}
	t.Setenv("AWS_REGION", "us-east-1")
	qcfg, err := parse("z1", "--express-buckets", dirs, "--express-zones", "z1,z2,z3", "--express-notify-queue", "http://127.0.0.1:1/000000000000/seg",
		"--express-notify-endpoint", "http://127.0.0.1:1")
	if err != nil || qcfg.ExpressOffload == nil {
		t.Fatalf("--express-notify-queue: offload %v, %v", qcfg.ExpressOffload, err)
	}
	if _, err := parse("z1", "--express-buckets", dirs, "--express-zones", "z1,z2,z3", "--express-notify-queue", "http://q", "--express-notify-delay", "16m"); err == nil {
		t.Error("--express-notify-delay 16m: no error")
	}
	for _, bad := range [][]string{
		{"--express-buckets", "a,b"},
		{"--express-buckets", dirs, "--express-zones", "z1,z2"},
		{"--express-buckets", "a,,c"},
		{"--express-notify-queue", "https://sqs/q"},
		{"--express-buckets", dirs, "--express-zones", "z1,z1,z3"},
	} {
		if _, err := parse("z1", bad...); err == nil || !strings.Contains(err.Error(), "express") {
			t.Errorf("%q: %v, want an error naming the flag", bad, err)
		}
	}
	var f expressFlags
	f.buckets, f.endpoint, f.region = "s3://a,s3://b?region=r2,file:///c", "http://127.0.0.1:9000", "r1"
	urls, err := f.bucketURLs()
	if err != nil || urls[0] != "s3://a?endpoint=http%3A%2F%2F127.0.0.1%3A9000&path_style=true&region=r1" ||
		urls[1] != "s3://b?endpoint=http%3A%2F%2F127.0.0.1%3A9000&path_style=true&region=r2" || urls[2] != "file:///c" {
		t.Fatalf("bucketURLs = %q, %v", urls, err)
	}
}
