package lognodecmd

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/meta"
)

// ceFlags are the CloudEvents dedup ledger flags of a log node.
type ceFlags struct {
	window     seconds
	maxEntries int64
}

// seconds is a duration flag that also takes a bare number of seconds (the flag's first
// form), so LOAM_CLOUDEVENTS_DEDUP_WINDOW means the same to a log node and to loam dev.
type seconds time.Duration

func (s *seconds) String() string { return time.Duration(*s).String() }
func (s *seconds) Get() any       { return time.Duration(*s) }
func (s *seconds) Set(v string) error {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n > int64(meta.MaxEventWindow/time.Second) {
			return fmt.Errorf("%d seconds: more than %v", n, meta.MaxEventWindow)
		}
		*s = seconds(time.Duration(n) * time.Second)
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q: want a duration (1h, 90s) or a number of seconds", v)
	}
	*s = seconds(d)
	return nil
}

func (f *ceFlags) register(fs *flag.FlagSet) {
	f.window = seconds(meta.DefaultEventWindow)
	fs.Var(&f.window, "cloudevents-dedup-window",
		"how long a CloudEvent's source + id is remembered after it was appended: a retry within it never appends again; a duration (1h) or a number of seconds (3600), at most 24h")
	fs.Int64Var(&f.maxEntries, "cloudevents-ledger-max", meta.DefaultMaxEventEntries,
		"live CloudEvents dedup ledger entries a namespace may hold (about 150 bytes each in the sequencer); over it, ingest answers 429 dedup_ledger_full")
}

// config returns the ledger settings, or an error naming the bad flag.
func (f *ceFlags) config() (httpapi.CloudEventsConfig, error) {
	if w := time.Duration(f.window); w < time.Second || w > meta.MaxEventWindow {
		return httpapi.CloudEventsConfig{}, fmt.Errorf("--cloudevents-dedup-window %v: want 1s to %v", w, meta.MaxEventWindow)
	}
	if f.maxEntries <= 0 {
		return httpapi.CloudEventsConfig{}, fmt.Errorf("--cloudevents-ledger-max %d: want a positive number of entries", f.maxEntries)
	}
	return httpapi.CloudEventsConfig{Window: time.Duration(f.window), MaxEntries: f.maxEntries}, nil
}
