// Package testserver starts real servers for tests: versitygw (an S3 server on a POSIX
// directory) and moto_server (S3, SQS, DynamoDB and KMS on one endpoint).
//
// # Basics
//
// Each Start function binds the server to a free port on 127.0.0.1, waits until it answers
// HTTP, and stops it (its whole process group) when the test ends. The server's output goes
// to a log file in the test's temporary directory; when the test fails, or the server does
// not come up, the tail of that log is printed.
//
// Binaries are looked up on PATH, then in <repo>/.tools/bin, where .ci/tools.sh installs
// them. A missing binary skips the test with a message naming the install command, unless
// LOAM_REQUIRE_SERVERS=1 (CI sets it): then the test fails.
//
// # Caveats
//
// The free port is found by binding and closing a listener, so another process can take it
// before the server binds; Start then tries again with a new port (three attempts).
// moto_server does not check credentials; versitygw checks SigV4.
package testserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// S3Endpoint is where a started S3 server listens, with credentials it accepts.
type S3Endpoint struct {
	URL       string // http://127.0.0.1:PORT
	Region    string
	AccessKey string
	SecretKey string
}

// Credentials versitygw is started with.
const (
	VersityAccessKey = "test"
	VersitySecretKey = "testtesttest"
)

// ReadyTimeout bounds the wait for a server to answer HTTP.
var ReadyTimeout = 60 * time.Second

// StartVersityGW starts versitygw with its posix backend on a temporary directory and
// returns its endpoint. Buckets must be created by the test (CreateBucket).
func StartVersityGW(t testing.TB) S3Endpoint {
	t.Helper()
	bin := lookBinary(t, "versitygw", "run .ci/tools.sh (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)")
	dataDir := filepath.Join(t.TempDir(), "versitygw-data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatalf("testserver: %v", err)
	}
	url := start(t, "versitygw", func(addr string) *exec.Cmd {
		// --keep-alive: reuse client connections (versitygw closes each one by default).
		return exec.Command(bin,
			"--access", VersityAccessKey, "--secret", VersitySecretKey,
			"--port", addr, "--keep-alive",
			"posix", dataDir)
	})
	return S3Endpoint{URL: url, Region: "us-east-1", AccessKey: VersityAccessKey, SecretKey: VersitySecretKey}
}

// StartMoto starts moto_server (S3, SQS, DynamoDB, KMS, ... on one endpoint) and returns
// its URL. moto accepts any credentials and region.
func StartMoto(t testing.TB) string {
	t.Helper()
	bin := lookBinary(t, "moto_server", "it is preinstalled on our machines; else run .ci/tools.sh (pip install 'moto[server]==5.2.1')")
	return start(t, "moto_server", func(addr string) *exec.Cmd {
		host, port, _ := net.SplitHostPort(addr)
		return exec.Command(bin, "-H", host, "-p", port)
	})
}

// lookBinary finds name on PATH, then in <repo>/.tools/bin; if it is missing the test is
// skipped, or fails when LOAM_REQUIRE_SERVERS=1.
func lookBinary(t testing.TB, name, hint string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	tried := []string{"PATH"}
	if root := repoRoot(); root != "" {
		p := filepath.Join(root, ".tools", "bin", name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
		tried = append(tried, filepath.Join(root, ".tools", "bin"))
	}
	msg := fmt.Sprintf("testserver: %s not found (looked in %s); %s", name, strings.Join(tried, ", "), hint)
	if os.Getenv("LOAM_REQUIRE_SERVERS") == "1" {
		t.Fatal(msg + " [LOAM_REQUIRE_SERVERS=1]")
		return ""
	}
	t.Skip(msg)
	return ""
}

// repoRoot is the directory of the loam go.mod: searched upwards from the working
// directory, then from this source file.
func repoRoot() string {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for d := dir; ; d = filepath.Dir(d) {
			if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/loamhq/loam\n")) {
				return d
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return ""
}

// start runs the command made by mkCmd on a free 127.0.0.1 port until it answers HTTP,
// and registers its stop; it returns http://ADDR.
func start(t testing.TB, name string, mkCmd func(addr string) *exec.Cmd) string {
	t.Helper()
	logDir := t.TempDir()
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			t.Fatalf("testserver: %s: free port: %v", name, err)
		}
		logPath := filepath.Join(logDir, fmt.Sprintf("%s-%d.log", name, attempt))
		p, err := launch(name, mkCmd(addr), logPath)
		if err != nil {
			t.Fatalf("testserver: %s: %v", name, err)
		}
		url := "http://" + addr
		err = p.waitReady(url, ReadyTimeout)
		if err == nil {
			t.Cleanup(func() {
				p.stop()
				if t.Failed() {
					t.Logf("testserver: %s log %s, tail:\n%s", name, logPath, tail(logPath, 40))
				}
			})
			return url
		}
		p.stop()
		lastErr = fmt.Errorf("%w; log %s, tail:\n%s", err, logPath, tail(logPath, 40))
		if !p.exited() {
			break // hung rather than lost the port race: retrying will not help
		}
	}
	t.Fatalf("testserver: %s did not start: %v", name, lastErr)
	return ""
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done
}

func launch(name string, cmd *exec.Cmd, logPath string) (*proc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout = log
	cmd.Stderr = log
	// Own process group, so stop reaches the server's children; SIGKILL if the test binary
	// dies without cleanup. Pdeathsig fires when the starting OS thread exits, so the
	// starting goroutine stays locked to its thread until the server has exited.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitReady polls url until the server answers any HTTP response.
func (p *proc) waitReady(url string, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 250*time.Millisecond) {
		if p.exited() {
			return fmt.Errorf("exited before answering: %v", p.err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
		resp, err := client.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no HTTP answer at %s within %v: %v", url, timeout, err)
		}
		time.Sleep(delay)
	}
}

// stop ends the process group: SIGTERM, then SIGKILL after 5 s.
func (p *proc) stop() {
	defer p.log.Close()
	if p.exited() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // children left behind by the leader
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return "(empty log)"
	}
	return strings.Join(lines, "\n")
}
