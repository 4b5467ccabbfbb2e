package lognodecmd

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/objstore"
)

func TestFaultFlags(t *testing.T) {
	ctx := t.Context()
	log := slog.New(slog.DiscardHandler)
	parse := func(args ...string) *faultFlags {
		var ff faultFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		ff.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &ff
	}
	mem := objstore.NewMem()
	b, fb, err := parse().wrap(ctx, mem, log)
	if err != nil || b != objstore.Bucket(mem) || fb != nil {
		t.Fatalf("no flag: %v %v %v", b, fb, err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"rules": [{"op": "put", "fault": "slowdown", "pp": 1}]}`), 0o644)
	if _, _, err := parse("--fault-profile", bad).wrap(ctx, mem, log); err == nil || !strings.Contains(err.Error(), `unknown field "pp"`) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad profile: %v", err)
	}
	if _, _, err := parse("--fault-profile", filepath.Join(dir, "missing.json")).wrap(ctx, mem, log); err == nil || !strings.Contains(err.Error(), "--fault-profile") {
		t.Fatalf("missing profile: %v", err)
	}
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"rules": [{"op": "put", "fault": "reset"}]}`), 0o644)
	b, fb, err = parse("--fault-profile", good).wrap(ctx, mem, log)
	if err != nil || fb == nil {
		t.Fatal(err)
	}
	if err := b.Put(context.Background(), "k", nil); !errors.Is(err, objstore.ErrFaultInjected) || fb.Count("put", "reset") != 1 {
		t.Fatalf("put: %v", err)
	}
}
