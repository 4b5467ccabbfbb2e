package sequencercmd

import (
	"context"
	"flag"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/coord"
)

func TestPlacementFlags(t *testing.T) {
	ctx := context.Background()
	var f placementFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	var cfg server.Config
	if err := f.apply(ctx, &cfg); err != nil || cfg.Placement.Nodes != nil {
		t.Fatalf("without --coord: %+v %v", cfg.Placement, err)
	}
	if err := fs.Parse([]string{"--coord", "ftp://x"}); err != nil {
		t.Fatal(err)
	}
	if err := f.apply(ctx, &cfg); err == nil || !strings.Contains(err.Error(), "want dynamodb://TABLE") {
		t.Fatalf("bad --coord: %v", err)
	}
	path := filepath.Join(t.TempDir(), "coord.db")
	if err := fs.Parse([]string{"--coord", "bolt://" + path, "--journal-replace-after", "90s", "--placement-interval", "500ms"}); err != nil {
		t.Fatal(err)
	}
	if err := f.apply(ctx, &cfg); err != nil {
		t.Fatal(err)
	}
	defer f.close()
	if cfg.Placement.ReplaceAfter != 90*time.Second || cfg.Placement.Interval != 500*time.Millisecond || cfg.Placement.Nodes == nil {
		t.Fatalf("placement config: %+v", cfg.Placement)
	}
	// The controller sees what the log nodes heartbeat into the registry.
	reg := coord.Registry{Store: f.store}
	if err := reg.Heartbeat(ctx, coord.Node{ID: "n1", Zone: "az-a", HTTPAddr: "h:8080", JournalAddr: "h:7101"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := cfg.Placement.Nodes(ctx)
	if want := []server.LiveNode{{ID: "n1", Zone: "az-a", JournalAddr: "h:7101"}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("live nodes %+v %v, want %+v", got, err, want)
	}
}
