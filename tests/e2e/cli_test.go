package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestCLIAgainstDev drives the real loam client commands against a real `loam dev`:
// create, produce lines from stdin, consume them back, describe, and zone discovery
// through the node registry.
func TestCLIAgainstDev(t *testing.T) {
	p := startDev(t, t.TempDir(), freePorts(t), nil)
	loam := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(loamBin, append([]string{"--server", p.http}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("loam %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	loam("", "stream", "create", "cli", "--partitions", "2")
	var lines []string
	for i := range 50 {
		if i%2 == 0 {
			lines = append(lines, fmt.Sprintf(`{"n":%d}`, i))
		} else {
			lines = append(lines, fmt.Sprintf("plain line %d", i))
		}
	}
	loam(strings.Join(lines, "\n")+"\n", "produce", "cli", "-q")
	got := strings.Split(strings.TrimSpace(loam("", "consume", "cli")), "\n")
	slices.Sort(got)
	want := slices.Clone(lines)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("consume gave %d lines, want the %d produced:\n%v", len(got), len(want), got)
	}
	if d := loam("", "stream", "describe", "cli"); !strings.Contains(d, "Partitions:       2") {
		t.Fatalf("describe:\n%s", d)
	}
	// --zone: the registry answers the live node of zone "local"; the CLI talks to it.
	if out := loam("", "--zone", "local", "stream", "list"); !strings.Contains(out, "cli") {
		t.Fatalf("list through zone discovery:\n%s", out)
	}
}
