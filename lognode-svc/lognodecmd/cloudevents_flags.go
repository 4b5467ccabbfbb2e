package lognodecmd

import (
	"flag"
	"fmt"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/meta"
)

// ceFlags are the CloudEvents dedup ledger flags of a log node.
type ceFlags struct {
	windowS    int64
	maxEntries int64
}

func (f *ceFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&f.windowS, "cloudevents-dedup-window", int64(meta.DefaultEventWindow/time.Second),
		"seconds a CloudEvent's source + id is remembered after it was appended: a retry within it never appends again (at most 86400)")
	fs.Int64Var(&f.maxEntries, "cloudevents-ledger-max", meta.DefaultMaxEventEntries,
		"live CloudEvents dedup ledger entries a namespace may hold (about 150 bytes each in the sequencer); over it, ingest answers 429 dedup_ledger_full")
}

// config returns the ledger settings, or an error naming the bad flag.
func (f *ceFlags) config() (httpapi.CloudEventsConfig, error) {
	if f.windowS <= 0 || f.windowS > int64(meta.MaxEventWindow/time.Second) {
		return httpapi.CloudEventsConfig{}, fmt.Errorf("--cloudevents-dedup-window %d: want 1 to %d seconds", f.windowS, int64(meta.MaxEventWindow/time.Second))
	}
	if f.maxEntries <= 0 {
		return httpapi.CloudEventsConfig{}, fmt.Errorf("--cloudevents-ledger-max %d: want a positive number of entries", f.maxEntries)
	}
	return httpapi.CloudEventsConfig{Window: time.Duration(f.windowS) * time.Second, MaxEntries: f.maxEntries}, nil
}
