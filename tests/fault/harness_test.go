package fault

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/tests/cluster"
)

var bins cluster.Binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loam-fault-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins, err = cluster.Build(cluster.RepoRoot(), dir, os.Getenv("LOAM_CLUSTER_RACE") == "1")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const ns = "default"

const noFaults = `{"rules": []}`

func ptr[T any](v T) *T { return &v }

// faultWindow is how long each fault stays on (LOAM_FAULT_SECONDS, default 4 s).
func faultWindow() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("LOAM_FAULT_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 4 * time.Second
}

// env is a cluster whose log nodes load a fault profile file the test rewrites.
type env struct {
	t       *testing.T
	c       *cluster.Cluster
	profile string
	stream  string
	parts   int32
}

// start starts a cluster of seqs voters and nodes log nodes with an empty fault profile and
// a stream of parts partitions every node knows.
func start(t *testing.T, seqs, nodes int, stream string, parts int32, opts cluster.Options) *env {
	t.Helper()
	return startClass(t, seqs, nodes, stream, parts, "", opts)
}

// startClass is start with a stream of class class ("": the default, standard) and, for
// each name in more, another stream of that class and partitions every node knows.
func startClass(t *testing.T, seqs, nodes int, stream string, parts int32, class string, opts cluster.Options, more ...string) *env {
	t.Helper()
	e := &env{t: t, profile: filepath.Join(t.TempDir(), "faults.json"), stream: stream, parts: parts}
	e.setProfile(noFaults)
	opts.Sequencers, opts.Nodes = seqs, nodes
	opts.DevArgs = append(opts.DevArgs, "--fault-profile", e.profile)
	e.c = cluster.Start(t, bins, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range append([]string{stream}, more...) {
		if _, err := e.c.Client(0).CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: name, Partitions: ptr(parts), Class: class}); err != nil {
			t.Fatalf("create stream %s (class %q): %v", name, class, err)
		}
		for i := range nodes {
			for {
				if _, err := e.c.Client(i).GetStream(ctx, ns, name); err == nil {
					break
				} else if ctx.Err() != nil {
					t.Fatalf("node %d never saw stream %s: %v", i, name, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	return e
}

// setProfile writes the profile every node re-reads within a second (atomically: a node
// never reads half a file).
func (e *env) setProfile(js string) {
	e.t.Helper()
	tmp := e.profile + ".tmp"
	if err := os.WriteFile(tmp, []byte(js), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, e.profile); err != nil {
		e.t.Fatal(err)
	}
}

// load starts the load generator on every log node: writers, a prober every 100 ms and
// tailers.
func (e *env) load(l *cluster.Ledger) *cluster.Load {
	e.t.Helper()
	load, err := cluster.StartLoad(cluster.LoadConfig{Nodes: e.c.NodeURLs(), Stream: e.stream, Partitions: e.parts,
		Writers: 4, PerRequest: 10, ProbeEvery: 100 * time.Millisecond, Tailers: true, Timeout: 10 * time.Second}, l)
	if err != nil {
		e.t.Fatal(err)
	}
	return load
}

// faultCount sums loam_objstore_faults_injected_total{fault=fault} over every running log
// node's /metrics.
func (e *env) faultCount(fault string) float64 {
	var sum float64
	for _, u := range e.c.NodeURLs() {
		sum += scrape(u, "loam_objstore_faults_injected_total", `fault="`+fault+`"`)
	}
	return sum
}

// scrape sums the samples of metric name whose labels contain label.
func scrape(base, name, label string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	var sum float64
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !(strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ")) || !strings.Contains(line, label) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// waitFired waits until fault fired at least once on the nodes, and returns the count.
func (e *env) waitFired(fault string, timeout time.Duration) float64 {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if n := e.faultCount(fault); n > 0 {
			return n
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("fault %s never fired within %s", fault, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// outcomes counts the produce requests sent in [from, to) by outcome.
type outcomes struct{ Acked, Refused, Unknown int }

func (o outcomes) total() int { return o.Acked + o.Refused + o.Unknown }

func (o outcomes) String() string {
	return fmt.Sprintf("%d requests: %d acked, %d refused, %d unknown", o.total(), o.Acked, o.Refused, o.Unknown)
}

func countOutcomes(l *cluster.Ledger, from, to time.Time) outcomes {
	var o outcomes
	for _, r := range l.Requests() {
		if r.Sent.Before(from) || !r.Sent.Before(to) {
			continue
		}
		switch {
		case r.OK:
			o.Acked++
		case r.Outcome == cluster.Failed:
			o.Refused++
		default:
			o.Unknown++
		}
	}
	return o
}

// finish stops the load and runs the checker, failing on any violation, a crash or a race
// in a child's log (but for crash lines containing one of expected), or a run that
// acknowledged nothing.
func (e *env) finish(load *cluster.Load, l *cluster.Ledger, expected ...string) *cluster.Report {
	e.t.Helper()
	load.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := e.c.FinalCheck(ctx, l, ns, e.stream, e.parts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("checker: %s", rep)
	for kind, n := range rep.RequestFailures {
		e.t.Logf("  %d failed requests: %s", n, kind)
	}
	if len(rep.Violations) > 0 {
		e.t.Fatalf("checker found %d violations:\n%s", len(rep.Violations), strings.Join(rep.Violations, "\n"))
	}
	if rep.Acked == 0 || rep.Records < rep.Acked {
		e.t.Fatalf("nothing checked: %s", rep)
	}
	var problems []string
	for _, p := range e.c.LogProblems() {
		ok := false
		for _, x := range expected {
			ok = ok || strings.Contains(p, x)
		}
		if ok {
			e.t.Logf("expected: %s", p)
		} else {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		e.t.Fatalf("children logged races or crashes:\n%s", strings.Join(problems, "\n"))
	}
	return rep
}

// recovery is how long after end the first request sent at or after it succeeded.
func recovery(t *testing.T, l *cluster.Ledger, end time.Time, within time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if d, ok := l.Resumption(end); ok {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce did not resume within %s of the fault's end", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
