package lognodecmd

import (
	"flag"
	"fmt"
	"time"

	"github.com/loamhq/loam/lognode-svc/node"
)

// offloadFlags are the quorum class's offload flags (docs/quorum.md): when the journal's
// leader seals a partition's range into a segment.
type offloadFlags struct {
	bytes int64
	age   time.Duration
	off   bool
}

func (f *offloadFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&f.bytes, "journal-offload-bytes", 16<<20, "the journal's leader seals a quorum partition's range into a segment in the bucket once the journal holds this many bytes of it")
	fs.DurationVar(&f.age, "journal-offload-age", 30*time.Second, "the journal's leader also seals a quorum partition's range once its oldest batch in the journal waited this long")
	fs.BoolVar(&f.off, "journal-no-offload", false, "testing aid: nothing is offloaded; the journal refuses produces once it holds its bound")
}

// apply sets cfg.Quorum's offload (after journalFlags.apply).
func (f *offloadFlags) apply(cfg *node.Config) error {
	if f.bytes < 1<<20 || f.bytes > 1<<30 {
		return fmt.Errorf("--journal-offload-bytes %d: want 1 MiB to 1 GiB", f.bytes)
	}
	if f.age < 100*time.Millisecond {
		return fmt.Errorf("--journal-offload-age %v: want at least 100ms", f.age)
	}
	cfg.Quorum.OffloadBytes, cfg.Quorum.OffloadAge, cfg.Quorum.NoOffload = f.bytes, f.age, f.off
	return nil
}
