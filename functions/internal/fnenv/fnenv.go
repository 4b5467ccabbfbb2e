// Package fnenv reads the configuration every Loam function takes from its environment and
// opens what it names. The functions' mains (functions/<name>/main.go) only wire this to
// their handler and lambda.Start.
//
// Environment:
//
//	LOAM_BUCKET        the data bucket: s3://NAME[/PREFIX][?endpoint=...&region=...&path_style=true]
//	                   (objstore.Open), file:///dir for local runs
//	LOAM_SEQUENCER     sequencer gRPC addresses, comma-separated (host:port,...)
//	LOAM_COORD_TABLE   the coordination store's DynamoDB table (functions that need it)
//	LOAM_COORD_ENDPOINT  optional DynamoDB endpoint (LocalStack, moto); default AWS_ENDPOINT_URL
//	LOAM_EXPRESS_BUCKETS  the express class's three zonal buckets, comma-separated (objstore.Open
//	                   URLs), when it is served: WAL keys under wal/express/ are read and deleted
//	                   there (objstore.Routed); LOAM_EXPRESS_ZONES their zones (default
//	                   zone-a,zone-b,zone-c)
//	LOAM_LOG_LEVEL     debug | info | warn | error (default info); logs are JSON on stderr
//	LOAM_CLUSTER_CA, LOAM_CLUSTER_CERT, LOAM_CLUSTER_KEY
//	                   PEM files of the cluster identity the sequencer requires (mutual TLS;
//	                   docs/tls.md); LOAM_CLUSTER_SERVER_NAME the name its certificates carry
//	LOAM_CLUSTER_IDENTITY_SECRET  a Secrets Manager secret, JSON {"ca", "cert", "key"} (PEM),
//	                   fetched at start into /tmp when the three files above are not given
//
// Function-specific knobs are read with Duration and Bytes.
package fnenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/tlsconf"
)

// ErrEnv: a variable is missing or malformed.
var ErrEnv = errors.New("fnenv: bad environment")

// Env is what a function reaches.
type Env struct {
	Bucket objstore.Bucket
	Meta   meta.Client
	Coord  coord.Store // nil unless asked for
	// KeyPrefix is the key prefix of an s3://NAME/PREFIX bucket ("" for none): notification
	// keys carry it, the Bucket adds it itself.
	KeyPrefix string
	Logger    *slog.Logger
}

// Load opens the bucket and the sequencer client, and the coordination store when
// needCoord is set.
func Load(ctx context.Context, needCoord bool) (*Env, error) {
	env := &Env{Logger: Logger()}
	bucketURL := os.Getenv("LOAM_BUCKET")
	if bucketURL == "" {
		return nil, fmt.Errorf("%w: LOAM_BUCKET is not set", ErrEnv)
	}
	addrs := splitList(os.Getenv("LOAM_SEQUENCER"))
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: LOAM_SEQUENCER is not set", ErrEnv)
	}
	if rest, ok := strings.CutPrefix(bucketURL, "s3://"); ok {
		rest, _, _ = strings.Cut(rest, "?")
		if _, prefix, ok := strings.Cut(rest, "/"); ok {
			env.KeyPrefix = strings.Trim(prefix, "/")
		}
	}
	var err error
	if env.Bucket, err = objstore.Open(ctx, bucketURL); err != nil {
		return nil, fmt.Errorf("fnenv: LOAM_BUCKET: %w", err)
	}
	if env.Bucket, err = expressBucket(ctx, env.Bucket); err != nil {
		return nil, err
	}
	ca, cert, key, err := clusterIdentityFiles(ctx)
	if err != nil {
		return nil, err
	}
	id, err := tlsconf.ClusterClient(ca, cert, key, os.Getenv("LOAM_CLUSTER_SERVER_NAME"))
	if err != nil {
		return nil, fmt.Errorf("fnenv: LOAM_CLUSTER_*: %w", err)
	}
	var mopts []metagrpc.Option
	if id != nil {
		mopts = append(mopts, metagrpc.WithTransportCredentials(id.ClientCredentials()))
	}
	if env.Meta, err = metagrpc.Dial(ctx, addrs, mopts...); err != nil {
		return nil, fmt.Errorf("fnenv: LOAM_SEQUENCER: %w", err)
	}
	if needCoord {
		table := os.Getenv("LOAM_COORD_TABLE")
		if table == "" {
			return nil, fmt.Errorf("%w: LOAM_COORD_TABLE is not set", ErrEnv)
		}
		if env.Coord, err = coord.NewDynamo(ctx, coord.DynamoConfig{Table: table, Endpoint: os.Getenv("LOAM_COORD_ENDPOINT")}); err != nil {
			return nil, fmt.Errorf("fnenv: LOAM_COORD_TABLE: %w", err)
		}
	}
	return env, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Logger is a JSON logger on stderr at LOAM_LOG_LEVEL.
func Logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(os.Getenv("LOAM_LOG_LEVEL"))); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// Duration reads a Go duration ("90s", "10m") from name; unset is def (0: the handler's
// default).
func Duration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: %s=%q is not a duration", ErrEnv, name, v)
	}
	return d, nil
}

// Bytes reads a byte count from name: an integer with an optional KiB, MiB or GiB suffix.
// Unset is def.
func Bytes(name string, def int64) (int64, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := ParseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrEnv, name, err)
	}
	return n, nil
}

// ParseBytes parses "134217728", "128MiB", "64 KiB", "1GiB" (also KB/MB/GB as powers of 1024).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a byte count", s)
	}
	return n * mult, nil
}

// Must ends the process when err is set (a function that cannot start logs why; Lambda
// reports an init error).
func Must[T any](v T, err error) T {
	if err != nil {
		Logger().Error("function cannot start", "err", err)
		os.Exit(1)
	}
	return v
}
