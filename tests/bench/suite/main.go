// Command suite measures Loam beside the systems a user would pick instead (NATS JetStream,
// franz-go's kfake) and this machine's limits, in one run, interleaved, and writes the
// figures with their ratios as DIR/results.json and DIR/results.md. Run it through
// tests/bench/suite.sh; tests/bench/README.md says how to read the table.
//
// Each system runs as its own server process started and stopped here (Loam and kfake as
// `suite serve …` children, NATS as nats-server), pinned to the server CPU with taskset,
// while this process, the load generator, is pinned to the other. Every block of rows runs
// its systems in turn once per repetition (A, B, A, B, …): one warm-up repetition,
// discarded, then -reps measured ones; each figure is the median of its repetitions and its
// spread (max - min) / median.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/pricing"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(serveMain(os.Args[2:]))
	}
	os.Exit(runMain(os.Args[1:]))
}

type suite struct {
	pin         pinning
	self        string // this binary, re-run as `serve` children
	natsBin     string
	out, work   string
	short       bool
	reps        int
	warmup      bool
	rep         int // current repetition (0 is the warm-up when warmup)
	w           workload
	dur, latDur time.Duration
	calDur      time.Duration
	seqDur      time.Duration
	flush       time.Duration
	latFraction float64
	subRate     float64  // records/s of the Subscribe latency run
	wBatch      workload // the Go client rows and their NATS peer: larger batches (500 per request, as Kafka and NATS clients batch)
	fetchRecs   int
	// kafkaFetchRecs is how many records the Kafka fetch row writes and reads (kafka.go).
	kafkaFetchRecs int
	shm            string // a directory on tmpfs (work when there is none), removed at the end
	heapParts      int
	seqParts       []int
	fsyncN4K       int
	fsyncN8M       int
	cpuprofile     bool
	memprofile     bool
	only           string // "otlp": only the OTLP rows (otlp.go)
	progress       func(format string, a ...any)
}

func runMain(args []string) int {
	fs := flag.NewFlagSet("suite", flag.ContinueOnError)
	out := fs.String("o", "", "output directory for results.json, results.md (and profiles/)")
	short := fs.Bool("short", false, "CI mode: every row once on tiny sizes; asserts only that each row produced a positive finite number")
	reps := fs.Int("reps", 3, "measured repetitions (after one warm-up)")
	natsBin := fs.String("nats-server", "", "nats-server binary (default: PATH, then <repo>/.tools/bin)")
	pin := fs.Bool("pin", true, "pin servers and load generator to separate CPUs with taskset when it is installed")
	cpuprofile := fs.Bool("cpuprofile", false, "write a CPU profile of every server process per row and repetition to DIR/profiles/")
	memprofile := fs.Bool("memprofile", false, "write a heap profile of every server process per row and repetition to DIR/profiles/")
	only := fs.String("only", "", `"otlp": run only the OTLP ingest rows (their native peers included); "kafka": only the Kafka gateway rows and their kfake peer; "binary": only the Go client produce rows, loopback and NATS (with -cpuprofile also the load generator's profile); "classes": only the express and quorum class latency rows and the fsync calibration`)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: suite -o DIR [-short] [-reps N] [-cpuprofile] [-memprofile]")
		return 2
	}
	if *reps < 1 {
		fmt.Fprintf(os.Stderr, "suite: -reps %d: want at least 1\n", *reps)
		return 2
	}
	s, err := newSuite(*out, *short, *reps, *natsBin, *pin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s.cpuprofile, s.memprofile, s.only = *cpuprofile, *memprofile, *only
	defer os.RemoveAll(s.work)
	defer os.RemoveAll(s.shm)
	if err := s.pin.pinSelf(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	rows, err := s.run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rep := Report{Date: time.Now().UTC().Format(time.RFC3339), Commit: gitCommit(), Short: s.short, Pinning: s.pin.String(),
		Repetitions: s.reps, Workload: s.describe(), Rows: rows}
	if err := writeReport(s.out, rep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	md, _ := os.ReadFile(filepath.Join(s.out, "results.md"))
	os.Stdout.Write(md)
	if err := check(rows); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func newSuite(out string, short bool, reps int, natsBin string, pin bool) (*suite, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if natsBin == "" {
		if natsBin, err = exec.LookPath("nats-server"); err != nil {
			return nil, errors.New("suite: nats-server not on PATH: run .ci/tools.sh (it installs it into .tools/bin) or pass -nats-server")
		}
	}
	// Servers' data directories and the fsync calibration share one temporary directory
	// (TMPDIR), removed at the end.
	work, err := os.MkdirTemp("", "loam-suite-")
	if err != nil {
		return nil, err
	}
	// The Go client produce rows (Loam's directory bucket and their NATS peer) and the
	// quorum row "on tmpfs" store on tmpfs when there is one, else in work.
	shm := work
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "loam-suite-"); err == nil {
			shm = d
		}
	}
	s := &suite{self: self, natsBin: natsBin, out: out, work: work, shm: shm, short: short, reps: reps, warmup: true,
		pin: pinning{server: "1", load: "0"}, flush: 250 * time.Millisecond, latFraction: 0.5, subRate: 200,
		progress: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "suite: "+f+"\n", a...) }}
	if ts, err := exec.LookPath("taskset"); err == nil && pin {
		s.pin.taskset = ts
	}
	if short {
		s.reps, s.warmup = 1, false
		s.w = workload{Size: 256, PerReq: 10, Partitions: 8, Conc: 4}
		s.wBatch = workload{Size: 256, PerReq: 50, Partitions: 8, Conc: 4}
		s.dur, s.latDur, s.calDur, s.seqDur = 300*time.Millisecond, time.Second, 50*time.Millisecond, 300*time.Millisecond
		s.flush = 50 * time.Millisecond
		s.fetchRecs, s.heapParts, s.seqParts = 2000, 100, []int{1, 1000}
		s.kafkaFetchRecs = 2000
		s.fsyncN4K, s.fsyncN8M = 20, 3
	} else {
		// 256 workers keep 26 MB in flight: enough for Loam's flush interval (by Little's
		// law 64 would cap it near 64 × 100 KiB / 0.28 s ≈ 23 MB/s whatever its speed).
		s.w = workload{Size: 1024, PerReq: 100, Partitions: 8, Conc: 256}
		// 500 records per request keep 128 MiB in flight: the 100-record workload caps any
		// system with a 250 ms flush near 93 MB/s (Little's law), below the binary path.
		s.wBatch = workload{Size: 1024, PerReq: 500, Partitions: 8, Conc: 256}
		s.dur, s.latDur, s.calDur, s.seqDur = 5*time.Second, 8*time.Second, 500*time.Millisecond, 3*time.Second
		// The Kafka fetch row reads 400,000 records (410 MB): a kgo consumer takes all of
		// 40,000 in one poll, some 30 ms of which its start (metadata, offsets, the first
		// fetches) is most, so that measured the start rather than the throughput.
		s.kafkaFetchRecs = 400_000
		s.fetchRecs, s.heapParts, s.seqParts = 40000, 10000, []int{1, 1000}
		s.fsyncN4K, s.fsyncN8M = 300, 20
	}
	return s, nil
}

func (s *suite) describe() map[string]string {
	return map[string]string{
		"produce-batch": fmt.Sprintf("Go client rows and their NATS peer: %d B records, %d per request (one partition) or per batch of async publishes, %d workers; Loam on loam dev's directory bucket and NATS's file store, both in %s; Loam's background functions in a process of their own on the load generator's CPU (as a deployment runs them in Lambda, off the log node), except in the row that says so", s.wBatch.Size, s.wBatch.PerReq, s.wBatch.Conc, storeOf(s.shm, s.work)),
		"produce":       fmt.Sprintf("%d B records, %d per request (HTTP request / ProduceSync / async publishes awaited together), %d partitions, %d concurrent workers, %s per run (closed loop)", s.w.Size, s.w.PerReq, s.w.Partitions, s.w.Conc, s.dur),
		"latency":       fmt.Sprintf("open loop at %.0f %% of the measured Loam maximum request rate, %s per run, latency from the intended send time, HDR histogram (1 µs–5 min, 3 digits)", 100*s.latFraction, s.latDur),
		"loam":          fmt.Sprintf("embedded cluster (loam dev: 1 Raft voter with fsync, 1 log node, background functions on), in-memory bucket counted (the Go client rows: see produce-batch), flush interval %s", s.flush),
		"fetch":         fmt.Sprintf("%d records written, then read from offset 0 by one reader per partition (1 MiB per fetch); Loam: MB/s of answer bytes (not decoded; tail read three times), kfake: of record values", s.fetchRecs),
		"nats":          "nats-server 2.15.2, JetStream file store, R1; its default does not fsync each write",
		"kfake":         "franz-go pkg/kfake in memory (no durability): the Kafka ceiling, driven by franz-go kgo v1.22.3",
		"pricing":       "AWS us-east-1 list prices as of " + pricing.AsOf + " (shared/pricing)",
		"sequencer":     fmt.Sprintf("single voter, fsync on, in-process client, 16 committers, one 8 MiB WAL object per commit, %s per run", s.seqDur),
	}
}

// serveArgs are the arguments of a `suite serve kind` child for row, with profile paths
// when profiling.
func (s *suite) serveArgs(kind, row string, extra ...string) []string {
	args := []string{"serve", kind}
	name := fmt.Sprintf("%s.%s.rep%d", row, kind, s.rep)
	if s.cpuprofile || s.memprofile {
		os.MkdirAll(filepath.Join(s.out, "profiles"), 0o755)
	}
	if s.cpuprofile {
		args = append(args, "-cpuprofile", filepath.Join(s.out, "profiles", name+".cpu.pprof"))
	}
	if s.memprofile {
		args = append(args, "-memprofile", filepath.Join(s.out, "profiles", name+".mem.pprof"))
	}
	return append(args, extra...)
}

// measuredReps drops the warm-up repetition.
func (s *suite) measuredReps(xs []float64) []float64 {
	if s.warmup && len(xs) > 1 {
		return xs[1:]
	}
	return xs
}

func (s *suite) total() int {
	if s.warmup {
		return s.reps + 1
	}
	return s.reps
}

// loamServer is a running `suite serve loam` child.
type loamServer struct {
	*child
	base, grpc, kafka, ctl string
	otlpHTTP, otlpGRPC     string // OTLP logs ingest (otlp.go)
	functions              *child // its background functions' child, or nil (startLoamFiles)
}

func (s *suite) startLoam(ctx context.Context, row, latency string) (*loamServer, error) {
	return s.startLoamIn(ctx, row, latency, s.work)
}

// storeOf names where the page-cache-only rows store: tmpfs, or the work directory's disk
// when there is no tmpfs.
func storeOf(shm, work string) string {
	if shm != work {
		return "tmpfs (/dev/shm)"
	}
	return "the work directory (no tmpfs here)"
}

// startLoamFiles starts a Loam server child on loam dev's directory bucket, in s.shm, for
// the rows whose peer is NATS JetStream's file store, also in s.shm: both store in page
// cache (NATS does not fsync an async publish; fsync is a no-op on tmpfs), so the row
// compares the two servers' work, not this machine's disk. On the in-memory bucket every
// stored byte is copied into fresh heap pages; on a VM where first-touch page faults copy
// at under 1 GB/s, that took most of the server's core at a few hundred MB/s, and an
// fsynced directory on the disk here takes 8 MiB objects at about 600 MB/s, segments
// included.
//
// The functions (segmenter, retention, compaction, GC) run in a child of their own on the
// load generator's CPU, against the server's bucket and sequencer: a deployment runs them
// in Lambda, not on the log node, so the row measures the log node (and its sequencer)
// alone. colocated runs them in the server's process, on its CPU, as `loam dev` does (the
// row that shows what they cost there).
func (s *suite) startLoamFiles(ctx context.Context, row string, colocated bool) (*loamServer, error) {
	if colocated {
		return s.startLoamIn(ctx, row, "none", s.shm, "-bucket", "fs")
	}
	l, err := s.startLoamIn(ctx, row, "none", s.shm, "-bucket", "fs", "-functions=false")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(s.shm, "functions-")
	if err == nil {
		onLoad := s.pin
		onLoad.server = s.pin.load
		l.functions, err = onLoad.startChild(ctx, "functions", s.self, s.serveArgs("functions", row,
			"-dir", dir, "-bucket-dir", filepath.Join(l.dir, "bucket"), "-sequencer", l.ready["sequencer"]), true, "")
	}
	if err != nil {
		l.stopLoam()
		return nil, fmt.Errorf("suite: functions of %s: %w", row, err)
	}
	l.functions.dir = dir
	return l, nil
}

// clientProduce runs one Go client produce row over surf ("binary" or "grpc") on a Loam
// server from startLoamFiles and answers its MB/s.
func (s *suite) clientProduce(ctx context.Context, surf string, colocated bool) (float64, error) {
	row := "produce-" + surf
	if colocated {
		row += "-colocated"
	}
	l, err := s.startLoamFiles(ctx, row, colocated)
	if err != nil {
		return 0, err
	}
	stop := s.profileSelf(row)
	t, err := loamClientProduce(ctx, l, surf, s.wBatch, s.dur)
	stop()
	s.saveMetrics(l, row)
	if _, serr := l.stopLoam(); err == nil {
		err = serr
	}
	if err != nil {
		return 0, fmt.Errorf("suite: loam produce (Go client, %s): %w", row, err)
	}
	return t.mbps(), nil
}

// startLoamIn starts a Loam server child whose data directory is in parent, with extra
// serve flags.
func (s *suite) startLoamIn(ctx context.Context, row, latency, parent string, extra ...string) (*loamServer, error) {
	dir, err := os.MkdirTemp(parent, "loam-")
	if err != nil {
		return nil, err
	}
	var c *child
	// The child picks free ports and listens on them a moment later; on a shared machine
	// another process may take one in between: start again on fresh ports.
	for try := 0; ; try++ {
		c, err = s.pin.startChild(ctx, "loam", s.self, s.serveArgs("loam", row, append([]string{"-dir", dir, "-flush", s.flush.String(), "-objstore-latency", latency}, extra...)...), true, "")
		if err == nil {
			break
		}
		if try == 2 || !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	c.dir = dir
	return &loamServer{child: c, base: "http://" + c.ready["http"], grpc: c.ready["grpc"], kafka: c.ready["kafka"], ctl: "http://" + c.ready["ctl"],
		otlpHTTP: c.ready["otlp_http"], otlpGRPC: c.ready["otlp_grpc"]}, nil
}

func (l *loamServer) stats() (loamStats, error) {
	var st loamStats
	return st, ctlJSON("GET", l.ctl+"/stats", &st)
}

func (l *loamServer) restart() (loamStats, error) {
	var st loamStats
	if err := ctlJSON("POST", l.ctl+"/restart", &st); err != nil {
		return st, err
	}
	l.base, l.grpc = "http://"+st.HTTP, st.GRPC
	return st, nil
}

// stopLoam flushes and stops the server and returns its final counts.
func (l *loamServer) stopLoam() (loamStats, error) {
	var st loamStats
	if l.functions != nil {
		if err := l.functions.stop(); err != nil {
			l.kill()
			return st, err
		}
	}
	if err := ctlJSON("POST", l.ctl+"/stop", &st); err != nil {
		l.kill()
		return st, err
	}
	return st, l.wait()
}

// startNATS starts nats-server with JetStream, its store in a new directory of parent.
func (s *suite) startNATS(ctx context.Context, row, parent string) (*child, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp(parent, "nats-")
	if err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c, err := s.pin.startChild(ctx, "nats-server", s.natsBin, []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", dir}, false, addr)
	if err != nil {
		return nil, "", err
	}
	c.dir = dir
	return c, "nats://" + addr, nil
}

func (s *suite) startKfake(ctx context.Context, row string, partitions ...int) (*child, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	parts := s.w.Partitions
	if len(partitions) > 0 {
		parts = partitions[0]
	}
	c, err := s.pin.startChild(ctx, "kfake", s.self, s.serveArgs("kfake", row, "-port", fmt.Sprint(port), "-partitions", fmt.Sprint(parts)), true, "")
	if err != nil {
		return nil, "", err
	}
	return c, c.ready["addr"], nil
}

const (
	secCal     = "1. Machine limits (calibration)"
	secPeers   = "2. Peers"
	secProduce = "3. Loam produce"
	secLatency = "4. Loam produce latency"
	secFetch   = "5. Loam fetch"
	secMeta    = "6. Sequencer and metastore"
	secCost    = "7. Requests and cost"
)

const notYet = "surface does not exist yet"

func (s *suite) run(ctx context.Context) ([]Row, error) {
	switch s.only {
	case "otlp":
		return s.otlpRows(ctx)
	case "kafka":
		return s.kafkaRows(ctx)
	case "binary":
		return s.binaryRows(ctx)
	case "classes":
		return s.classesOnly(ctx) // classes.go
	}
	var rows []Row
	add := func(r ...Row) { rows = append(rows, r...) }

	// 1. Calibration.
	var cals []calibration
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		s.progress("calibrate, repetition %d", s.rep)
		c, err := s.calibrate(ctx, s.work)
		if err != nil {
			return nil, err
		}
		cals = append(cals, c)
	}
	cals = cals[len(cals)-s.reps:]
	col := func(f func(calibration) float64) []float64 {
		var out []float64
		for _, c := range cals {
			out = append(out, f(c))
		}
		return out
	}
	loop := col(func(c calibration) float64 { return c.LoopbackMBps })
	fsyncRate := col(func(c calibration) float64 { return 1000 / c.Fsync4KP50 })
	add(measured(secCal, "loopback TCP, one stream, load CPU → server CPU", "MB/s", loop, nil),
		measured(secCal, "memcpy, 64 MiB buffers (DRAM)", "GB/s", col(func(c calibration) float64 { return c.MemcpyGBps }), nil),
		measured(secCal, "CRC32C, 8 MiB buffer", "GB/s", col(func(c calibration) float64 { return c.CRC32CGBps }), nil),
		measured(secCal, "4 KiB write+fsync p50", "ms", col(func(c calibration) float64 { return c.Fsync4KP50 }), nil),
		measured(secCal, "4 KiB write+fsync p99", "ms", col(func(c calibration) float64 { return c.Fsync4KP99 }), nil),
		measured(secCal, "8 MiB write+fsync p50", "ms", col(func(c calibration) float64 { return c.Fsync8MP50 }), nil),
		measured(secCal, "8 MiB write+fsync p99", "ms", col(func(c calibration) float64 { return c.Fsync8MP99 }), nil))

	// 2+3. Produce throughput: Loam, NATS, kfake in turn per repetition.
	var loamMB, loamRPS, natsMB, kfakeMB, putsGiB, ingestGetsGiB, metaRatio []float64
	clientMB := map[string][]float64{}
	var natsBatchMB []float64
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		s.progress("produce throughput, repetition %d: loam", s.rep)
		l, err := s.startLoam(ctx, "produce", "none")
		if err != nil {
			return nil, err
		}
		before, err := l.stats()
		if err != nil {
			l.kill()
			return nil, err
		}
		t, err := loamProduce(ctx, l.base, s.w, s.dur)
		if err != nil {
			l.kill()
			return nil, fmt.Errorf("suite: loam produce: %w", err)
		}
		after, err := l.stopLoam()
		if err != nil {
			return nil, err
		}
		d := after.Stats.Sub(before.Stats)
		gib := float64(t.Bytes) / (1 << 30)
		loamMB, loamRPS = append(loamMB, t.mbps()), append(loamRPS, t.rps())
		putsGiB = append(putsGiB, float64(d.Puts)/gib)
		ingestGetsGiB = append(ingestGetsGiB, float64(d.Gets+d.GetRanges)/gib)
		metaRatio = append(metaRatio, float64(after.RaftLogBytes)/float64(t.Bytes))

		if err := s.clientProduceAll(ctx, clientMB); err != nil {
			return nil, err
		}

		s.progress("produce throughput, repetition %d: nats", s.rep)
		nc, url, err := s.startNATS(ctx, "produce", s.work)
		if err != nil {
			return nil, err
		}
		t, err = natsProduce(ctx, url, s.w, s.dur)
		nc.stop()
		if err != nil {
			return nil, fmt.Errorf("suite: nats produce: %w", err)
		}
		natsMB = append(natsMB, t.mbps())

		s.progress("produce throughput, repetition %d: nats, %d per batch", s.rep, s.wBatch.PerReq)
		nc, url, err = s.startNATS(ctx, "produce-batch", s.shm) // as the Go client rows' bucket (startLoamFiles)
		if err != nil {
			return nil, err
		}
		t, err = natsProduce(ctx, url, s.wBatch, s.dur)
		nc.stop()
		if err != nil {
			return nil, fmt.Errorf("suite: nats produce (batch %d): %w", s.wBatch.PerReq, err)
		}
		natsBatchMB = append(natsBatchMB, t.mbps())

		s.progress("produce throughput, repetition %d: kfake", s.rep)
		kc, addr, err := s.startKfake(ctx, "produce")
		if err != nil {
			return nil, err
		}
		t, err = kafkaProduce(ctx, addr, s.w, s.dur)
		kc.stop()
		if err != nil {
			return nil, fmt.Errorf("suite: kfake produce: %w", err)
		}
		kfakeMB = append(kfakeMB, t.mbps())
	}
	loamMB, loamRPS, natsMB, kfakeMB = s.measuredReps(loamMB), s.measuredReps(loamRPS), s.measuredReps(natsMB), s.measuredReps(kfakeMB)
	putsGiB, ingestGetsGiB, metaRatio = s.measuredReps(putsGiB), s.measuredReps(ingestGetsGiB), s.measuredReps(metaRatio)
	for k, v := range clientMB {
		clientMB[k] = s.measuredReps(v)
	}
	natsBatchMB = s.measuredReps(natsBatchMB)

	// 4. Latency, open loop at a fraction of Loam's measured maximum request rate.
	rate := s.latFraction * median(loamRPS)
	models := []objstore.LatencyModel{objstore.NoLatency, objstore.S3Standard, objstore.S3Express}
	p99 := make([][]float64, len(models))
	p50 := make([][]float64, len(models))
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		for i, m := range models {
			s.progress("produce latency, repetition %d: loam, objstore latency %s, %.0f requests/s", s.rep, m.Name, rate)
			l, err := s.startLoam(ctx, "latency-"+m.Name, m.Name)
			if err != nil {
				return nil, err
			}
			h, errs, err := s.loamLatency(ctx, l, rate)
			if _, serr := l.stopLoam(); err == nil {
				err = serr
			}
			if err != nil {
				return nil, fmt.Errorf("suite: latency (%s): %w", m.Name, err)
			}
			if errs > 0 {
				return nil, fmt.Errorf("suite: latency (%s): %d requests failed or could not be sent", m.Name, errs)
			}
			p99[i] = append(p99[i], float64(h.ValueAtQuantile(99))/1000)
			p50[i] = append(p50[i], float64(h.ValueAtQuantile(50))/1000)
		}
	}
	classP50, classP99, err := s.classLatencies(ctx) // classes.go
	if err != nil {
		return nil, err
	}
	var subP50, subP99, subE2E50, subE2E99 []float64
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		s.progress("subscribe latency, repetition %d: loam, %.0f records/s", s.rep, s.subRate)
		l, err := s.startLoam(ctx, "subscribe", "none")
		if err != nil {
			return nil, err
		}
		h, e2e, err := subscribeLatency(ctx, l, s.w, s.subRate, s.latDur)
		if _, serr := l.stopLoam(); err == nil {
			err = serr
		}
		if err != nil {
			return nil, fmt.Errorf("suite: subscribe latency: %w", err)
		}
		subP50 = append(subP50, float64(h.ValueAtQuantile(50))/1000)
		subP99 = append(subP99, float64(h.ValueAtQuantile(99))/1000)
		subE2E50, subE2E99 = append(subE2E50, float64(e2e.ValueAtQuantile(50))/1000), append(subE2E99, float64(e2e.ValueAtQuantile(99))/1000)
	}
	subP50, subP99, subE2E50, subE2E99 = s.measuredReps(subP50), s.measuredReps(subP99), s.measuredReps(subE2E50), s.measuredReps(subE2E99)
	flushMs := float64(s.flush) / float64(time.Millisecond)
	consts := func(v float64) []float64 { return repeated(v, s.reps) }

	// 5. Fetch: Loam tail and cold (fresh node) reads, heap per partition; kfake fetch.
	var tailMB, coldMB, coldGetsGiB, heapPer1000, kfakeFetchMB, tailBinMB, tailGRPCMB, seqHeap []float64
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		s.progress("fetch, repetition %d: loam", s.rep)
		l, err := s.startLoam(ctx, "fetch", "none")
		if err != nil {
			return nil, err
		}
		tail, cold, gets, heap, tb, tg, err := s.loamFetch(ctx, l)
		if _, serr := l.stopLoam(); err == nil {
			err = serr
		}
		if err != nil {
			return nil, fmt.Errorf("suite: loam fetch: %w", err)
		}
		tailMB, coldMB, coldGetsGiB, heapPer1000 = append(tailMB, tail), append(coldMB, cold), append(coldGetsGiB, gets), append(heapPer1000, heap)
		tailBinMB, tailGRPCMB = append(tailBinMB, tb), append(tailGRPCMB, tg)

		s.progress("fetch, repetition %d: sequencer heap, %d partitions", s.rep, s.heapParts)
		sh, err := s.sequencerHeap(ctx)
		if err != nil {
			return nil, err
		}
		seqHeap = append(seqHeap, sh)

		s.progress("fetch, repetition %d: kfake", s.rep)
		kc, addr, err := s.startKfake(ctx, "fetch")
		if err != nil {
			return nil, err
		}
		n, el, err := kafkaFetch(ctx, addr, s.w, s.fetchRecs)
		kc.stop()
		if err != nil {
			return nil, err
		}
		kfakeFetchMB = append(kfakeFetchMB, float64(n)/el.Seconds()/1e6)
	}
	tailMB, coldMB, coldGetsGiB, heapPer1000, kfakeFetchMB = s.measuredReps(tailMB), s.measuredReps(coldMB), s.measuredReps(coldGetsGiB), s.measuredReps(heapPer1000), s.measuredReps(kfakeFetchMB)
	tailBinMB, tailGRPCMB, seqHeap = s.measuredReps(tailBinMB), s.measuredReps(tailGRPCMB), s.measuredReps(seqHeap)
	nodeHeap := make([]float64, len(seqHeap))
	for i := range seqHeap {
		nodeHeap[i] = heapPer1000[i] - seqHeap[i]
	}

	// 6. Sequencer commits/s.
	commits := make([][]float64, len(s.seqParts))
	for s.rep = 0; s.rep < s.total(); s.rep++ {
		for i, parts := range s.seqParts {
			s.progress("sequencer, repetition %d: %d partitions per commit", s.rep, parts)
			r, err := s.sequencer(ctx, parts)
			if err != nil {
				return nil, err
			}
			commits[i] = append(commits[i], r.CommitsPerSec)
		}
	}

	// Rows.
	nats := func(r Row) Row { r.Peer = "NATS JetStream"; return r }
	kfake := func(r Row) Row { r.Peer = "kfake"; return r }
	limit := func(r Row, l string) Row { r.Limit = l; return r }
	goal := func(r Row, onRatio bool, op string, x float64) Row {
		r.Goal = &Goal{OnRatio: onRatio, Op: op, X: x}
		return r
	}
	note := func(r Row, n string) Row { r.Note = n; return r }
	zeroOK := func(r Row) Row { r.zeroOK = true; return r }

	add(note(measured(secPeers, "NATS JetStream produce, async publish", "MB/s", natsMB, nil), "file store, R1; does not fsync each write"),
		note(measured(secPeers, fmt.Sprintf("NATS JetStream produce, async publish, %d per batch", s.wBatch.PerReq), "MB/s", natsBatchMB, nil), "the peer of the Go client rows"),
		note(measured(secPeers, "kfake produce, kgo ProduceSync", "MB/s", kfakeMB, nil), "in memory, no durability"),
		note(measured(secPeers, "kfake fetch, kgo consumer", "MB/s", kfakeFetchMB, nil), "in memory"))

	add(goal(note(nats(measured(secProduce, "produce MB/s, HTTP/JSON", "MB/s", loamMB, natsMB)), "durable at ack: WAL object PUT and Raft commit with fsync"), true, ">=", 0.8),
		note(kfake(measured(secProduce, "produce MB/s, HTTP/JSON vs the Kafka ceiling", "MB/s", loamMB, kfakeMB)), "informational"))
	add(goal(note(nats(measured(secProduce, "produce MB/s, Go client, binary path", "MB/s", clientMB["binary"], natsBatchMB)), fmt.Sprintf("streamapi.Client: RecordBatch v2 over HTTP, %d records per request to one partition", s.wBatch.PerReq)), true, ">=", 1.5),
		goal(limit(measured(secProduce, "produce MB/s, Go client, binary path vs loopback", "MB/s", clientMB["binary"], loop), "loopback TCP"), true, ">=", 0.1),
		goal(note(nats(measured(secProduce, "produce MB/s, Go client, gRPC", "MB/s", clientMB["grpc"], natsBatchMB)), fmt.Sprintf("streamapi.GRPCClient: RecordBatches, one connection, %d records per call", s.wBatch.PerReq)), true, ">=", 0.8),
		colocatedRow(clientMB["binary-colocated"], natsBatchMB))
	otlpRows, err := s.otlpRows(ctx) // otlp.go
	if err != nil {
		return nil, err
	}
	add(otlpRows...)
	kafkaRows, err := s.kafkaRows(ctx) // kafka.go
	if err != nil {
		return nil, err
	}
	add(kafkaRows...)

	for i, m := range models {
		name := "produce p99, standard class, zero-latency bucket"
		ref, lim := flushMs, "flush interval"
		if m.Name != "none" {
			name = "produce p99, standard class, modelled " + m.Name + " latency"
			ref, lim = flushMs+float64(m.Put.P99)/float64(time.Millisecond), "flush + modelled PUT p99"
		}
		r := measured(secLatency, name, "ms", s.measuredReps(p99[i]), consts(ref))
		r = note(r, fmt.Sprintf("p50 %s ms", num(median(s.measuredReps(p50[i])))))
		add(goal(limit(r, lim), true, "<=", 1.3))
	}
	add(note(measured(secLatency, "Subscribe latency p50, produce ack → delivery (gRPC)", "ms", subP50, nil), fmt.Sprintf("%.0f records/s, 1 per produce, zero-latency bucket", s.subRate)),
		note(measured(secLatency, "Subscribe latency p99, produce ack → delivery (gRPC)", "ms", subP99, nil), "a record delivered before its ack counts 1 µs"),
		note(limit(measured(secLatency, "Subscribe latency p99, produce send → delivery (gRPC)", "ms", subE2E99, consts(flushMs)), "flush interval"),
			fmt.Sprintf("p50 %s ms", num(median(subE2E50)))))
	add(s.classRows(classP50, classP99, col(func(c calibration) float64 { return c.Fsync4KP99 }))...) // classes.go

	add(goal(limit(measured(secFetch, "tail fetch MB/s, HTTP/JSON (answer bytes)", "MB/s", tailMB, loop), "loopback TCP"), true, ">=", 0.25),
		note(limit(measured(secFetch, "cold fetch MB/s, HTTP/JSON (answer bytes; fresh node: WAL range GETs)", "MB/s", coldMB, loop), "loopback TCP"), "informational; zero-latency bucket"))
	add(goal(limit(measured(secFetch, "tail fetch MB/s, binary path (answer bytes)", "MB/s", tailBinMB, loop), "loopback TCP"), true, ">=", 0.25),
		limit(measured(secFetch, "tail fetch MB/s, gRPC record_batches", "MB/s", tailGRPCMB, loop), "loopback TCP"))

	for i, parts := range s.seqParts {
		r := limit(measured(secMeta, fmt.Sprintf("sequencer commits/s, %d partitions per commit", parts), "commits/s", s.measuredReps(commits[i]), fsyncRate), "4 KiB fsyncs/s (1 / p50)")
		if parts == 1 {
			r = goal(note(r, "group commit: above 1 means several commits per fsync"), true, ">=", 1)
		} else {
			r = goal(note(r, "goal: 100 log nodes flushing 4 times a second"), false, ">=", 400)
		}
		add(r)
	}
	add(goal(note(measured(secMeta, "metastore Raft-log bytes / ingested bytes", "ratio", metaRatio, nil), "all Raft-log entries of a produce run over its record bytes"), false, "<=", 0.002),
		goal(note(measured(secMeta, "heap per 1,000 partitions (sequencer + log node)", "MiB", heapPer1000, nil), fmt.Sprintf("heap after GC, before and after %d partitions created and written once", s.heapParts)), false, "<=", 20),
		goal(note(measured(secMeta, "heap per 1,000 idle partitions, sequencer", "MiB", seqHeap, nil), "a sequencer process alone: stream created, one CommitWal chunk per partition"), false, "<=", 20),
		goal(note(measured(secMeta, "heap per 1,000 idle partitions, log node", "MiB", nodeHeap, nil), "the embedded cluster's growth minus the sequencer's alone"), false, "<=", 20))

	ideal := float64(1<<30) / float64(8<<20) // one full 8 MiB WAL object per 8 MiB
	add(goal(note(limit(measured(secCost, "PUTs per GiB ingested", "PUTs/GiB", putsGiB, consts(ideal)), "full 8 MiB WAL objects"), "WAL objects and segments, during the produce runs"), true, "<=", 1.5),
		zeroOK(note(measured(secCost, "GETs per GiB ingested (background functions)", "GETs/GiB", ingestGetsGiB, nil), "segmenter and other functions during the produce runs; 0 when none ran")),
		goal(limit(measured(secCost, "GETs per GiB read cold (fresh node)", "GETs/GiB", coldGetsGiB, consts(ideal)), "one GET per 8 MiB"), true, "<=", 2))
	var dollars, refDollars []float64
	for i := range putsGiB {
		gets := ingestGetsGiB[i] + coldGetsGiB[min(i, len(coldGetsGiB)-1)]
		dollars = append(dollars, pricing.S3Standard.PerGiB(putsGiB[i], gets, 0))
		refDollars = append(refDollars, 2*pricing.CrossAZPerGB)
	}
	add(goal(note(limit(measured(secCost, "$ per GiB, S3 Standard requests (ingest + one cold read)", "$/GiB", dollars, refDollars), "Kafka RF 3: cross-AZ transfer of two replica copies"), "storage excluded"), true, "<=", 0.1))
	return rows, nil
}

// loamLatency creates a stream, warms the path with one request, then runs the open loop.
func (s *suite) loamLatency(ctx context.Context, l *loamServer, rate float64) (*hdrhistogram.Histogram, int, error) {
	if err := loamCreate(ctx, l.base, "l", s.w.Partitions); err != nil {
		return nil, 0, err
	}
	bodies := loamBodies(s.w, 64)
	url := recordsURL(l.base, "l")
	if err := loamPost(ctx, url, bodies[0]); err != nil {
		return nil, 0, err
	}
	h, errs, err := openLoop(ctx, rate, s.latDur, 100_000, func(ctx context.Context, i int) error {
		return loamPost(ctx, url, bodies[i%len(bodies)])
	})
	return h, errs, err
}

// loamFetch fills a stream, reads it from the tail cache, restarts the node and reads it
// cold, then measures heap per 1,000 partitions.
func (s *suite) loamFetch(ctx context.Context, l *loamServer) (tailMBps, coldMBps, coldGetsPerGiB, heapMiBPer1000, tailBinMBps, tailGRPCMBps float64, err error) {
	if _, err := loamFill(ctx, l.base, "f", s.w, s.fetchRecs); err != nil {
		return 0, 0, 0, 0, 0, 0, err
	}
	// The tail read is repeated three times (all from the tail cache) so that it lasts long
	// enough to time on a busy machine.
	var tailBytes int64
	var tailTime time.Duration
	for range 3 {
		n, el, err := loamFetchAll(ctx, l.base, "f", s.w.Partitions)
		if err != nil {
			return 0, 0, 0, 0, 0, 0, err
		}
		tailBytes, tailTime = tailBytes+n, tailTime+el
	}
	tailMBps = float64(tailBytes) / tailTime.Seconds() / 1e6
	// The same tail reads over the binary path and gRPC (record_batches).
	tailBytes, tailTime = 0, 0
	for range 3 {
		n, el, err := loamFetchAllBinary(ctx, l.base, "f", s.w.Partitions)
		if err != nil {
			return 0, 0, 0, 0, 0, 0, err
		}
		tailBytes, tailTime = tailBytes+n, tailTime+el
	}
	tailBinMBps = float64(tailBytes) / tailTime.Seconds() / 1e6
	tailBytes, tailTime = 0, 0
	for range 3 {
		n, el, err := loamFetchAllGRPC(ctx, l.grpc, "f", s.w.Partitions)
		if err != nil {
			return 0, 0, 0, 0, 0, 0, err
		}
		tailBytes, tailTime = tailBytes+n, tailTime+el
	}
	tailGRPCMBps = float64(tailBytes) / tailTime.Seconds() / 1e6
	before, err := l.restart()
	if err != nil {
		return 0, 0, 0, 0, 0, 0, err
	}
	n, el, err := loamFetchAll(ctx, l.base, "f", s.w.Partitions)
	if err != nil {
		return 0, 0, 0, 0, 0, 0, err
	}
	after, err := l.stats()
	if err != nil {
		return 0, 0, 0, 0, 0, 0, err
	}
	coldMBps = float64(n) / el.Seconds() / 1e6
	d := after.Stats.Sub(before.Stats)
	coldGetsPerGiB = float64(d.Gets+d.GetRanges) / (float64(s.fetchRecs*s.w.Size) / (1 << 30)) // per GiB of record values

	// Heap: create a stream of heapParts partitions and write one record to each.
	h0 := after.HeapAlloc
	if err := loamCreate(ctx, l.base, "h", s.heapParts); err != nil {
		return 0, 0, 0, 0, 0, 0, err
	}
	url := recordsURL(l.base, "h")
	for p0 := 0; p0 < s.heapParts; p0 += 1000 {
		var b strings.Builder
		b.WriteString(`{"records":[`)
		for p := p0; p < min(p0+1000, s.heapParts); p++ {
			if p > p0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"partition":%d,"value":1}`, p)
		}
		b.WriteString(`]}`)
		if err := loamPost(ctx, url, []byte(b.String())); err != nil {
			return 0, 0, 0, 0, 0, 0, err
		}
	}
	st, err := l.stats()
	if err != nil {
		return 0, 0, 0, 0, 0, 0, err
	}
	heapMiBPer1000 = (float64(st.HeapAlloc) - float64(h0)) / (1 << 20) / (float64(s.heapParts) / 1000)
	if heapMiBPer1000 <= 0 || math.IsNaN(heapMiBPer1000) {
		return 0, 0, 0, 0, 0, 0, fmt.Errorf("suite: heap after %d partitions %d B, before %d B: no growth to measure", s.heapParts, st.HeapAlloc, h0)
	}
	return tailMBps, coldMBps, coldGetsPerGiB, heapMiBPer1000, tailBinMBps, tailGRPCMBps, nil
}

// sequencerHeap runs `serve seqheap` for s.heapParts partitions: MiB of sequencer heap per
// 1,000 idle partitions.
func (s *suite) sequencerHeap(ctx context.Context) (float64, error) {
	dir, err := os.MkdirTemp(s.work, "seqheap-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	c, err := s.pin.startChild(ctx, "sequencer", s.self, s.serveArgs("seqheap", "heap", "-dir", dir, "-partitions", fmt.Sprint(s.heapParts)), true, "")
	if err != nil {
		return 0, err
	}
	if err := c.wait(); err != nil {
		return 0, err
	}
	var r struct {
		HeapMiB float64 `json:"heap_mib_per_1000"`
	}
	if err := json.Unmarshal([]byte(c.ready["result"]), &r); err != nil {
		return 0, fmt.Errorf("suite: sequencer heap result %q: %w", c.ready["result"], err)
	}
	return r.HeapMiB, nil
}

func (s *suite) sequencer(ctx context.Context, parts int) (seqResult, error) {
	var r seqResult
	dir, err := os.MkdirTemp(s.work, "seq-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	c, err := s.pin.startChild(ctx, "sequencer", s.self, s.serveArgs("seq", fmt.Sprintf("sequencer-%d", parts), "-dir", dir,
		"-partitions", fmt.Sprint(parts), "-duration", s.seqDur.String()), true, "")
	if err != nil {
		return r, err
	}
	if err := c.wait(); err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(c.ready["result"]), &r); err != nil {
		return r, fmt.Errorf("suite: sequencer result %q: %w", c.ready["result"], err)
	}
	return r, nil
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "-dirty"
	}
	return c
}
