package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// pinning: on this 2-core machine every server (Loam, NATS, kfake, the loopback sink, the
// sequencer) runs on CPU 1 and the load generator (this process) on CPU 0, with taskset
// when it is installed; without it nothing is pinned and the report says so.
type pinning struct {
	taskset      string // path, or "" when absent or disabled
	server, load string // CPU lists
}

func (p pinning) String() string {
	if p.taskset == "" {
		return "none (taskset not found or -pin=false): servers and load generator share both cores"
	}
	return fmt.Sprintf("taskset: servers on CPU %s, load generator on CPU %s", p.server, p.load)
}

// pinSelf pins this process (the load generator) to p.load.
func (p pinning) pinSelf() error {
	if p.taskset == "" {
		return nil
	}
	out, err := exec.Command(p.taskset, "-a", "-p", "-c", p.load, fmt.Sprint(os.Getpid())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("suite: taskset -p %s: %v: %s", p.load, err, out)
	}
	return nil
}

// child is a server process the suite started.
type child struct {
	name  string
	cmd   *exec.Cmd
	ready map[string]string // what the child printed on its READY line
	done  chan error
	log   *strings.Builder
	dir   string // its data directory, removed once it has exited
}

// startChild runs bin args pinned to the server CPUs, and waits (up to a minute) for a
// line "READY {json}" on its stdout when waitReady, else for addr to accept connections.
func (p pinning) startChild(ctx context.Context, name, bin string, args []string, waitReady bool, addr string) (*child, error) {
	argv := append([]string{bin}, args...)
	if p.taskset != "" {
		argv = append([]string{p.taskset, "-c", p.server}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd, done: make(chan error, 1), log: &strings.Builder{}}
	cmd.Stderr = &limitWriter{b: c.log, n: 64 << 10}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("suite: start %s (%s): %w", name, bin, err)
	}
	readyc := make(chan map[string]string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "READY "); ok {
				m := map[string]string{}
				json.Unmarshal([]byte(rest), &m)
				readyc <- m
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() { c.done <- cmd.Wait() }()
	deadline := time.After(time.Minute)
	if waitReady {
		select {
		case c.ready = <-readyc:
			return c, nil
		case err := <-c.done:
			return nil, fmt.Errorf("suite: %s exited before it was ready: %v\n%s", name, err, c.log)
		case <-deadline:
			c.kill()
			return nil, fmt.Errorf("suite: %s not ready after a minute\n%s", name, c.log)
		case <-ctx.Done():
			c.kill()
			return nil, ctx.Err()
		}
	}
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return c, nil
		}
		select {
		case err := <-c.done:
			return nil, fmt.Errorf("suite: %s exited before it listened on %s: %v\n%s", name, addr, err, c.log)
		case <-deadline:
			c.kill()
			return nil, fmt.Errorf("suite: %s not listening on %s after a minute\n%s", name, addr, c.log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits up to 30 s before killing.
func (c *child) stop() error {
	defer c.removeDir()
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() == false {
			return nil // ended by the signal
		}
		return err
	case <-time.After(30 * time.Second):
		c.kill()
		return fmt.Errorf("suite: %s did not stop within 30 s of SIGTERM; killed", c.name)
	}
}

func (c *child) kill() {
	c.cmd.Process.Kill()
	<-c.done
	c.removeDir()
}

// removeDir removes the child's data directory (the rows store gigabytes, on tmpfs too).
func (c *child) removeDir() {
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

// wait waits for the child to exit by itself (after a /stop).
func (c *child) wait() error {
	defer c.removeDir()
	select {
	case err := <-c.done:
		if err != nil {
			return fmt.Errorf("suite: %s: %w\n%s", c.name, err, c.log)
		}
		return nil
	case <-time.After(2 * time.Minute):
		c.kill()
		return fmt.Errorf("suite: %s did not exit within 2 min of /stop; killed", c.name)
	}
}

type limitWriter struct {
	b *strings.Builder
	n int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if room := w.n - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var httpc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096}, Timeout: 2 * time.Minute}

// ctlJSON calls a Loam server child's control endpoint and decodes its JSON answer.
func ctlJSON(method, url string, out any) error {
	req, _ := http.NewRequest(method, url, nil)
	resp, err := httpc.Do(req)
	if err != nil {
		return fmt.Errorf("suite: %s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("suite: %s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}
