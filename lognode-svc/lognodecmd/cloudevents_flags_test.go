package lognodecmd

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// The dedup window takes a duration, as loam dev's flag of the same name (and variable)
// does, and a bare number of seconds, its first form.
func TestCloudEventsWindowFormats(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want time.Duration
		bad  string
	}{
		{"", time.Hour, ""},
		{"7200", 2 * time.Hour, ""},
		{"2h", 2 * time.Hour, ""},
		{"90s", 90 * time.Second, ""},
		{"86401", 0, "more than 24h"},
		{"25h", 0, "want 1s to 24h"},
		{"0", 0, "want 1s to 24h"},
		{"soon", 0, "want a duration"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f ceFlags
		f.register(fs)
		var args []string
		if tc.arg != "" {
			args = []string{"--cloudevents-dedup-window", tc.arg}
		}
		err := fs.Parse(args)
		if err == nil {
			var cfg struct{ Window time.Duration }
			c, cerr := f.config()
			cfg.Window, err = c.Window, cerr
			if err == nil && cfg.Window != tc.want {
				t.Errorf("%q: window %v, want %v", tc.arg, cfg.Window, tc.want)
			}
		}
		if tc.bad == "" && err != nil {
			t.Errorf("%q: %v", tc.arg, err)
		}
		if tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("%q: error %v, want %q", tc.arg, err, tc.bad)
		}
	}
}

// FuzzCloudEventsWindow: any value either sets a window the ledger accepts (1 s to 24 h) or
// is refused by Set or by config with an error; none panics.
func FuzzCloudEventsWindow(f *testing.F) {
	for _, s := range []string{"3600", "1h", "90s", "0", "-5", "86400", "86401", "25h", "1.5h", "9223372036854775807", "", "1e3", " 60"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var f ceFlags
		f.register(flag.NewFlagSet("t", flag.ContinueOnError))
		if err := f.window.Set(v); err != nil {
			return
		}
		c, err := f.config()
		if err != nil {
			return
		}
		if c.Window < time.Second || c.Window > 24*time.Hour {
			t.Fatalf("%q: window %v accepted", v, c.Window)
		}
	})
}
