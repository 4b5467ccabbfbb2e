package supervisor

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/tlsconf"
)

// The test binary doubles as the children: with LOAM_SUPERVISOR_FAKE set it is a fake
// sequencer-svc or lognode-svc that records its arguments and obeys its mode.
func TestMain(m *testing.M) {
	if mode := os.Getenv("LOAM_SUPERVISOR_FAKE"); mode != "" {
		fakeChild(mode)
		return
	}
	os.Exit(m.Run())
}

// fakeChild writes its command line to $LOAM_FAKE_DIR/<id>.args (one line per start)
// and then: "ok" exits 0 on SIGTERM; "stubborn" ignores SIGTERM; "crash" exits 3 at once.
func fakeChild(mode string) {
	id := ""
	for i, a := range os.Args {
		if a == "--id" && i+1 < len(os.Args) {
			id = os.Args[i+1]
		}
	}
	f, err := os.OpenFile(filepath.Join(os.Getenv("LOAM_FAKE_DIR"), id+".args"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		os.Exit(5)
	}
	fmt.Fprintf(f, "%d %s\n", os.Getpid(), strings.Join(os.Args[1:], " "))
	f.Close()
	if v, ok := os.LookupEnv("LOAM_FAKE_PROBE"); ok {
		v += " clock-offset=" + os.Getenv("LOAM_CLOCK_OFFSET")
		os.WriteFile(filepath.Join(os.Getenv("LOAM_FAKE_DIR"), id+".probe"), []byte(v), 0o644)
	}
	switch mode {
	case "crash":
		os.Exit(3)
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		select {}
	default:
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		<-ch
		os.Exit(0)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func fakeConfig(t *testing.T, mode string) (Config, string, *syncBuf) {
	t.Helper()
	fakeDir := t.TempDir()
	out := &syncBuf{}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		DataDir: t.TempDir(), Sequencers: 3, Nodes: 2,
		SequencerBin: exe, LognodeBin: exe, SequencerArgs: []string{"--fast-raft"},
		Env:            []string{"LOAM_SUPERVISOR_FAKE=" + mode, "LOAM_FAKE_DIR=" + fakeDir},
		RestartBackoff: 20 * time.Millisecond, MaxRestartBackoff: 80 * time.Millisecond,
		StopTimeout: 2 * time.Second,
		Setup:       func(ctx context.Context, rpcs []string) error { return nil },
		Ready: func(ctx context.Context, addr string) bool {
			// Ready once the node's fake wrote its arguments.
			ents, _ := os.ReadDir(fakeDir)
			for _, e := range ents {
				b, _ := os.ReadFile(filepath.Join(fakeDir, e.Name()))
				if strings.Contains(string(b), "--http-addr "+addr) {
					return true
				}
			}
			return false
		},
		Out: out,
	}, fakeDir, out
}

// argLines returns the recorded command lines of child id, one per start.
func argLines(t *testing.T, fakeDir, id string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fakeDir, id+".args"))
	if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
		return nil // not there, or being written (a line is whole once its newline is)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func waitFor(t *testing.T, what string, cond func() bool, out ...*syncBuf) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for _, o := range out {
				t.Log(o)
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

func TestStartLayoutAndClusterFile(t *testing.T) {
	cfg, fakeDir, out := fakeConfig(t, "ok")
	cfg.SequencerPort, cfg.RaftPort, cfg.HTTPPort = 17070, 17071, 18080
	cfg.FlushInterval = 100 * time.Millisecond
	cfg.Bucket = "s3://b/p?endpoint=http://x"
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())

	cf, err := ReadClusterFile(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	wantSeq := []SequencerInfo{
		{ID: "seq-1", RPC: "127.0.0.1:17070", Raft: "127.0.0.1:17071", Zone: "zone-a"},
		{ID: "seq-2", RPC: "127.0.0.1:17072", Raft: "127.0.0.1:17073", Zone: "zone-b"},
		{ID: "seq-3", RPC: "127.0.0.1:17074", Raft: "127.0.0.1:17075", Zone: "zone-a"},
	}
	wantNodes := []NodeInfo{{ID: "node-1", HTTP: "127.0.0.1:18080", Zone: "zone-a"}, {ID: "node-2", HTTP: "127.0.0.1:18081", Zone: "zone-b"}}
	if len(cf.Sequencers) != 3 || len(cf.Nodes) != 2 {
		t.Fatalf("cluster file %+v", cf)
	}
	for i, q := range cf.Sequencers {
		if !alive(q.PID) {
			t.Errorf("%s pid %d not running", q.ID, q.PID)
		}
		q.PID = 0
		if q != wantSeq[i] {
			t.Errorf("sequencer %d = %+v, want %+v", i, q, wantSeq[i])
		}
	}
	for i, n := range cf.Nodes {
		if !alive(n.PID) {
			t.Errorf("%s pid %d not running", n.ID, n.PID)
		}
		n.PID = 0
		if n != wantNodes[i] {
			t.Errorf("node %d = %+v, want %+v", i, n, wantNodes[i])
		}
	}

	dir, _ := filepath.Abs(cfg.DataDir)
	waitFor(t, "seq-2 started", func() bool { return len(argLines(t, fakeDir, "seq-2")) == 1 })
	seq2 := argLines(t, fakeDir, "seq-2")
	want := fmt.Sprintf("--id seq-2 --data-dir %s/seq-2 --rpc-addr 127.0.0.1:17072 --raft-addr 127.0.0.1:17073 --bootstrap --peers seq-1=127.0.0.1:17071,seq-3=127.0.0.1:17075 --heartbeat-timeout 300ms --election-timeout 300ms --leader-lease-timeout 150ms --fast-raft", dir)
	if len(seq2) != 1 || !strings.HasSuffix(seq2[0], " "+want) {
		t.Errorf("seq-2 started with %q, want %q", seq2, want)
	}
	node2 := argLines(t, fakeDir, "node-2")
	want = fmt.Sprintf("--id node-2 --zone zone-b --http-addr 127.0.0.1:18081 --bucket s3://b/p?endpoint=http://x --sequencer 127.0.0.1:17070,127.0.0.1:17072,127.0.0.1:17074 --cache-dir %s/node-2/cache --coord %s --flush-interval 100ms --grpc-addr 127.0.0.1:0 --otlp-http-addr  --otlp-grpc-addr  --insecure-no-auth", dir, s.CoordURL())
	if len(node2) != 1 || !strings.HasSuffix(node2[0], " "+want) {
		t.Errorf("node-2 started with %q, want %q", node2, want)
	}
	if !strings.Contains(out.String(), "sequencer seq-1 pid ") || !strings.Contains(out.String(), "node node-2 pid ") {
		t.Errorf("output lacks start lines:\n%s", out)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, q := range cf.Sequencers {
		if alive(q.PID) {
			t.Errorf("%s still running after Close", q.ID)
		}
	}
}

func TestRestartRewritesClusterFile(t *testing.T) {
	cfg, fakeDir, out := fakeConfig(t, "ok")
	cfg.SequencerPort, cfg.RaftPort, cfg.HTTPPort = 17170, 17171, 18180
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	waitFor(t, "seq-2 started", func() bool { return len(argLines(t, fakeDir, "seq-2")) == 1 })
	before, _ := ReadClusterFile(cfg.DataDir)
	old := before.Sequencers[1].PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var now ClusterFile
	waitFor(t, "seq-2 restarted in cluster.json", func() bool {
		now, err = ReadClusterFile(cfg.DataDir)
		return err == nil && now.Sequencers[1].PID != 0 && now.Sequencers[1].PID != old
	})
	if !alive(now.Sequencers[1].PID) {
		t.Fatalf("new seq-2 pid %d not running", now.Sequencers[1].PID)
	}
	waitFor(t, "seq-2 started twice", func() bool { return len(argLines(t, fakeDir, "seq-2")) == 2 }, out)
	if s.Restarts("seq-2") != 1 || s.Restarts("seq-1") != 0 {
		t.Fatalf("restarts seq-2 %d seq-1 %d", s.Restarts("seq-2"), s.Restarts("seq-1"))
	}
	for i, q := range now.Sequencers {
		if i != 1 && q.PID != before.Sequencers[i].PID {
			t.Fatalf("%s pid changed %d -> %d", q.ID, before.Sequencers[i].PID, q.PID)
		}
	}
	if !strings.Contains(out.String(), "exited after") || !strings.Contains(out.String(), "signal: killed") {
		t.Fatalf("no exit line:\n%s", out)
	}
	// A clean exit the supervisor did not ask for is restarted too.
	node := now.Nodes[0].PID
	syscall.Kill(node, syscall.SIGTERM)
	waitFor(t, "node-1 restarted", func() bool {
		now, err = ReadClusterFile(cfg.DataDir)
		return err == nil && now.Nodes[0].PID != 0 && now.Nodes[0].PID != node
	})
}

func TestHoldKeepsChildDown(t *testing.T) {
	cfg, fakeDir, _ := fakeConfig(t, "ok")
	cfg.SequencerPort, cfg.RaftPort, cfg.HTTPPort = 17270, 17271, 18280
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := os.WriteFile(s.HoldPath("seq-3"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "seq-3 started", func() bool { return len(argLines(t, fakeDir, "seq-3")) == 1 })
	cf, _ := ReadClusterFile(cfg.DataDir)
	syscall.Kill(cf.Sequencers[2].PID, syscall.SIGKILL)
	waitFor(t, "seq-3 pid 0 in cluster.json", func() bool {
		cf, err = ReadClusterFile(cfg.DataDir)
		return err == nil && cf.Sequencers[2].PID == 0
	})
	time.Sleep(300 * time.Millisecond) // many backoffs
	if n := len(argLines(t, fakeDir, "seq-3")); n != 1 {
		t.Fatalf("held seq-3 started %d times", n)
	}
	os.Remove(s.HoldPath("seq-3"))
	waitFor(t, "seq-3 back", func() bool {
		cf, err = ReadClusterFile(cfg.DataDir)
		return err == nil && alive(cf.Sequencers[2].PID)
	})
}

func TestCloseKillsStubbornChildren(t *testing.T) {
	cfg, _, _ := fakeConfig(t, "stubborn")
	cfg.SequencerPort, cfg.RaftPort, cfg.HTTPPort = 17370, 17371, 18380
	cfg.StopTimeout = 300 * time.Millisecond
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cf := s.File()
	start := time.Now()
	err = s.Close(context.Background())
	if err == nil || !strings.Contains(err.Error(), "node-1") || !strings.Contains(err.Error(), "seq-3") {
		t.Fatalf("Close = %v, want the killed children named", err)
	}
	if d := time.Since(start); d < 600*time.Millisecond || d > 5*time.Second {
		t.Fatalf("Close took %s, want two stop timeouts", d)
	}
	for _, q := range cf.Sequencers {
		if alive(q.PID) {
			t.Fatalf("%s survived", q.ID)
		}
	}
	if err2 := s.Close(context.Background()); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("second Close = %v", err2)
	}
}

func TestCrashLoopBacksOffAndStartFailsWithCtx(t *testing.T) {
	cfg, fakeDir, out := fakeConfig(t, "crash")
	cfg.SequencerPort, cfg.RaftPort, cfg.HTTPPort = 17470, 17471, 18480
	cfg.Sequencers, cfg.Nodes = 1, 1
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cfg.Ready = func(context.Context, string) bool { return false }
	_, err := Start(ctx, cfg)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "node-1") {
		t.Fatalf("Start = %v", err)
	}
	// The pause doubles per quick death up to MaxRestartBackoff: 20, 40, 80, 80 ms.
	var pauses []string
	for _, l := range strings.Split(out.String(), "\n") {
		if p, ok := strings.CutPrefix(l, "loam dev: restarting sequencer seq-1 in "); ok {
			pauses = append(pauses, p)
		}
	}
	if len(pauses) < 4 || !slices.Equal(pauses[:4], []string{"20ms", "40ms", "80ms", "80ms"}) {
		t.Fatalf("restart pauses %v, want 20ms 40ms 80ms 80ms ...:\n%s", pauses, out)
	}
	if n := len(argLines(t, fakeDir, "seq-1")); n < len(pauses) {
		t.Fatalf("seq-1 started %d times for %d restarts", n, len(pauses))
	}
	if !strings.Contains(out.String(), "exit status 3") {
		t.Fatalf("no exit status in output:\n%s", out)
	}
}

func TestValidateAndShape(t *testing.T) {
	for _, c := range []Config{
		{},
		{DataDir: "d", Sequencers: 10},
		{DataDir: "d", Nodes: -1},
		{DataDir: "d", SequencerPort: 8080}, // node-1 http 8080 clashes
		{DataDir: "d", SequencerPort: 9000, RaftPort: 9002}, // raft 9002 = seq-2 rpc
		{DataDir: "d", Zones: []string{"a", ""}},            // empty zone
		{DataDir: "d", HTTPPort: 70000},                     // out of range
		{DataDir: "d", HTTPPort: 7071},                      // http on seq-1 raft port
	} {
		c.defaults()
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig", c, err)
		}
	}
	ok := Config{DataDir: "d"}
	ok.defaults()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	if err := checkShape(dir, 3); err != nil {
		t.Fatal(err)
	}
	if err := checkShape(dir, 3); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 5} {
		if err := checkShape(dir, n); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--sequencers 3") {
			t.Errorf("checkShape(%d) = %v", n, err)
		}
	}
	os.WriteFile(filepath.Join(dir, votersFile), []byte("x\n"), 0o644)
	if err := checkShape(dir, 3); !errors.Is(err, ErrConfig) {
		t.Errorf("garbled voters file: %v", err)
	}
	single := t.TempDir()
	os.MkdirAll(filepath.Join(single, "sequencer"), 0o755)
	os.WriteFile(filepath.Join(single, "sequencer", "raft.db"), nil, 0o644)
	if err := checkShape(single, 3); !errors.Is(err, ErrConfig) {
		t.Errorf("single-process data dir accepted: %v", err)
	}
}

func TestBucketURL(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		bucket, endpoint, region, want string
		bad                            bool
	}{
		{"", "", "", filepath.Join(dir, "bucket"), false},
		{"s3://b", "", "", "s3://b?create_bucket=true", false},
		{"s3://b/pre/fix", "http://127.0.0.1:9000", "eu-west-1", "s3://b/pre/fix?create_bucket=true&endpoint=http%3A%2F%2F127.0.0.1%3A9000&path_style=true&region=eu-west-1", false},
		{"b", "", "", "", true},
		{"s3://", "", "", "", true},
		{"s3:///p", "", "", "", true},
		{"s3://b?x=1", "", "", "", true},
	} {
		got, err := BucketURL(tc.bucket, tc.endpoint, tc.region, dir)
		if tc.bad {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("BucketURL(%q) = %q, %v; want ErrConfig", tc.bucket, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("BucketURL(%q, %q, %q) = %q, %v; want %q", tc.bucket, tc.endpoint, tc.region, got, err, tc.want)
		}
	}
}

func TestReadClusterFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadClusterFile(dir); !errors.Is(err, ErrClusterFile) {
		t.Fatalf("missing file: %v", err)
	}
	for _, body := range []string{
		`{`,
		`{"sequencers":[{"id":"seq-1","pid":1,"rpc":"","raft":"x"}],"nodes":[]}`,
		`{"sequencers":[],"nodes":[{"id":"","pid":1,"http":"x"}]}`,
		`{"sequencers":[{"id":"seq-1","pid":-1,"rpc":"a","raft":"b"}]}`,
	} {
		if err := writeFileAtomic(filepath.Join(dir, FileName), []byte(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadClusterFile(dir); !errors.Is(err, ErrClusterFile) {
			t.Errorf("ReadClusterFile(%s) = %v, want ErrClusterFile", body, err)
		}
	}
	good := `{"sequencers":[{"id":"seq-1","pid":12,"rpc":"a:1","raft":"a:2"}],"nodes":[{"id":"node-1","pid":0,"http":"a:3","zone":"z"}]}`
	writeFileAtomic(filepath.Join(dir, FileName), []byte(good))
	cf, err := ReadClusterFile(dir)
	if err != nil || cf.Sequencers[0].PID != 12 || cf.Nodes[0].Zone != "z" {
		t.Fatalf("%+v %v", cf, err)
	}
	ents, _ := os.ReadDir(dir)
	if names := slices.Collect(func(yield func(string) bool) {
		for _, e := range ents {
			if !yield(e.Name()) {
				return
			}
		}
	}); len(names) != 1 {
		t.Fatalf("temporary files left: %v", names)
	}
}

func TestChildrenRunThisExecutableBySubcommand(t *testing.T) {
	cfg, fakeDir, out := fakeConfig(t, "ok")
	cfg.SequencerBin, cfg.LognodeBin = "", ""
	cfg.Sequencers, cfg.Nodes = 1, 1
	cfg.SequencerPort, cfg.RaftPort, cfg.HTTPPort = 17570, 17571, 18580
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	exe, _ := os.Executable()
	for id, sub := range map[string]string{"seq-1": SequencerSubcommand, "node-1": LognodeSubcommand} {
		waitFor(t, id+" started", func() bool { return len(argLines(t, fakeDir, id)) == 1 })
		// The fake records os.Args[1:]: the subcommand comes first.
		if l := argLines(t, fakeDir, id)[0]; !strings.Contains(l, " "+sub+" --id "+id+" ") {
			t.Errorf("%s started with %q, want %q first", id, l, sub)
		}
	}
	if !strings.Contains(out.String(), "sequencers run "+exe+" (this executable's sequencer subcommand)") {
		t.Errorf("output lacks the command line:\n%s", out)
	}
}

func TestTLSGivesEveryChildItsCertificate(t *testing.T) {
	cfg, fakeDir, _ := fakeConfig(t, "ok")
	cfg.SequencerPort, cfg.RaftPort, cfg.HTTPPort = 17670, 17671, 18680
	files, err := tlsconf.GenerateDev(filepath.Join(cfg.DataDir, "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS = &files
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	dir, _ := filepath.Abs(cfg.DataDir)
	if cf := s.File(); cf.CA != files.CA || cf.NodeURL(cf.Nodes[0]) != "https://127.0.0.1:18680" {
		t.Fatalf("cluster file CA %q node URL %q", cf.CA, cf.NodeURL(cf.Nodes[0]))
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(files.CA)
	pool.AppendCertsFromPEM(caPEM)
	for _, id := range []string{"seq-1", "seq-2", "seq-3", "node-1", "node-2"} {
		waitFor(t, id+" started", func() bool { return len(argLines(t, fakeDir, id)) == 1 })
		cert, key := filepath.Join(dir, "tls", id+".pem"), filepath.Join(dir, "tls", id+"-key.pem")
		want := "--tls-cert " + cert + " --tls-key " + key + " --cluster-ca " + files.CA
		if l := argLines(t, fakeDir, id)[0]; !strings.Contains(l, want) {
			t.Errorf("%s started with %q, want %q", id, l, want)
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		leaf, _ := x509.ParseCertificate(pair.Certificate[0])
		if leaf.Subject.CommonName != "loam dev "+id {
			t.Errorf("%s: certificate of %q", id, leaf.Subject.CommonName)
		}
		for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
				t.Errorf("%s: %v", id, err)
			}
		}
	}
}

func TestDropEnv(t *testing.T) {
	cfg, fakeDir, _ := fakeConfig(t, "ok")
	cfg.SequencerPort, cfg.RaftPort, cfg.HTTPPort = 17770, 17771, 18780
	cfg.Sequencers, cfg.Nodes = 1, 1
	t.Setenv("LOAM_FAKE_PROBE", "inherited")
	t.Setenv("LOAM_CLOCK_OFFSET", "1h")
	cfg.DropEnv = []string{"LOAM_CLOCK_OFFSET", "LOAM_FAKE_PROBE"}
	cfg.Env = append(cfg.Env, "LOAM_FAKE_PROBE=given")
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, id := range []string{"seq-1", "node-1"} {
		waitFor(t, id+" started", func() bool { return len(argLines(t, fakeDir, id)) == 1 })
		var b []byte
		waitFor(t, id+" probe", func() bool { b, err = os.ReadFile(filepath.Join(fakeDir, id+".probe")); return err == nil })
		if want := "given clock-offset="; string(b) != want {
			t.Errorf("%s saw %q, want %q: Env's LOAM_FAKE_PROBE and no LOAM_CLOCK_OFFSET", id, b, want)
		}
	}
	if env := childEnv([]string{"A=1", "LOAM_CLOCK_OFFSET=1h", "B=2=3"}, cfg.DropEnv); !slices.Equal(env, []string{"A=1", "B=2=3"}) {
		t.Errorf("childEnv = %q", env)
	}
}
