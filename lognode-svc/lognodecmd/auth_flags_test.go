package lognodecmd

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/shared/meta/metafake"
)

func parseAuthFlags(t *testing.T, args ...string) *authFlags {
	t.Helper()
	var f authFlags
	fs := flag.NewFlagSet("lognode-svc", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &f
}

func TestAuthFlags(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Keys are checked unless --insecure-no-auth.
	if a, err := parseAuthFlags(t, "--insecure-no-auth").setup(ctx, metafake.New(), log); a != nil || err != nil {
		t.Fatalf("--insecure-no-auth: %v, %v", a, err)
	}
	m := metafake.New()
	a, err := parseAuthFlags(t).setup(ctx, m, log)
	if a == nil || err != nil {
		t.Fatalf("default: %v, %v", a, err)
	}
	keys, _ := m.ListKeys(ctx)
	if len(keys) != 1 || !keys[0].Admin {
		t.Fatalf("no bootstrap admin key stored: %+v", keys)
	}
	// LOAM_ADMIN_KEY: stored as given, and a malformed one refuses the start.
	token, _, _ := auth.NewKey(true, "", "")
	t.Setenv("LOAM_ADMIN_KEY", token)
	m = metafake.New()
	a, err = parseAuthFlags(t).setup(ctx, m, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Check(ctx, "Bearer "+token, auth.Scope{Admin: true}); err != nil {
		t.Fatalf("LOAM_ADMIN_KEY not an admin key: %v", err)
	}
	t.Setenv("LOAM_ADMIN_KEY", "hunter2")
	if _, err := parseAuthFlags(t).setup(ctx, metafake.New(), log); err == nil || !strings.Contains(err.Error(), "LOAM_ADMIN_KEY") {
		t.Fatalf("malformed LOAM_ADMIN_KEY: %v", err)
	}
	if _, err := parseAuthFlags(t, "--key-cache-ttl", "2m").setup(ctx, metafake.New(), log); err == nil {
		t.Fatal("--key-cache-ttl 2m accepted")
	}
}
