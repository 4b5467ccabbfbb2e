package lognodecmd

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/loamhq/loam/shared/objstore"
)

// faultFlags is the fault-injection flag of a log node, a testing aid: --fault-profile FILE
// wraps the node's bucket in a fault-injecting bucket (docs/faults.md) whose counters are
// on /metrics (loam_objstore_faults_injected_total), and re-reads FILE every second, so a
// test can change the faults while the node runs.
type faultFlags struct {
	file string
}

func (f *faultFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.file, "fault-profile", os.Getenv("LOAM_FAULT_PROFILE"), "testing aid: inject the object-store faults of this JSON profile (docs/faults.md) into every bucket call; re-read every second (env LOAM_FAULT_PROFILE)")
}

// wrap returns b unchanged without --fault-profile, else b in a FaultBucket (also
// returned, for its metrics) watched until ctx ends.
func (f *faultFlags) wrap(ctx context.Context, b objstore.Bucket, log *slog.Logger) (objstore.Bucket, *objstore.FaultBucket, error) {
	if f.file == "" {
		return b, nil, nil
	}
	data, err := os.ReadFile(f.file)
	if err != nil {
		return nil, nil, fmt.Errorf("--fault-profile: %w", err)
	}
	p, err := objstore.ParseFaultProfile(data)
	if err != nil {
		return nil, nil, fmt.Errorf("--fault-profile %s: %w", f.file, err)
	}
	fb := objstore.WithFaults(b, p)
	log.Warn("injecting object-store faults (--fault-profile, a testing aid)", "file", f.file, "rules", len(p.Rules))
	go objstore.WatchFaultProfile(ctx, fb, f.file, data, time.Second, log)
	return fb, fb, nil
}
