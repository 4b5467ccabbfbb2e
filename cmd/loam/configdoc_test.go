package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/lognodecmd"
	"github.com/loamhq/loam/sequencer-svc/sequencercmd"
	"github.com/loamhq/loam/shared/envflag"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/configuration.md's generated tables")

const configDoc = "../../docs/configuration.md"

// cleanEnv unsets every LOAM_* and AWS_* variable for the test, so defaults are the
// built-in ones.
func cleanEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "LOAM_") || strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "") // restored after the test
			os.Unsetenv(k)
		}
	}
}

func devFlagSet(t *testing.T) *flag.FlagSet {
	var fs *flag.FlagSet
	inspectDevFlags = func(f *flag.FlagSet) { fs = f }
	defer func() { inspectDevFlags = nil }()
	if err := runDev(t.Context(), nil); err != nil || fs == nil {
		t.Fatalf("runDev: %v", err)
	}
	return fs
}

// TestConfigurationTable checks docs/configuration.md against the real flag sets of
// lognode-svc, sequencer-svc (and its subcommands) and loam dev, and its functions table
// against the variables the functions read.
func TestConfigurationTable(t *testing.T) {
	cleanEnv(t)
	host, _ := os.Hostname()
	seq := sequencercmd.Flags()
	tables := map[string]string{
		"lognode":           envflag.Table(lognodecmd.Flags(), lognodecmd.Vars, map[string]string{"id": "the host name"}),
		"sequencer":         envflag.Table(seq[""], sequencercmd.Vars, nil),
		"sequencer restore": envflag.Table(seq["restore"], sequencercmd.RestoreVars, nil),
		"sequencer members": envflag.Table(seq["members"], sequencercmd.Vars, nil),
		"dev":               envflag.Table(devFlagSet(t), devVars, nil),
	}
	if seq["remove"] == nil || envflag.Table(seq["remove"], sequencercmd.Vars, nil) != tables["sequencer members"] {
		t.Errorf("sequencer-svc remove's flags differ from members': the doc says they are the same")
	}
	for name, tab := range tables {
		if host != "" && strings.Contains(tab, "`"+host+"`") {
			t.Errorf("table %s holds this machine's name %q as a default", name, host)
		}
	}
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	want := doc
	for name, tab := range tables {
		begin, end := "<!-- BEGIN "+name+" -->\n", "<!-- END "+name+" -->"
		i, j := strings.Index(want, begin), strings.Index(want, end)
		if i < 0 || j < i {
			t.Fatalf("%s has no %q ... %q section", configDoc, begin, end)
		}
		want = want[:i+len(begin)] + tab + want[j:]
	}
	if want != doc {
		if *updateDocs {
			if err := os.WriteFile(configDoc, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("%s is stale: run go test ./cmd/loam -run TestConfigurationTable -update\n%s", configDoc, firstDiff(doc, want))
	}

	// The functions: the table names exactly the variables their code reads.
	i := strings.Index(doc, "<!-- BEGIN functions -->")
	j := strings.Index(doc, "<!-- END functions -->")
	var documented []string
	for _, l := range strings.Split(doc[i:j], "\n") {
		if m := regexp.MustCompile("^\\| `(LOAM_[A-Z0-9_]+)` \\|").FindStringSubmatch(l); m != nil {
			documented = append(documented, m[1])
		}
	}
	srcs, _ := filepath.Glob("../../functions/*/main.go")
	fnenv, _ := filepath.Glob("../../functions/internal/fnenv/*.go")
	for _, f := range fnenv {
		if !strings.HasSuffix(f, "_test.go") {
			srcs = append(srcs, f)
		}
	}
	var read []string
	for _, p := range srcs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// Comments name variables too; only code counts.
		var code []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "//") {
				code = append(code, l)
			}
		}
		for _, m := range regexp.MustCompile(`"(LOAM_[A-Z0-9_]+)"`).FindAllStringSubmatch(strings.Join(code, "\n"), -1) {
			read = append(read, m[1])
		}
	}
	slices.Sort(documented)
	slices.Sort(read)
	if documented, read = slices.Compact(documented), slices.Compact(read); !slices.Equal(documented, read) {
		t.Fatalf("functions table names %v; the functions read %v", documented, read)
	}
}

// firstDiff shows the first line where a and b differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return "line " + strconv.Itoa(i+1) + ":\n  doc:  " + al[i] + "\n  flags: " + bl[i]
		}
	}
	return "lengths differ"
}

// TestDeploymentVariablesDocumented: every LOAM_* variable the Terraform module, the SAM
// template and the LocalStack files set is one docs/configuration.md lists: a deployment
// cannot set a name no service reads.
func TestDeploymentVariablesDocumented(t *testing.T) {
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile("`(LOAM_[A-Z0-9_]+)`").FindAllStringSubmatch(string(b), -1) {
		known[m[1]] = true
	}
	var files []string
	filepath.WalkDir("../../terraform", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".tf") {
			files = append(files, p)
		}
		return nil
	})
	more, _ := filepath.Glob("../../local/localstack/*")
	files = append(append(files, "../../template.yaml"), more...)
	name := regexp.MustCompile(`LOAM_[A-Z0-9_]*[A-Z0-9]`)
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, v := range name.FindAllString(string(b), -1) {
			if !known[v] {
				t.Errorf("%s sets %s, which no service reads (not in %s)", p, v, configDoc)
			}
		}
	}
}

// TestSharedVariablesOneFormat: a variable that sets flags of several services (loam dev
// passes its environment to its children) takes one format: the flags behind it parse the
// same kind of value.
func TestSharedVariablesOneFormat(t *testing.T) {
	cleanEnv(t)
	seq := sequencercmd.Flags()
	type use struct{ cmd, flag, kind string }
	byVar := map[string][]use{}
	add := func(cmd string, fs *flag.FlagSet, vars envflag.Vars) {
		fs.VisitAll(func(f *flag.Flag) {
			for _, v := range vars.Of(f.Name) {
				byVar[v] = append(byVar[v], use{cmd, f.Name, valueKind(f)})
			}
		})
	}
	add("lognode-svc", lognodecmd.Flags(), lognodecmd.Vars)
	add("sequencer-svc", seq[""], sequencercmd.Vars)
	add("sequencer-svc restore", seq["restore"], sequencercmd.RestoreVars)
	add("sequencer-svc members", seq["members"], sequencercmd.Vars)
	add("loam dev", devFlagSet(t), devVars)
	for v, uses := range byVar {
		for _, u := range uses[1:] {
			if u.kind != uses[0].kind {
				t.Errorf("%s sets %s --%s (%s) and %s --%s (%s)", v, uses[0].cmd, uses[0].flag, uses[0].kind, u.cmd, u.flag, u.kind)
			}
		}
	}
}

// valueKind is the kind of value flag f parses: what its default reads as.
func valueKind(f *flag.Flag) string {
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			return "duration"
		case bool:
			return "bool"
		case int, int64, uint, uint64:
			return "integer"
		case float64:
			return "number"
		}
	}
	return "string"
}
