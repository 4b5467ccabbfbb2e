package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

const versionUsage = `usage: loam version

Prints the loam command's version, the Go version it was built with and, when known, the
commit it was built from.
`

// version is set at build time: go build -ldflags "-X main.version=v1.2.3" ./cmd/loam.
var version = ""

// versionString is version, else the module version the binary was built as.
func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// buildCommit is the VCS revision recorded at build time, if any.
func buildCommit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

func runVersion(_ context.Context, g *globals, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("version", g)
	pos, err := parseArgs(fs, versionUsage, args, stdout)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "loam %s (%s %s/%s", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if c := buildCommit(); c != "" {
		fmt.Fprintf(stdout, ", commit %s", c)
	}
	fmt.Fprintln(stdout, ")")
	return nil
}
