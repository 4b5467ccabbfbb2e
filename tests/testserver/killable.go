package testserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// VersityGW is a versitygw server a test can SIGKILL and start again on the same port and
// data directory (StartVersityGWKillable).
type VersityGW struct {
	S3Endpoint
	t                  testing.TB
	bin, dataDir, addr string
	logDir             string
	p                  *proc
	starts             int
}

// StartVersityGWKillable starts versitygw as StartVersityGW does and returns a handle that
// kills and restarts it. It is stopped at the test's end.
func StartVersityGWKillable(t testing.TB) *VersityGW {
	t.Helper()
	bin := lookBinary(t, "versitygw", "run .ci/tools.sh (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)")
	v := &VersityGW{t: t, bin: bin, dataDir: filepath.Join(t.TempDir(), "versitygw-data"), logDir: t.TempDir()}
	if err := os.MkdirAll(v.dataDir, 0o755); err != nil {
		t.Fatalf("testserver: %v", err)
	}
	addr, err := freeAddr()
	if err != nil {
		t.Fatalf("testserver: versitygw: free port: %v", err)
	}
	v.addr = addr
	v.S3Endpoint = S3Endpoint{URL: "http://" + addr, Region: "us-east-1", AccessKey: VersityAccessKey, SecretKey: VersitySecretKey}
	if err := v.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if v.p != nil {
			v.p.stop()
		}
	})
	return v
}

// Start starts the server (again) on its port and data directory and waits until it answers.
func (v *VersityGW) Start() error {
	if v.p != nil && !v.p.exited() {
		return fmt.Errorf("testserver: versitygw %s is running", v.addr)
	}
	v.starts++
	logPath := filepath.Join(v.logDir, fmt.Sprintf("versitygw-%d.log", v.starts))
	cmd := exec.Command(v.bin, "--access", VersityAccessKey, "--secret", VersitySecretKey, "--port", v.addr, "--keep-alive", "posix", v.dataDir)
	p, err := launch("versitygw", cmd, logPath)
	if err != nil {
		return fmt.Errorf("testserver: versitygw: %w", err)
	}
	v.p = p
	if err := p.waitReady(v.URL, ReadyTimeout); err != nil {
		p.stop()
		return fmt.Errorf("testserver: versitygw on %s: %w; log tail:\n%s", v.addr, err, tail(logPath, 40))
	}
	return nil
}

// Kill SIGKILLs the server's process group and waits for it to exit.
func (v *VersityGW) Kill() {
	if v.p == nil || v.p.exited() {
		return
	}
	_ = syscall.Kill(-v.p.cmd.Process.Pid, syscall.SIGKILL)
	<-v.p.done
	v.p.log.Close()
}
