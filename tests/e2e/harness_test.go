package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loamBin is the loam binary built once for the package by TestMain.
var loamBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loam-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	loamBin = filepath.Join(dir, "loam")
	build := exec.Command("go", "build", "-race", "-o", loamBin, "./cmd/loam")
	build.Dir = repoRoot()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build loam:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func repoRoot() string {
	wd, _ := os.Getwd()
	for d := wd; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return wd
}

// devProc is one `loam dev` process.
type devProc struct {
	t       testing.TB
	cmd     *exec.Cmd
	http    string
	logPath string
	done    chan struct{}
}

type devPorts struct{ http, rpc, raft int }

func freePorts(t testing.TB) devPorts {
	t.Helper()
	var ps [3]int
	var ls []net.Listener
	for i := range ps {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ps[i] = l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return devPorts{ps[0], ps[1], ps[2]}
}

// startDev starts `loam dev` on dataDir and waits until /healthz answers 200.
func startDev(t testing.TB, dataDir string, ports devPorts, env []string, extra ...string) *devProc {
	t.Helper()
	args := append([]string{"dev", "--data-dir", dataDir,
		"--http-port", fmt.Sprint(ports.http), "--sequencer-port", fmt.Sprint(ports.rpc), "--raft-port", fmt.Sprint(ports.raft),
		"--kafka-port", "0", "--grpc-port", "0", "--otlp-http-port", "0", "--otlp-grpc-port", "0", "--log-level", "warn"}, extra...)
	cmd := exec.Command(loamBin, args...)
	cmd.Env = append(os.Environ(), env...)
	logPath := filepath.Join(t.TempDir(), "loam-dev.log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &devProc{t: t, cmd: cmd, http: fmt.Sprintf("http://127.0.0.1:%d", ports.http), logPath: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.done:
			t.Fatalf("loam dev exited during start-up:\n%s", p.logTail())
		default:
		}
		resp, err := http.Get(p.http + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("loam dev not healthy after 60s:\n%s", p.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL to the process group and waits for the exit.
func (p *devProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits for a clean exit.
func (p *devProc) stop(ctx context.Context) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if st := p.cmd.ProcessState; st != nil && !st.Success() {
			return fmt.Errorf("loam dev exited with %v:\n%s", st, p.logTail())
		}
		return nil
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("loam dev did not stop on SIGTERM")
	}
}

func (p *devProc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(string(b), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
