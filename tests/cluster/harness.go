package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loamhq/loam/local/supervisor"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/meta/metapb"
	"github.com/loamhq/loam/shared/streamapi"
)

// Binaries are the programs a cluster can run, built into one directory: loam, whose
// `loam dev` runs its children as `loam sequencer` and `loam lognode`, and the separate
// sequencer-svc and lognode-svc (built so they stay buildable; tests name them with
// --sequencer-bin/--lognode-bin).
type Binaries struct {
	Dir, Loam string
}

// Build builds loam, sequencer-svc and lognode-svc from the checkout at root into dir,
// with -race when race is set.
func Build(root, dir string, race bool) (Binaries, error) {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/loam", "./sequencer-svc", "./lognode-svc")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return Binaries{Dir: dir, Loam: filepath.Join(dir, "loam")}, nil
}

// RepoRoot is the directory holding go.mod at or above the working directory.
func RepoRoot() string {
	wd, _ := os.Getwd()
	for d := wd; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return wd
}

// Options shape a cluster.
type Options struct {
	Sequencers, Nodes int
	SequencerArgs     []string // e.g. --snapshot-threshold 64
	LognodeArgs       []string
	FlushInterval     time.Duration // 0: loam dev's default (250 ms)
	Env               []string      // added to loam dev's environment (the children inherit it)
	DevArgs           []string      // more loam dev flags, e.g. --bucket s3://…
	// Prepare, when set, runs on the fresh data dir before loam dev first starts (to mount
	// a small filesystem where a child keeps its state, say).
	Prepare func(dataDir string)
	// Dir is loam dev's working directory (default: the test's).
	Dir string
	// Functions runs the background functions (segmenter, retention, compaction, GC) in
	// loam dev; off by default, so tests that compare the voters' offset indexes see no
	// segmenter commits between their reads.
	Functions bool
}

// Cluster is a `loam dev --sequencers N --nodes M` process and its children.
type Cluster struct {
	t       testing.TB
	bins    Binaries
	opts    Options
	Dir     string // data dir
	seqPort int
	rpcPort int
	http    int
	out     string // the supervisor's output file

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}

	connMu sync.Mutex
	conns  map[string]*grpc.ClientConn
}

// Start starts a cluster on a fresh data dir and free loopback ports, and waits until
// every log node is healthy. It is stopped (killed) when the test ends.
func Start(t testing.TB, bins Binaries, opts Options) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bins: bins, opts: opts, Dir: t.TempDir(), conns: map[string]*grpc.ClientConn{}}
	c.seqPort, c.http = freePortRanges(t, 2*opts.Sequencers, opts.Nodes)
	c.out = filepath.Join(c.Dir, "supervisor.out")
	t.Cleanup(func() {
		c.KillAll()
		c.connMu.Lock()
		for _, cc := range c.conns {
			cc.Close()
		}
		c.connMu.Unlock()
		if t.Failed() {
			t.Logf("supervisor output:\n%s", tail(c.out, 60))
		}
	})
	if opts.Prepare != nil {
		opts.Prepare(c.Dir)
	}
	c.Restart()
	return c
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 where it cannot be
// read). Ports are picked below it: a port of the ephemeral range that is free now may be
// taken by an outgoing connection before a child restarted after a kill listens on it again.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 {
		if lo, err := strconv.Atoi(f[0]); err == nil && lo > 21000 {
			return lo
		}
	}
	return 32768
}

// freePortRanges finds a run of a free ports and a run of b free ports on 127.0.0.1, below
// the ephemeral range and above 27000 (the unit tests of sequencer-svc/server,
// servertest and local/devcluster draw from below, so packages run in parallel keep apart).
func freePortRanges(t testing.TB, a, b int) (int, int) {
	t.Helper()
	free := func(n int) int {
		for range 200 {
			base := 27000 + rand.IntN(ephemeralLow()-27000-n)
			ok := true
			var ls []net.Listener
			for i := range n {
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
				if err != nil {
					ok = false
					break
				}
				ls = append(ls, l)
			}
			for _, l := range ls {
				l.Close()
			}
			if ok {
				return base
			}
		}
		t.Fatal("no free port range")
		return 0
	}
	x := free(a)
	for {
		y := free(b)
		if y+b <= x || y >= x+a {
			return x, y
		}
	}
}

// Restart starts `loam dev` on the cluster's data dir and ports (after KillAll or Stop)
// and waits for the cluster file and healthy log nodes.
func (c *Cluster) Restart() {
	c.t.Helper()
	args := []string{"dev", "--data-dir", c.Dir, "--sequencers", strconv.Itoa(c.opts.Sequencers), "--nodes", strconv.Itoa(c.opts.Nodes),
		"--sequencer-port", strconv.Itoa(c.seqPort), "--raft-port", strconv.Itoa(c.seqPort + 1), "--http-port", strconv.Itoa(c.http),
		"--kafka-port", "0", "--grpc-port", "0", "--log-level", "warn", "--stop-timeout", "20s"}
	if c.opts.FlushInterval > 0 {
		args = append(args, "--flush-interval", c.opts.FlushInterval.String())
	}
	if len(c.opts.SequencerArgs) > 0 {
		args = append(args, "--sequencer-args", strings.Join(c.opts.SequencerArgs, " "))
	}
	if len(c.opts.LognodeArgs) > 0 {
		args = append(args, "--lognode-args", strings.Join(c.opts.LognodeArgs, " "))
	}
	if !c.opts.Functions {
		args = append(args, "--functions=false")
	}
	args = append(args, c.opts.DevArgs...)
	os.Remove(filepath.Join(c.Dir, supervisor.FileName))
	f, err := os.OpenFile(c.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.bins.Loam, args...)
	cmd.Env = append(os.Environ(), c.opts.Env...)
	cmd.Dir = c.opts.Dir
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(done) }()
	c.mu.Lock()
	c.cmd, c.done = cmd, done
	c.mu.Unlock()

	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-done:
			c.t.Fatalf("loam dev exited during start-up:\n%s", tail(c.out, 40))
		default:
		}
		if cf, err := supervisor.ReadClusterFile(c.Dir); err == nil && c.healthy(cf) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster not up after 90 s:\n%s", tail(c.out, 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *Cluster) healthy(cf supervisor.ClusterFile) bool {
	if len(cf.Nodes) != c.opts.Nodes {
		return false
	}
	hc, err := httpClient(cf)
	if err != nil {
		return false
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	for _, n := range cf.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cf.NodeURL(n)+"/healthz", nil)
		resp, err := hc.Do(req)
		cancel()
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}

// httpClient is a client of the nodes' HTTPS APIs with `loam dev --tls`, trusting only
// the cluster's CA; nil for a plaintext cluster.
func httpClient(cf supervisor.ClusterFile) (*http.Client, error) {
	if cf.CA == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(cf.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", cf.CA)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}

// File reads cluster.json.
func (c *Cluster) File() supervisor.ClusterFile {
	c.t.Helper()
	cf, err := supervisor.ReadClusterFile(c.Dir)
	if err != nil {
		c.t.Fatal(err)
	}
	return cf
}

// NodeURLs are the log nodes' base URLs.
func (c *Cluster) NodeURLs() []string {
	var out []string
	cf := c.File()
	for _, n := range cf.Nodes {
		out = append(out, cf.NodeURL(n))
	}
	return out
}

// Client is a streamapi client of log node i.
func (c *Cluster) Client(i int) *streamapi.Client {
	opts := []streamapi.Option{streamapi.WithTimeout(30 * time.Second)}
	hc, err := httpClient(c.File())
	if err != nil {
		c.t.Fatal(err)
	}
	if hc != nil {
		opts = append(opts, streamapi.WithHTTPClient(hc))
	}
	cl, err := streamapi.NewClient(c.NodeURLs()[i], opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// PID is the current pid of child id (0 while down).
func (c *Cluster) PID(id string) int {
	cf := c.File()
	for _, s := range cf.Sequencers {
		if s.ID == id {
			return s.PID
		}
	}
	for _, n := range cf.Nodes {
		if n.ID == id {
			return n.PID
		}
	}
	c.t.Fatalf("no child %s", id)
	return 0
}

// Signal sends sig to child id and returns its pid.
func (c *Cluster) Signal(id string, sig syscall.Signal) int {
	c.t.Helper()
	pid := c.PID(id)
	if pid <= 0 {
		c.t.Fatalf("%s is not running", id)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		c.t.Fatalf("kill %s (pid %d): %v", id, pid, err)
	}
	return pid
}

// Kill SIGKILLs child id and returns the pid it had.
func (c *Cluster) Kill(id string) int { return c.Signal(id, syscall.SIGKILL) }

// WaitRestarted waits until the supervisor has replaced pid old of child id and returns
// the new pid.
func (c *Cluster) WaitRestarted(id string, old int, timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if pid := c.PID(id); pid != 0 && pid != old {
			return pid
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s not restarted within %s", id, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Hold keeps child id down once it exits (supervisor hold file); Release lets the
// supervisor restart it.
func (c *Cluster) Hold(id string) {
	if err := os.WriteFile(supervisor.HoldPath(c.Dir, id), nil, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// Release removes child id's hold file.
func (c *Cluster) Release(id string) { os.Remove(supervisor.HoldPath(c.Dir, id)) }

// Stop sends SIGTERM to `loam dev` and waits for it (and so its children) to exit.
func (c *Cluster) Stop(timeout time.Duration) error {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		if !cmd.ProcessState.Success() {
			return fmt.Errorf("loam dev exited with %v", cmd.ProcessState)
		}
		return nil
	case <-time.After(timeout):
		c.KillAll()
		return fmt.Errorf("loam dev did not stop within %s", timeout)
	}
}

// KillSupervisor SIGKILLs `loam dev` alone and returns the children's pids as they
// were; the children should die with it (parent-death signal).
func (c *Cluster) KillSupervisor() []int {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	cf, _ := supervisor.ReadClusterFile(c.Dir)
	_ = cmd.Process.Kill()
	<-done
	var pids []int
	for _, s := range cf.Sequencers {
		pids = append(pids, s.PID)
	}
	for _, n := range cf.Nodes {
		pids = append(pids, n.PID)
	}
	return pids
}

// KillAll SIGKILLs `loam dev` and every child cluster.json names, and waits for the
// supervisor to be gone.
func (c *Cluster) KillAll() {
	c.mu.Lock()
	cmd := c.cmd
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	pids := c.KillSupervisor()
	for _, pid := range pids {
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// The children die with the supervisor (parent-death signal); wait until they have.
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for pid > 0 && syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// conn is a gRPC connection to a sequencer RPC address (no retries, no leader following).
func (c *Cluster) conn(addr string) metapb.SequencerClient {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	cc := c.conns[addr]
	if cc == nil {
		var err error
		cc, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.t.Fatal(err)
		}
		c.conns[addr] = cc
	}
	return metapb.NewSequencerClient(cc)
}

// ErrNoLeader: no voter says it leads.
var ErrNoLeader = errors.New("cluster: no sequencer leader")

// Leader finds the Raft leader: the running voter whose own Members answer marks itself
// as leader. (A write probe no longer tells: followers forward writes.) A leader just cut
// off may still claim the role for up to its lease timeout.
func (c *Cluster) Leader(ctx context.Context) (supervisor.SequencerInfo, error) {
	cf := c.File()
	var errs []error
	for _, s := range cf.Sequencers {
		if s.PID == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		r, err := c.conn(s.RPC).Members(cctx, &metapb.MembersRequest{})
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.ID, metagrpc.FromStatus(err)))
			continue
		}
		for _, m := range r.GetMembers() {
			if m.GetId() == s.ID && m.GetLeader() {
				return s, nil
			}
		}
	}
	return supervisor.SequencerInfo{}, fmt.Errorf("%w: %w", ErrNoLeader, errors.Join(errs...))
}

// WaitLeader polls Leader until one answers or timeout passes.
func (c *Cluster) WaitLeader(timeout time.Duration) supervisor.SequencerInfo {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l, err := c.Leader(context.Background())
		if err == nil {
			return l
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no leader within %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// HighWatermarks reads a stream's partitions' high watermarks from one voter (which
// answers from its own state once caught up with the leader's read index).
func (c *Cluster) HighWatermarks(ctx context.Context, rpc, ns, stream string) ([]int64, error) {
	r, err := c.conn(rpc).GetStream(ctx, &metapb.GetStreamRequest{Namespace: ns, Name: stream})
	if err != nil {
		return nil, metagrpc.FromStatus(err)
	}
	out := make([]int64, len(r.GetPartitions()))
	for _, p := range r.GetPartitions() {
		if int(p.GetPartition()) < len(out) {
			out[p.GetPartition()] = p.GetHighWatermark()
		}
	}
	return out, nil
}

// Index reads one partition's whole offset index from one voter (as HighWatermarks).
func (c *Cluster) Index(ctx context.Context, rpc string, streamID uint64, p int32) ([]*metapb.IndexEntry, error) {
	var out []*metapb.IndexEntry
	var from int64
	for {
		r, err := c.conn(rpc).Lookup(ctx, &metapb.LookupRequest{StreamId: streamID, Partition: p, From: from, Max: 1000})
		if err != nil {
			return nil, metagrpc.FromStatus(err)
		}
		es := r.GetEntries()
		out = append(out, es...)
		if len(es) == 0 {
			return out, nil
		}
		last := es[len(es)-1]
		from = last.GetBaseOffset() + last.GetCount()
		if from >= r.GetState().GetHighWatermark() {
			return out, nil
		}
	}
}

// AppliedIndex is the index of the last Raft entry voter rpc applied to its state.
func (c *Cluster) AppliedIndex(ctx context.Context, rpc string) (uint64, error) {
	r, err := c.conn(rpc).Members(ctx, &metapb.MembersRequest{})
	if err != nil {
		return 0, metagrpc.FromStatus(err)
	}
	return r.GetAppliedIndex(), nil
}

// WaitApplied waits until voter rpc has applied index want and returns how long it took.
func (c *Cluster) WaitApplied(rpc string, want uint64, timeout time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	for {
		got, err := c.AppliedIndex(context.Background(), rpc)
		if err == nil && got >= want {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			c.t.Fatalf("voter %s has not applied index %d within %s: at %d, %v", rpc, want, timeout, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SnapshotIndex is the highest Raft index of the snapshots in voter id's data dir (0 if
// none): hashicorp/raft names them <term>-<index>-<ms>.
func (c *Cluster) SnapshotIndex(id string) uint64 {
	ents, _ := os.ReadDir(filepath.Join(c.Dir, id, "snapshots"))
	var best uint64
	for _, e := range ents {
		parts := strings.Split(e.Name(), "-")
		if len(parts) != 3 || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if i, err := strconv.ParseUint(parts[1], 10, 64); err == nil {
			best = max(best, i)
		}
	}
	return best
}

// LogPath is child id's log file.
func (c *Cluster) LogPath(id string) string { return filepath.Join(c.Dir, "logs", id+".log") }

// SupervisorOutput is what `loam dev` printed so far.
func (c *Cluster) SupervisorOutput() string {
	b, _ := os.ReadFile(c.out)
	return string(b)
}

// FinalCheck stops nothing: call it after the load stopped. It reads the whole stream from
// every log node (waiting for lagging views), checks all nodes serve the same log, and
// verifies it against the ledger.
func (c *Cluster) FinalCheck(ctx context.Context, l *Ledger, ns, stream string, partitions int32) (*Report, error) {
	urls := c.NodeURLs()
	extra := map[int32]int64{}
	for round := 0; ; round++ {
		logs := make([]Log, len(urls))
		for i, u := range urls {
			cl, err := streamapi.NewClient(u, streamapi.WithTimeout(30*time.Second))
			if err != nil {
				return nil, err
			}
			logs[i], err = ReadLog(ctx, cl, ns, stream, partitions, func(p int32) int64 { return max(l.Target(p), extra[p]) })
			if err != nil {
				return nil, err
			}
		}
		diff := ""
		for i := 1; i < len(logs); i++ {
			if d := SameLog(logs[0], logs[i]); d != "" {
				diff = fmt.Sprintf("%s and %s: %s", urls[0], urls[i], d)
			}
		}
		if diff == "" {
			rep := Verify(logs[0], l)
			rep.RequestFailures = l.Failures()
			return rep, nil
		}
		if round >= 3 {
			return nil, fmt.Errorf("log nodes serve different logs: %s", diff)
		}
		for _, lg := range logs {
			for p, es := range lg {
				extra[p] = max(extra[p], int64(len(es)))
			}
		}
	}
}

// LogProblems scans every child log for data races and panics (a child built with -race
// prints "WARNING: DATA RACE"; a crash prints "panic:" or "fatal error:") and returns the
// first lines found, at most ten.
func (c *Cluster) LogProblems() []string {
	var out []string
	ents, _ := os.ReadDir(filepath.Join(c.Dir, "logs"))
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(c.Dir, "logs", e.Name()))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "WARNING: DATA RACE") || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
				out = append(out, e.Name()+": "+line)
				if len(out) == 10 {
					return out
				}
			}
		}
	}
	return out
}

// CountInLogs counts the lines of child logs whose id starts with prefix that contain s.
func (c *Cluster) CountInLogs(prefix, s string) int {
	n := 0
	ents, _ := os.ReadDir(filepath.Join(c.Dir, "logs"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			b, _ := os.ReadFile(filepath.Join(c.Dir, "logs", e.Name()))
			n += strings.Count(string(b), s)
		}
	}
	return n
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogTail is the last n lines of child id's log.
func (c *Cluster) LogTail(id string, n int) string { return tail(c.LogPath(id), n) }
