package envflag

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func newFS() (*flag.FlagSet, *string, *time.Duration, *bool) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	id := fs.String("id", "host", "node id")
	fl := fs.Duration("flush-interval", time.Second, "flush interval")
	b := fs.Bool("insecure-no-auth", false, "no auth")
	return fs, id, fl, b
}

func TestApply(t *testing.T) {
	vars := Vars{"id": {"LOAM_NODE_ID", "OLD_NODE_ID"}}
	// Variables by the rule and by name; the command line wins.
	t.Setenv("LOAM_FLUSH_INTERVAL", "3s")
	t.Setenv("LOAM_INSECURE_NO_AUTH", "true")
	t.Setenv("OLD_NODE_ID", "old")
	fs, id, fl, b := newFS()
	if err := Parse(fs, nil, vars); err != nil {
		t.Fatal(err)
	}
	if *id != "old" || *fl != 3*time.Second || !*b {
		t.Fatalf("id %q flush %v auth %v", *id, *fl, *b)
	}
	t.Setenv("LOAM_NODE_ID", "new")
	fs, id, fl, _ = newFS()
	if err := Parse(fs, []string{"--flush-interval", "5s"}, vars); err != nil {
		t.Fatal(err)
	}
	if *id != "new" || *fl != 5*time.Second {
		t.Fatalf("id %q flush %v", *id, *fl)
	}
	// LOAM_ID is not --id's variable: it has its own name.
	t.Setenv("LOAM_NODE_ID", "")
	t.Setenv("OLD_NODE_ID", "")
	t.Setenv("LOAM_ID", "wrong")
	fs, id, _, _ = newFS()
	if err := Parse(fs, nil, vars); err != nil || *id != "host" {
		t.Fatalf("id %q, %v", *id, err)
	}
	// A bad value names the variable and the flag.
	t.Setenv("LOAM_FLUSH_INTERVAL", "soon")
	fs, _, _, _ = newFS()
	err := Parse(fs, nil, vars)
	if err == nil || !strings.Contains(err.Error(), "LOAM_FLUSH_INTERVAL") || !strings.Contains(err.Error(), "--flush-interval") {
		t.Fatalf("Parse = %v", err)
	}
}

func TestTable(t *testing.T) {
	fs, _, _, _ := newFS()
	fs.String("pipe", "", "a | b `FILE`")
	got := Table(fs, Vars{"id": {"LOAM_NODE_ID"}}, map[string]string{"id": "the host name"})
	want := "| flag | environment | default | meaning |\n|---|---|---|---|\n" +
		"| `--flush-interval` | `LOAM_FLUSH_INTERVAL` | `1s` | flush interval |\n" +
		"| `--id` | `LOAM_NODE_ID` | the host name | node id |\n" +
		"| `--insecure-no-auth` | `LOAM_INSECURE_NO_AUTH` | `false` | no auth |\n" +
		"| `--pipe` | `LOAM_PIPE` |  | a \\| b FILE |\n"
	if got != want {
		t.Fatalf("Table =\n%s\nwant\n%s", got, want)
	}
}
