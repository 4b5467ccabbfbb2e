package lognodecmd

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/loamhq/loam/lognode-svc/auth"
)

// authFlags are the API key flags of a log node. A node checks keys unless started with
// --insecure-no-auth (a testing aid): it stores LOAM_ADMIN_KEY as an admin key when set,
// else, when the metastore holds no live admin key, creates one and prints it once.
type authFlags struct {
	insecure bool
	ttl      time.Duration
}

func (f *authFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.insecure, "insecure-no-auth", false, "testing aid: serve without API keys (anyone reaching the node may do anything)")
	fs.DurationVar(&f.ttl, "key-cache-ttl", 2*time.Second, "how long an API key lookup is trusted: a revoked key stops working within it")
}

// setup returns the node's Authenticator (nil with --insecure-no-auth), bootstrapping the
// admin key.
func (f *authFlags) setup(ctx context.Context, mc auth.Keys, log *slog.Logger) (*auth.Authenticator, error) {
	if f.insecure {
		log.Warn("serving without API keys (--insecure-no-auth)")
		return nil, nil
	}
	if f.ttl <= 0 || f.ttl > time.Minute {
		return nil, fmt.Errorf("--key-cache-ttl %s: want more than 0 and at most 1m", f.ttl)
	}
	if key := os.Getenv("LOAM_ADMIN_KEY"); key != "" {
		if err := auth.Bootstrap(ctx, mc, key); err != nil {
			return nil, fmt.Errorf("LOAM_ADMIN_KEY: %w", err)
		}
	} else {
		key, err := auth.BootstrapNew(ctx, mc)
		if err != nil {
			return nil, err
		}
		if key != "" {
			fmt.Fprintf(os.Stderr, "bootstrap admin key (shown once; store it, e.g. as LOAM_ADMIN_KEY): %s\n", key)
		}
	}
	return auth.New(mc, auth.Options{TTL: f.ttl}), nil
}
