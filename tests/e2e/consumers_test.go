package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// memberProc is a `loam consume STREAM --consumer NAME --follow --format json` process;
// lines collects what it printed.
type memberProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []consumed
	done  chan struct{}
}

type consumed struct {
	Offset    int64           `json:"offset"`
	Partition int32           `json:"partition"`
	Value     json.RawMessage `json:"value"`
}

func startMember(t *testing.T, server, consumer, member string) *memberProc {
	t.Helper()
	cmd := exec.Command(loamBin, "--server", server, "consume", "c", "--consumer", consumer, "--member", member,
		"--follow", "--session", "2s", "--wait", "500ms", "--format", "json", "--max-bytes", "512")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &memberProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var c consumed
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Errorf("member %s printed %q: %v", member, sc.Text(), err)
				continue
			}
			m.mu.Lock()
			m.lines = append(m.lines, c)
			m.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, out)
		cmd.Wait()
		if t.Failed() {
			t.Logf("member %s stderr:\n%s", member, stderr.String())
		}
	}()
	t.Cleanup(func() { m.kill() })
	return m
}

func (m *memberProc) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.lines)
}

func (m *memberProc) kill() {
	select {
	case <-m.done:
		return
	default:
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.done
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNamedConsumerKilled: a named consumer's member (the loam CLI) is SIGKILLed mid-stream
// and a new member resumes at the committed offsets, with no gap; then the log node itself
// (loam dev: node and sequencer) is SIGKILLed under a running member, restarted on its data
// directory, and the member goes on from its committed offsets: every record is printed,
// in order per partition, none skipped.
func TestNamedConsumerKilled(t *testing.T) {
	dir, ports := t.TempDir(), freePorts(t)
	p := startDev(t, dir, ports, nil)
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
	produce := func(from, to int) {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "k%d:%d\n", i, i)
		}
		loam(b.String(), "produce", "c", "-q", "--key-separator", ":", "--batch-records", "100")
	}
	loam("", "stream", "create", "c", "--partitions", "3")
	produce(0, 1000)
	committed := func() map[int32]int64 {
		var d struct {
			Partitions []struct {
				Partition int32 `json:"partition"`
				Committed int64 `json:"committed"`
			} `json:"partitions"`
		}
		if err := json.Unmarshal([]byte(loam("", "consumer", "describe", "app", "--json")), &d); err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		for _, p := range d.Partitions {
			out[p.Partition] = p.Committed
		}
		return out
	}

	var runs []*memberProc
	m1 := startMember(t, p.http, "app", "m1")
	runs = append(runs, m1)
	waitFor(t, "m1 to print 1000 records", 60*time.Second, func() bool { return m1.count() >= 1000 })
	// Produce more while m1 reads, and kill m1 mid-stream once it committed past 1000.
	produced := make(chan struct{})
	go func() { defer close(produced); produce(1000, 10000) }()
	waitFor(t, "m1 to commit past 1000 records", 60*time.Second, func() bool {
		n := int64(0)
		for _, c := range committed() {
			n += max(c, 0)
		}
		return n > 1000
	})
	m1.kill()
	atKill := committed()
	<-produced

	m2 := startMember(t, p.http, "app", "m2")
	runs = append(runs, m2)
	waitFor(t, "m2 to read the rest", 90*time.Second, func() bool { return len(distinct(runs)) >= 10000 })
	first := firstOffsets(m2)
	for part, off := range atKill {
		if first[part] != off {
			t.Errorf("m2 started partition %d at %d, want the committed %d", part, first[part], off)
		}
	}

	// SIGKILL the whole node under m2, restart it, produce more: m2 goes on.
	time.Sleep(800 * time.Millisecond) // a heartbeat commits m2's progress
	p.kill()
	p = startDev(t, dir, ports, nil)
	produce(10000, 11000)
	waitFor(t, "m2 to read past the restart", 90*time.Second, func() bool { return len(distinct(runs)) >= 11000 })
	m2.kill()
	checkNoGap(t, runs, 11000)
	t.Logf("m1 printed %d, m2 %d (re-deliveries after the kills: %d); committed at m1's kill: %v",
		m1.count(), m2.count(), m1.count()+m2.count()-11000, atKill)
}

func distinct(runs []*memberProc) map[string]bool {
	seen := map[string]bool{}
	for _, m := range runs {
		m.mu.Lock()
		for _, c := range m.lines {
			seen[string(c.Value)] = true
		}
		m.mu.Unlock()
	}
	return seen
}

func firstOffsets(m *memberProc) map[int32]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32]int64{}
	for _, c := range m.lines {
		if _, ok := out[c.Partition]; !ok {
			out[c.Partition] = c.Offset
		}
	}
	return out
}

// checkNoGap: every value 0..total-1 was printed, and each run printed each partition's
// offsets in order without skipping one (a member restarts only at or before where it was).
func checkNoGap(t *testing.T, runs []*memberProc, total int) {
	t.Helper()
	seen := distinct(runs)
	for i := range total {
		if !seen[fmt.Sprint(i)] {
			t.Errorf("record %d never printed", i)
		}
	}
	for ri, m := range runs {
		m.mu.Lock()
		next := map[int32]int64{}
		for _, c := range m.lines {
			if n, ok := next[c.Partition]; ok && c.Offset > n {
				t.Errorf("run %d skipped partition %d offsets %d..%d", ri, c.Partition, n, c.Offset-1)
			}
			next[c.Partition] = c.Offset + 1
		}
		m.mu.Unlock()
	}
}
