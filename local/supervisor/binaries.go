package supervisor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoBinary: a child's binary was found nowhere and could not be built.
var ErrNoBinary = errors.New("supervisor: binary not found")

// Module is the Go module whose checkout FindBinary builds from.
const Module = "github.com/loamhq/loam"

// Binary names of the children, also the folders (./sequencer-svc, ./lognode-svc) of the
// source checkout they are built from.
const (
	SequencerBinary = "sequencer-svc"
	LognodeBinary   = "lognode-svc"
)

// FindBinary locates the binary name (SequencerBinary or LognodeBinary). It looks, in
// order:
//  1. next to the running executable (the loam binary): a release ships them together;
//  2. on PATH;
//  3. in a source checkout of Module containing the working directory: it runs
//     `go build -o <binDir>/<name> ./<name>` there (go's build cache makes a rebuild of
//     unchanged code quick) and answers the built file.
//
// how says which of these applied, for the banner.
func FindBinary(ctx context.Context, name, binDir string) (path, how string, err error) {
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			p := filepath.Join(filepath.Dir(exe), name)
			if isExecutable(p) {
				return p, "next to " + filepath.Base(exe), nil
			}
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		return p, "on PATH", nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", "", fmt.Errorf("%w: %s: %w", ErrNoBinary, name, err)
	}
	root := findCheckout(wd)
	if root == "" {
		return "", "", fmt.Errorf("%w: %s: not next to this executable, not on PATH, and %s is not inside a %s checkout to build it from",
			ErrNoBinary, name, wd, Module)
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", "", fmt.Errorf("%w: %s: %w", ErrNoBinary, name, err)
	}
	out := filepath.Join(binDir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./"+name)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("%w: %s: go build in %s: %w\n%s", ErrNoBinary, name, root, err, strings.TrimSpace(string(msg)))
	}
	return out, "built from " + root, nil
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// findCheckout returns the nearest directory at or above dir whose go.mod declares Module.
func findCheckout(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if modulePath(filepath.Join(d, "go.mod")) == Module {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
