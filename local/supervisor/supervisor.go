package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loamhq/loam/local/devcluster"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/tlsconf"
)

// ErrConfig: an invalid Config.
var ErrConfig = errors.New("supervisor: invalid config")

// Roles of children.
const (
	RoleSequencer = "sequencer"
	RoleNode      = "node"
)

// Config configures a supervised cluster. Zero values take the defaults in the comments.
type Config struct {
	DataDir    string // required; children's state, the bucket, logs/, hold/, cluster.json
	Host       string // address every child binds to (127.0.0.1)
	Sequencers int    // voters (3)
	Nodes      int    // log nodes (2)
	// SequencerPort is voter i's (0-based) RPC port minus 2i (7070: 7070, 7072, 7074);
	// RaftPort likewise (7071: 7071, 7073, 7075); HTTPPort is log node i's minus i (8080).
	SequencerPort, RaftPort, HTTPPort int
	Zones                             []string // voter and log node i are in Zones[i%len] (zone-a, zone-b)
	// GRPCPort is log node i's gRPC port minus i; 0: each node picks a free port; -1:
	// the nodes serve no gRPC API.
	GRPCPort int
	// OTLPHTTPPort and OTLPGRPCPort are log node i's OTLP/HTTP and OTLP/gRPC ports minus i;
	// 0: the nodes serve no OTLP on that transport.
	OTLPHTTPPort, OTLPGRPCPort int
	// KafkaPort is log node i's Kafka port minus i; 0: no Kafka listener.
	KafkaPort int
	// JournalPort is log node i's journal Raft port minus i (journal.go); 0, or fewer than
	// three log nodes: no journal, streams of class quorum are refused.
	JournalPort int
	// Bucket is the shared bucket as lognode-svc's --bucket takes it (objstore.Open: a
	// directory, file:///DIR or s3://NAME/PREFIX?endpoint=…); default <DataDir>/bucket.
	Bucket string
	// SequencerBin and LognodeBin are the children's binaries (sequencer-svc, lognode-svc);
	// empty: the running executable with the subcommand SequencerSubcommand or
	// LognodeSubcommand (`loam sequencer ...`, `loam lognode ...`).
	SequencerBin, LognodeBin string
	// SequencerArgs and LognodeArgs are appended to every such child's command line.
	SequencerArgs, LognodeArgs []string
	FlushInterval              time.Duration // log nodes' --flush-interval (0: theirs)
	Env                        []string      // added to the children's environment
	// DropEnv are variables of this process the children do not inherit: loam dev's own
	// settings (its flags' variables), which it hands on as flags where a child needs them,
	// so that LOAM_CLOCK_OFFSET for loam dev, say, does not also set every voter's
	// --clock-offset. Env is added after the drop.
	DropEnv []string
	// NodeAuth makes the log nodes check API keys (LOAM_ADMIN_KEY in Env is their bootstrap
	// admin key); without it they run with --insecure-no-auth.
	NodeAuth bool
	// ChildArgs are appended to one child's command line, after SequencerArgs or
	// LognodeArgs, by child id (seq-1, node-2): a testing aid (one voter's clock skewed,
	// one node's bucket faulty). An id no child has is an error.
	ChildArgs map[string][]string
	// ChildHosts gives a child its own address in place of Host (its ports stay), and
	// ChildNetns runs a child in a network namespace (ip netns exec NAME), by child id:
	// a testing aid for network partitions between hosts the test builds itself.
	ChildHosts, ChildNetns map[string]string

	// Services the supervisor runs itself (services.go).
	//
	// CoordPort is the port, on Host, of the coordination store the supervisor serves
	// (bbolt in <DataDir>/coord.db, only this process opens it; coord.Handler over HTTP):
	// every log node gets --coord to it, for the node registry (GET /v1/cluster/nodes),
	// and the functions take their leases in it. 0: a free port; -1: none (LognodeArgs may
	// name another store with --coord).
	CoordPort int
	// Functions, when set, runs the background functions (segmenter, retention,
	// compaction, GC; devcluster.StartFunctions) in the supervising process against the
	// bucket, the voters and the coordination store.
	Functions *devcluster.FunctionsConfig
	// ExpressBuckets and ExpressZones are the express class's three zonal buckets (URLs)
	// and their zones: the log nodes get them through Env, and the functions read and
	// delete wal/express/ keys there. Empty: no express class.
	ExpressBuckets, ExpressZones []string
	// TLS, when set, is a local CA (tlsconf.GenerateDev's files). Each child gets its own
	// certificate of it in <DataDir>/tls/<id>.pem: log nodes serve every listener with it
	// and present it to the voters; voters serve RPC and Raft over mutual TLS with it. The
	// supervisor's own calls (Setup, readiness, the functions) present the CA's client
	// certificate, and readiness probes are HTTPS trusting only the CA.
	TLS *tlsconf.DevFiles

	RestartBackoff    time.Duration // first pause before restarting a dead child (250 ms)
	MaxRestartBackoff time.Duration // the pause doubles per quick death up to this (10 s)
	// StableAfter: a child that ran this long before dying restarts after RestartBackoff
	// again (10 s).
	StableAfter time.Duration
	StopTimeout time.Duration // SIGTERM to SIGKILL, per role, on Close (30 s)

	// Setup runs once all sequencers are spawned, before the log nodes start; it must
	// return once the group serves. Default: create namespace "default" through the voters.
	Setup func(ctx context.Context, sequencerRPCs []string) error
	// Ready reports whether a log node serves (default: GET /healthz answers 200). Start
	// returns once every node is ready.
	Ready func(ctx context.Context, httpAddr string) bool

	Out    io.Writer // one line per child start, exit and restart (default io.Discard)
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Sequencers == 0 {
		c.Sequencers = 3
	}
	if c.Nodes == 0 {
		c.Nodes = 2
	}
	if c.SequencerPort == 0 {
		c.SequencerPort = 7070
	}
	if c.RaftPort == 0 {
		c.RaftPort = c.SequencerPort + 1
	}
	if c.HTTPPort == 0 {
		c.HTTPPort = 8080
	}
	if len(c.Zones) == 0 {
		c.Zones = []string{"zone-a", "zone-b"}
	}
	if c.RestartBackoff <= 0 {
		c.RestartBackoff = 250 * time.Millisecond
	}
	if c.MaxRestartBackoff <= 0 {
		c.MaxRestartBackoff = 10 * time.Second
	}
	if c.StableAfter <= 0 {
		c.StableAfter = 10 * time.Second
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = 30 * time.Second
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate checks c after defaults.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...))
	}
	if c.DataDir == "" {
		bad("empty data dir")
	}
	if c.Sequencers < 1 || c.Sequencers > 9 {
		bad("%d sequencers: want 1..9", c.Sequencers)
	}
	if c.Nodes < 1 || c.Nodes > 64 {
		bad("%d log nodes: want 1..64", c.Nodes)
	}
	for name, p := range map[string]int{"sequencer": c.SequencerPort, "raft": c.RaftPort, "http": c.HTTPPort} {
		if p < 1 || p > 65535-2*64 {
			bad("%s port %d out of range", name, p)
		}
	}
	ports := map[int]string{}
	use := func(p int, what string) {
		if prev, ok := ports[p]; ok {
			bad("port %d used by %s and %s", p, prev, what)
		}
		ports[p] = what
	}
	for i := range c.Sequencers {
		use(c.SequencerPort+2*i, fmt.Sprintf("seq-%d rpc", i+1))
		use(c.RaftPort+2*i, fmt.Sprintf("seq-%d raft", i+1))
	}
	for i := range c.Nodes {
		use(c.HTTPPort+i, fmt.Sprintf("node-%d http", i+1))
		if c.JournalPort > 0 && c.Nodes >= 3 {
			use(c.JournalPort+i, fmt.Sprintf("node-%d journal", i+1))
		}
	}
	if c.GRPCPort < -1 || c.GRPCPort > 65535-64 {
		bad("grpc port %d out of range", c.GRPCPort)
	}
	for i := range c.Nodes {
		if c.GRPCPort > 0 {
			use(c.GRPCPort+i, fmt.Sprintf("node-%d grpc", i+1))
		}
	}
	if c.KafkaPort < 0 || c.KafkaPort > 65535-64 {
		bad("kafka port %d out of range", c.KafkaPort)
	}
	for i := range c.Nodes {
		if c.KafkaPort > 0 {
			use(c.KafkaPort+i, fmt.Sprintf("node-%d kafka", i+1))
		}
	}
	for _, z := range c.Zones {
		if z == "" {
			bad("empty zone name")
		}
	}
	return errors.Join(errs...)
}

// Supervisor runs the children and restarts those that die.
type Supervisor struct {
	cfg      Config
	dir      string // absolute DataDir
	seqs     []*child
	nodes    []*child
	mu       sync.Mutex // guards stopping, every child's proc/pid, and the cluster file
	stopping bool
	stopCh   chan struct{}
	wg       sync.WaitGroup
	closeErr error
	once     sync.Once

	// services.go; set by Start, read-only afterwards.
	coordStore *coord.Bolt
	coordSrv   *http.Server
	coordURL   string
	fns        *devcluster.Functions
	fnBucket   objstore.Bucket
	fnMeta     meta.Client
	clusterID  *tlsconf.Source // the CA's client certificate, with TLS
}

// child is one supervised process slot; its process changes across restarts.
type child struct {
	role, id   string
	bin        string
	args       []string
	rpc, raft  string // sequencer
	http, zone string // http: node
	logPath    string
	proc       *proc // nil while down (guarded by Supervisor.mu)
	started    bool  // spawned at least once
	restarts   int
}

type proc struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed when the process has exited and been reaped
}

// Start resolves the binaries, spawns the sequencers, runs Setup, spawns the log nodes and
// returns once every log node is Ready (or ctx ends: then everything started is stopped).
// From then on a child that dies is restarted until Close.
func Start(ctx context.Context, cfg Config) (*Supervisor, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{dir, filepath.Join(dir, "logs"), filepath.Join(dir, "hold")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("supervisor: data dir: %w", err)
		}
	}
	if err := checkShape(dir, cfg.Sequencers); err != nil {
		return nil, err
	}
	if cfg.Bucket == "" {
		cfg.Bucket = filepath.Join(dir, "bucket")
	}
	s := &Supervisor{cfg: cfg, dir: dir, stopCh: make(chan struct{})}
	seqBin, seqPre, how, err := command(cfg.SequencerBin, SequencerSubcommand)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "loam dev: sequencers run %s (%s)\n", seqBin, how)
	lnBin, lnPre, how, err := command(cfg.LognodeBin, LognodeSubcommand)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "loam dev: log nodes run %s (%s)\n", lnBin, how)
	if cfg.TLS != nil {
		if s.clusterID, err = tlsconf.ClusterClient(cfg.TLS.CA, cfg.TLS.ClientCert, cfg.TLS.ClientKey, ""); err != nil {
			return nil, fmt.Errorf("supervisor: tls: %w", err)
		}
		if s.cfg.Ready == nil {
			if s.cfg.Ready, err = httpsReady(cfg.TLS.CA); err != nil {
				return nil, err
			}
		}
	}
	if s.cfg.Ready == nil {
		s.cfg.Ready = HealthzReady
	}
	if s.cfg.Setup == nil {
		s.cfg.Setup = func(ctx context.Context, rpcs []string) error {
			return createDefaultNamespace(ctx, rpcs, s.metaOpts()...)
		}
	}
	cfg = s.cfg
	if err := s.startCoord(); err != nil {
		return nil, err
	}

	var rpcs, peers []string
	for i := range cfg.Sequencers {
		id := fmt.Sprintf("seq-%d", i+1)
		rpc := net.JoinHostPort(cfg.hostOf(id), strconv.Itoa(cfg.SequencerPort+2*i))
		raft := net.JoinHostPort(cfg.hostOf(id), strconv.Itoa(cfg.RaftPort+2*i))
		rpcs = append(rpcs, rpc)
		peers = append(peers, id+"="+raft)
		s.seqs = append(s.seqs, &child{role: RoleSequencer, id: id, bin: seqBin, rpc: rpc, raft: raft, zone: cfg.Zones[i%len(cfg.Zones)]})
	}
	for i, c := range s.seqs {
		// Every voter bootstraps the same configuration (hashicorp/raft's recommended way):
		// any of them may start first. Bootstrap is ignored once the data dir holds state.
		others := slices.Concat(peers[:i], peers[i+1:])
		c.args = append(slices.Clone(seqPre), "--id", c.id, "--data-dir", filepath.Join(dir, c.id), "--rpc-addr", c.rpc, "--raft-addr", c.raft, "--bootstrap")
		if len(others) > 0 {
			c.args = append(c.args, "--peers", strings.Join(others, ","))
		}
		if cfg.TLS != nil {
			cert, key, err := s.issueCert(c, cfg.hostOf(c.id))
			if err != nil {
				s.closeCoord()
				return nil, err
			}
			c.args = append(c.args, "--tls-cert", cert, "--tls-key", key, "--cluster-ca", cfg.TLS.CA)
		}
		// Voters on one machine: loopback Raft timeouts (sequencer-svc's defaults are for
		// zones); SequencerArgs come after, so they may override them.
		c.args = append(c.args, "--heartbeat-timeout", "300ms", "--election-timeout", "300ms", "--leader-lease-timeout", "150ms")
		c.args = append(c.args, cfg.SequencerArgs...)
	}
	for i := range cfg.Nodes {
		id := fmt.Sprintf("node-%d", i+1)
		c := &child{role: RoleNode, id: id, bin: lnBin, zone: cfg.Zones[i%len(cfg.Zones)],
			http: net.JoinHostPort(cfg.hostOf(id), strconv.Itoa(cfg.HTTPPort+i))}
		c.args = append(slices.Clone(lnPre), "--id", id, "--zone", c.zone, "--http-addr", c.http, "--bucket", cfg.Bucket,
			"--sequencer", strings.Join(rpcs, ","), "--cache-dir", filepath.Join(dir, id, "cache"))
		if s.coordURL != "" {
			c.args = append(c.args, "--coord", s.coordURL)
		}
		if cfg.TLS != nil {
			cert, key, err := s.issueCert(c, cfg.hostOf(id))
			if err != nil {
				s.closeCoord()
				return nil, err
			}
			c.args = append(c.args, "--tls-cert", cert, "--tls-key", key, "--cluster-ca", cfg.TLS.CA)
		}
		if cfg.FlushInterval > 0 {
			c.args = append(c.args, "--flush-interval", cfg.FlushInterval.String())
		}
		switch {
		case cfg.GRPCPort > 0:
			c.args = append(c.args, "--grpc-addr", net.JoinHostPort(cfg.hostOf(id), strconv.Itoa(cfg.GRPCPort+i)))
		case cfg.GRPCPort == 0:
			c.args = append(c.args, "--grpc-addr", net.JoinHostPort(cfg.hostOf(id), "0"))
		default:
			c.args = append(c.args, "--grpc-addr", "")
		}
		c.args = append(c.args, "--otlp-http-addr", portAddr(cfg.Host, cfg.OTLPHTTPPort, i), "--otlp-grpc-addr", portAddr(cfg.Host, cfg.OTLPGRPCPort, i))
		if cfg.KafkaPort > 0 {
			c.args = append(c.args, "--kafka-addr", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.KafkaPort+i)))
			if !cfg.NodeAuth {
				c.args = append(c.args, "--kafka-no-sasl") // nodes checking keys require SASL on Kafka too
			}
		}
		if !cfg.NodeAuth {
			c.args = append(c.args, "--insecure-no-auth")
		}
		c.args = append(c.args, journalArgs(cfg, dir, i)...) // journal.go
		c.args = append(c.args, cfg.LognodeArgs...)
		s.nodes = append(s.nodes, c)
	}
	known := map[string]bool{}
	for _, c := range append(slices.Clone(s.seqs), s.nodes...) {
		c.logPath = filepath.Join(dir, "logs", c.id+".log")
		c.args = append(c.args, cfg.ChildArgs[c.id]...)
		known[c.id] = true
	}
	for _, m := range []map[string]string{cfg.ChildHosts, cfg.ChildNetns, argsIDs(cfg.ChildArgs)} {
		for id := range m {
			if !known[id] {
				s.closeCoord()
				return nil, fmt.Errorf("supervisor: child settings for %q: no such child (seq-1.., node-1..)", id)
			}
		}
	}

	fail := func(err error) (*Supervisor, error) {
		cctx, cancel := context.WithTimeout(context.Background(), cfg.StopTimeout)
		defer cancel()
		s.Close(cctx)
		return nil, err
	}
	for _, c := range s.seqs {
		s.launch(c)
	}
	if err := cfg.Setup(ctx, rpcs); err != nil {
		return fail(fmt.Errorf("supervisor: setup (see %s): %w", filepath.Join(dir, "logs"), err))
	}
	if err := s.startFunctions(ctx, rpcs); err != nil {
		return fail(err)
	}
	for _, c := range s.nodes {
		s.launch(c)
	}
	for _, c := range s.nodes {
		for !cfg.Ready(ctx, c.http) {
			select {
			case <-ctx.Done():
				return fail(fmt.Errorf("supervisor: log node %s not ready (see %s): %w", c.id, c.logPath, ctx.Err()))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return s, nil
}

// votersFile records the voter count a data dir was made with.
const votersFile = "voters"

// checkShape refuses a data dir made with another number of voters: the Raft group's
// membership is fixed at bootstrap (there is no join), so a new voter would start a group
// of its own and a missing one would leave the group short. The first start records n.
func checkShape(dir string, n int) error {
	if _, err := os.Stat(filepath.Join(dir, "sequencer", "raft.db")); err == nil {
		return fmt.Errorf("%w: %s holds a single-process `loam dev` cluster; use another --data-dir", ErrConfig, dir)
	}
	path := filepath.Join(dir, votersFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return writeFileAtomic(path, []byte(strconv.Itoa(n)+"\n"))
	}
	if err != nil {
		return err
	}
	have, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%w: %s: %q is not a voter count", ErrConfig, path, b)
	}
	if have != n {
		return fmt.Errorf("%w: %s was made with %d sequencers; start it with --sequencers %d or use another --data-dir",
			ErrConfig, dir, have, have)
	}
	return nil
}

// HoldPath is the file that keeps child id down: while it exists, the supervisor does not
// restart the child once it exits (it does not stop a running one).
func (s *Supervisor) HoldPath(id string) string { return HoldPath(s.dir, id) }

// HoldPath is <dataDir>/hold/<id>; see Supervisor.HoldPath.
func HoldPath(dataDir, id string) string { return filepath.Join(dataDir, "hold", id) }

// launch spawns c's first process now (so children start, and are printed, in order)
// and supervises it from then on.
func (s *Supervisor) launch(c *child) {
	p, err := s.spawn(c)
	s.wg.Add(1)
	go s.supervise(c, p, err)
}

// supervise watches c's process p (or the error that kept it from starting) and restarts
// it with backoff whenever it dies, until Close.
func (s *Supervisor) supervise(c *child, p *proc, err error) {
	defer s.wg.Done()
	delay := s.cfg.RestartBackoff
	for {
		if p == nil && err == nil {
			return // stopping
		}
		var ran time.Duration
		if err != nil {
			fmt.Fprintf(s.cfg.Out, "loam dev: %s %s failed to start: %v\n", c.role, c.id, err)
		} else {
			<-p.done
			ran = time.Since(p.started)
			s.mu.Lock()
			c.proc = nil
			stopping := s.stopping
			if !stopping {
				s.writeFileLocked()
			}
			s.mu.Unlock()
			if stopping {
				return
			}
			fmt.Fprintf(s.cfg.Out, "loam dev: %s %s (pid %d) exited after %s: %v%s\n", c.role, c.id, p.cmd.Process.Pid,
				ran.Round(time.Millisecond), exitText(p.cmd), lastLine(c.logPath))
		}
		if ran >= s.cfg.StableAfter {
			delay = s.cfg.RestartBackoff
		}
		if !s.held(c.id) {
			fmt.Fprintf(s.cfg.Out, "loam dev: restarting %s %s in %s\n", c.role, c.id, delay)
			if !s.sleep(delay) {
				return
			}
			delay = min(2*delay, s.cfg.MaxRestartBackoff)
		}
		announced := false
		for s.held(c.id) {
			if !announced {
				fmt.Fprintf(s.cfg.Out, "loam dev: %s %s held down by %s\n", c.role, c.id, s.HoldPath(c.id))
				announced = true
			}
			if !s.sleep(200 * time.Millisecond) {
				return
			}
		}
		p, err = s.spawn(c)
	}
}

func (s *Supervisor) held(id string) bool {
	_, err := os.Stat(s.HoldPath(id))
	return err == nil
}

// sleep waits d unless Close begins (false).
func (s *Supervisor) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.stopCh:
		return false
	case <-t.C:
		return true
	}
}

// spawn starts c's process; (nil, nil) means the supervisor is stopping.
func (s *Supervisor) spawn(c *child) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, nil
	}
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(c.bin, c.args...)
	if ns := s.cfg.ChildNetns[c.id]; ns != "" {
		// ip execs the child in the namespace: same pid, same parent-death signal.
		cmd = exec.Command("ip", append([]string{"netns", "exec", ns, c.bin}, c.args...)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(childEnv(os.Environ(), s.cfg.DropEnv), s.cfg.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a terminal's Ctrl-C reaches only the supervisor, which stops
		// the children in order (log nodes flush through the sequencers first).
		Setpgid: true,
		// A supervisor that dies (even by SIGKILL) takes its children with it.
		Pdeathsig: syscall.SIGKILL,
	}
	fmt.Fprintf(logf, "--- loam dev supervisor: starting %s %s: %s %s\n", c.role, c.id, c.bin, strings.Join(c.args, " "))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, started: time.Now(), done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	c.proc = p
	if c.started {
		c.restarts++
	}
	c.started = true
	s.writeFileLocked()
	switch c.role {
	case RoleSequencer:
		fmt.Fprintf(s.cfg.Out, "loam dev: sequencer %s pid %d rpc %s raft %s (log %s)\n", c.id, cmd.Process.Pid, c.rpc, c.raft, c.logPath)
	default:
		fmt.Fprintf(s.cfg.Out, "loam dev: node %s pid %d http http://%s zone %s (log %s)\n", c.id, cmd.Process.Pid, c.http, c.zone, c.logPath)
	}
	return p, nil
}

func exitText(cmd *exec.Cmd) string {
	if st := cmd.ProcessState; st != nil {
		return st.String()
	}
	return "unknown"
}

// lastLine returns "; last log line: …" from the child's log, or "".
func lastLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(0, st.Size()-4096)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	l := string(bytes.TrimSpace(lines[len(lines)-1]))
	if l == "" {
		return ""
	}
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return "; last log line: " + l
}

// File returns the cluster description as cluster.json holds it now.
func (s *Supervisor) File() ClusterFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fileLocked()
}

func (s *Supervisor) fileLocked() ClusterFile {
	cf := ClusterFile{Sequencers: []SequencerInfo{}, Nodes: []NodeInfo{}, Coord: s.coordURL}
	if s.cfg.TLS != nil {
		cf.CA = s.cfg.TLS.CA
	}
	for _, c := range s.seqs {
		cf.Sequencers = append(cf.Sequencers, SequencerInfo{ID: c.id, PID: c.pid(), RPC: c.rpc, Raft: c.raft, Zone: c.zone})
	}
	for _, c := range s.nodes {
		cf.Nodes = append(cf.Nodes, NodeInfo{ID: c.id, PID: c.pid(), HTTP: c.http, Zone: c.zone})
	}
	return cf
}

func (c *child) pid() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.cmd.Process.Pid
}

func (s *Supervisor) writeFileLocked() {
	b, err := json.MarshalIndent(s.fileLocked(), "", "  ")
	if err == nil {
		err = writeFileAtomic(filepath.Join(s.dir, FileName), append(b, '\n'))
	}
	if err != nil {
		s.cfg.Logger.Error("write cluster file", "err", err)
	}
}

// Restarts reports how many times child id was restarted.
func (s *Supervisor) Restarts(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range append(slices.Clone(s.seqs), s.nodes...) {
		if c.id == id {
			return c.restarts
		}
	}
	return 0
}

// DataDir is the absolute data directory.
func (s *Supervisor) DataDir() string { return s.dir }

// PrintBanner writes what runs where.
func (s *Supervisor) PrintBanner(w io.Writer) {
	cf := s.File()
	fmt.Fprintf(w, "loam dev: %d sequencers (Raft, %d voters) and %d log nodes, one process each\n", len(cf.Sequencers), len(cf.Sequencers), len(cf.Nodes))
	for _, q := range cf.Sequencers {
		fmt.Fprintf(w, "  sequencer %-8s pid %-7d rpc %s  raft %s\n", q.ID, q.PID, q.RPC, q.Raft)
	}
	for _, n := range cf.Nodes {
		fmt.Fprintf(w, "  node      %-8s pid %-7d %s  zone %s\n", n.ID, n.PID, cf.NodeURL(n), n.Zone)
	}
	fmt.Fprintf(w, "  bucket            %s\n", s.cfg.Bucket)
	if s.coordURL != "" {
		fmt.Fprintf(w, "  coordination      %s (%s; the node registry: GET /v1/cluster/nodes)\n", s.coordURL, filepath.Join(s.dir, CoordFile))
	}
	if s.fns != nil {
		fmt.Fprintf(w, "  functions         %s\n", s.fns.Describe())
	}
	fmt.Fprintf(w, "  cluster file      %s (rewritten when a child restarts)\n", filepath.Join(s.dir, FileName))
	fmt.Fprintf(w, "  logs              %s\n", filepath.Join(s.dir, "logs"))
	if t := s.cfg.TLS; t != nil && len(cf.Nodes) > 0 {
		n := cf.Nodes[0]
		fmt.Fprintf(w, "TLS: a local CA in %s issued every child its certificate (%s); trust %s:\n", filepath.Dir(t.CA), filepath.Join(s.dir, "tls"), t.CA)
		fmt.Fprintf(w, "  curl --cacert %s %s/healthz\n", t.CA, cf.NodeURL(n))
		if s.cfg.GRPCPort > 0 {
			fmt.Fprintf(w, "  grpcurl -cacert %s %s list\n", t.CA, net.JoinHostPort(s.cfg.hostOf(n.ID), strconv.Itoa(s.cfg.GRPCPort)))
		}
		fmt.Fprintf(w, "  export LOAM_CA_CERT=%s LOAM_SERVER=%s   (the loam CLI)\n", t.CA, cf.NodeURL(n))
		fmt.Fprintf(w, "  the voters take mutual TLS only: loam sequencer members --cluster %s --cluster-ca %s --tls-cert %s --tls-key %s\n",
			cf.Sequencers[0].RPC, t.CA, t.ClientCert, t.ClientKey)
	}
	fmt.Fprintf(w, "A child that dies is restarted; `touch %s` keeps it down once it exits.\n", s.HoldPath("<id>"))
}

// Close stops the children gracefully: SIGTERM to the log nodes (they flush buffered
// writes through the sequencers), SIGKILL to those still running after StopTimeout or
// when ctx ends; then the same for the sequencers. No child is restarted once Close
// begins. It is safe to call more than once.
func (s *Supervisor) Close(ctx context.Context) error {
	s.once.Do(func() {
		s.mu.Lock()
		s.stopping = true
		close(s.stopCh)
		s.mu.Unlock()
		// The functions first: they call the voters and write the bucket.
		errs := []error{s.closeFunctions()}
		for _, group := range [][]*child{s.nodes, s.seqs} {
			errs = append(errs, s.stopGroup(ctx, group))
		}
		s.wg.Wait()
		errs = append(errs, s.closeCoord())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func (s *Supervisor) stopGroup(ctx context.Context, group []*child) error {
	s.mu.Lock()
	var procs []*proc
	var ids []string
	for _, c := range group {
		if c.proc != nil {
			procs = append(procs, c.proc)
			ids = append(ids, c.id)
		}
	}
	s.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	timer := time.NewTimer(s.cfg.StopTimeout)
	defer timer.Stop()
	var killed []string
	for i, p := range procs {
		select {
		case <-p.done:
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		// Out of patience: kill this one and every other one still running.
		for j := i; j < len(procs); j++ {
			select {
			case <-procs[j].done:
			default:
				_ = procs[j].cmd.Process.Kill()
				killed = append(killed, ids[j])
			}
		}
		for j := i; j < len(procs); j++ {
			<-procs[j].done
		}
		break
	}
	if len(killed) > 0 {
		return fmt.Errorf("supervisor: killed %s after SIGTERM did not stop them", strings.Join(killed, ", "))
	}
	return nil
}

// CreateDefaultNamespace is the default Config.Setup: it creates namespace "default"
// through the voters, retrying until the group has elected a leader or ctx ends.
func CreateDefaultNamespace(ctx context.Context, rpcs []string) error {
	return createDefaultNamespace(ctx, rpcs)
}

func createDefaultNamespace(ctx context.Context, rpcs []string, opts ...metagrpc.Option) error {
	mc, err := metagrpc.Dial(ctx, rpcs, opts...)
	if err != nil {
		return err
	}
	defer mc.Close()
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := mc.CreateNamespace(cctx, meta.DefaultNS)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create namespace %q: %w (last error: %v)", meta.DefaultNS, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// HealthzReady is the default Config.Ready: GET http://addr/healthz answers 200.
func HealthzReady(ctx context.Context, addr string) bool {
	return probe(ctx, http.DefaultClient, "http://"+addr+"/healthz")
}

// BucketURL turns `loam dev`'s bucket flags into the URL lognode-svc's --bucket takes:
// "" is the directory <dataDir>/bucket; s3://NAME[/PREFIX] gains endpoint, region, path
// style (with an endpoint) and bucket creation.
func BucketURL(bucket, endpoint, region, dataDir string) (string, error) {
	if bucket == "" {
		dir, err := filepath.Abs(filepath.Join(dataDir, "bucket"))
		return dir, err
	}
	rest, ok := strings.CutPrefix(bucket, "s3://")
	name, _, _ := strings.Cut(rest, "/")
	if !ok || name == "" || strings.Contains(rest, "?") {
		return "", fmt.Errorf("%w: bucket %q: want s3://NAME[/PREFIX]", ErrConfig, bucket)
	}
	q := url.Values{}
	if endpoint != "" {
		q.Set("endpoint", endpoint)
		q.Set("path_style", "true")
	}
	if region != "" {
		q.Set("region", region)
	}
	q.Set("create_bucket", "true")
	return bucket + "?" + q.Encode(), nil
}

// portAddr is host:port+i, or "" when port is 0 (not served).
func portAddr(host string, port, i int) string {
	if port <= 0 {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(port+i))
}

// hostOf is the address child id binds to: ChildHosts[id], else Host.
func (c *Config) hostOf(id string) string {
	if h := c.ChildHosts[id]; h != "" {
		return h
	}
	return c.Host
}

func argsIDs(m map[string][]string) map[string]string {
	out := map[string]string{}
	for id := range m {
		out[id] = ""
	}
	return out
}
