package lognodecmd

import (
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/node"
)

func TestOffloadFlags(t *testing.T) {
	f := offloadFlags{bytes: 8 << 20, age: 5 * time.Second}
	var cfg node.Config
	if err := f.apply(&cfg); err != nil || cfg.Quorum.OffloadBytes != 8<<20 || cfg.Quorum.OffloadAge != 5*time.Second || cfg.Quorum.NoOffload {
		t.Fatalf("%+v %v", cfg.Quorum, err)
	}
	for _, tc := range []struct {
		f   offloadFlags
		msg string
	}{
		{offloadFlags{bytes: 1000, age: time.Second}, "--journal-offload-bytes 1000"},
		{offloadFlags{bytes: 2 << 30, age: time.Second}, "--journal-offload-bytes"},
		{offloadFlags{bytes: 8 << 20, age: time.Millisecond}, "--journal-offload-age 1ms"},
	} {
		if err := tc.f.apply(&node.Config{}); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.msg)
		}
	}
}
