package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/loamhq/loam/local/devcluster"
	"github.com/loamhq/loam/sequencer-svc/raftlog"
	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/objstore"
)

// serveMain runs one server child: `suite serve loam|functions|kfake|sink|seq [flags]`. Each prints
// "READY {json}" on stdout once it serves, and runs until SIGTERM (or, for loam, POST /stop).
func serveMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: suite serve loam|functions|kfake|sink|seq [flags]")
		return 2
	}
	fs := flag.NewFlagSet("serve "+args[0], flag.ContinueOnError)
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of this server's lifetime here")
	memprofile := fs.String("memprofile", "", "write a heap profile here when the server stops")
	var run func() error
	switch args[0] {
	case "loam":
		dir := fs.String("dir", "", "data directory")
		flush := fs.Duration("flush", 250*time.Millisecond, "flush interval")
		lat := fs.String("objstore-latency", "none", "latency model: none, s3-standard, s3-express")
		quorum := fs.Bool("quorum", false, "serve class quorum: three in-process journal members (logs under -dir)")
		bucket := fs.String("bucket", "mem", `"mem": an in-memory bucket; "fs": loam dev's default, a directory bucket under -dir (every object fsynced before it is acknowledged)`)
		fns := fs.Bool("functions", true, "run the background functions (segmenter, retention, compaction, GC) in this process, as loam dev does; false: none here (serve functions runs them)")
		run = func() error { return serveLoam(*dir, *flush, *lat, *memprofile, *quorum, *bucket, *fns) }
	case "functions":
		dir := fs.String("dir", "", "data directory (the functions' coordination store)")
		bucket := fs.String("bucket-dir", "", "the directory bucket of the serve loam child (its -dir/bucket)")
		seq := fs.String("sequencer", "", "the sequencer's RPC address (the serve loam child's READY line)")
		run = func() error { return serveFunctions(*dir, *bucket, *seq) }
	case "kfake":
		port := fs.Int("port", 0, "listen port")
		parts := fs.Int("partitions", 8, "partitions of topic bench")
		run = func() error { return serveKfake(*port, int32(*parts)) }
	case "sink":
		run = serveSink
	case "seqheap":
		dir := fs.String("dir", "", "data directory")
		parts := fs.Int("partitions", 1000, "partitions created and written once")
		run = func() error { return serveSeqHeap(*dir, *parts) }
	case "seq":
		dir := fs.String("dir", "", "data directory")
		parts := fs.Int("partitions", 1, "partitions per commit")
		dur := fs.Duration("duration", 3*time.Second, "how long to commit")
		conc := fs.Int("concurrency", 16, "concurrent committers")
		run = func() error { return serveSeq(*dir, *parts, *dur, *conc) }
	default:
		fmt.Fprintf(os.Stderr, "suite serve: unknown server %q\n", args[0])
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if *memprofile != "" && args[0] != "loam" { // loam writes its own before it stops
		writeHeapProfile(*memprofile)
	}
	return 0
}

func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer f.Close()
	runtime.GC()
	pprof.WriteHeapProfile(f)
}

func ready(m map[string]string) {
	b, _ := json.Marshal(m)
	fmt.Printf("READY %s\n", b)
}

func sigterm() <-chan os.Signal {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, os.Interrupt)
	return c
}

func localAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// freePortRun finds n consecutive free loopback ports (the journal members take Port,
// Port+1 and Port+2).
func freePortRun(n int) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ok := true
		for i := 1; i < n && ok; i++ {
			li, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				ok = false
				break
			}
			li.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("no run of free ports")
}

// loamStats is what a Loam server child's /stats and /stop answer.
type loamStats struct {
	objstore.Stats
	HeapAlloc    uint64 `json:"heap_alloc"`    // after a GC
	RaftLogBytes int64  `json:"raftlog_bytes"` // /stop only: the sequencer's stored Raft-log entries
	HTTP         string `json:"http"`          // /restart: the new HTTP address
	GRPC         string `json:"grpc"`          // /restart: the new gRPC address
}

// serveLoam runs the embedded cluster (`loam dev`'s devcluster with the same
// --objstore-latency models) on a counting bucket, in memory or (bucket "fs", what
// `loam dev` runs on) a directory under dir, with a control listener:
// GET /stats, POST /restart (a fresh log node and sequencer process state on the same
// bucket and data directory: cold caches), POST /stop (flush, stop, measure the Raft log,
// exit).
func serveLoam(dir string, flush time.Duration, latency, memprofile string, quorum bool, bucket string, functions bool) error {
	var store *objstore.CountingBucket
	switch bucket {
	case "mem":
		store = objstore.Counting(objstore.NewMem())
	case "fs":
		b, err := objstore.NewFS(filepath.Join(dir, "bucket"))
		if err != nil {
			return err
		}
		store = objstore.Counting(b)
	default:
		return fmt.Errorf("serve loam: -bucket %q: want mem or fs", bucket)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var seqRPC string // the sequencer's RPC address, for a serve functions child
	start := func() (*devcluster.Cluster, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		rpc, err := localAddr()
		if err != nil {
			return nil, err
		}
		raftAddr, err := localAddr()
		if err != nil {
			return nil, err
		}
		seqRPC = rpc
		gln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		kln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		var qc devcluster.QuorumConfig
		if quorum {
			if qc.Port, err = freePortRun(3); err != nil {
				return nil, err
			}
		}
		return devcluster.Start(context.Background(), devcluster.Config{DataDir: dir, Store: store, HTTPListener: ln, GRPCListener: gln, KafkaListener: kln,
			OTLPHTTPAddr: "127.0.0.1:0", OTLPGRPCAddr: "127.0.0.1:0", // otlp.go
			FlushInterval: flush, ObjstoreLatency: latency, SequencerRPC: rpc, SequencerRaft: raftAddr, Logger: logger, Quorum: qc,
			Functions: devcluster.FunctionsConfig{Disabled: !functions}})
	}
	c, err := start()
	if err != nil {
		return err
	}
	var mu sync.Mutex // guards c
	stats := func() loamStats {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return loamStats{Stats: store.Stats(), HeapAlloc: ms.HeapAlloc}
	}
	stopped := make(chan struct{})
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(stats())
	})
	mux.HandleFunc("POST /restart", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if err := c.Close(r.Context()); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if c, err = start(); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		s := stats()
		s.HTTP, s.GRPC = c.HTTPAddr(), c.GRPCAddr()
		json.NewEncoder(w).Encode(s)
	})
	mux.HandleFunc("POST /stop", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if memprofile != "" {
			writeHeapProfile(memprofile)
		}
		if err := c.Close(r.Context()); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		s := stats()
		var err error
		if s.RaftLogBytes, err = raftLogBytes(filepath.Join(dir, "sequencer", "raft.db"), 0); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		json.NewEncoder(w).Encode(s)
		once.Do(func() { close(stopped) })
	})
	ctl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ctl)
	ready(map[string]string{"http": c.HTTPAddr(), "grpc": c.GRPCAddr(), "kafka": c.KafkaAddr(), "ctl": ctl.Addr().String(),
		"otlp_http": c.OTLPHTTPAddr(), "otlp_grpc": c.OTLPGRPCAddr(), "sequencer": seqRPC})
	select {
	case <-stopped:
		time.Sleep(50 * time.Millisecond) // let the /stop answer go out
		return nil
	case <-sigterm():
		mu.Lock()
		defer mu.Unlock()
		return c.Close(context.Background())
	}
}

// raftLogBytes sums the stored size of the Raft-log entries after index from in the raftlog
// store at path (closed by its sequencer): a key of 8 bytes each plus raftlog.EntrySize.
func raftLogBytes(path string, from uint64) (int64, error) {
	s, err := raftlog.Open(path, raftlog.Options{})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	first, err := s.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := s.LastIndex()
	if err != nil {
		return 0, err
	}
	var total int64
	for i := max(first, from+1); i <= last && i > 0; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			return 0, fmt.Errorf("suite: raft log %d: %w", i, err)
		}
		total += int64(raftlog.EntrySize(&l)) + 8
	}
	return total, nil
}

// serveKfake runs franz-go's in-memory Kafka (kfake): the zero-durability Kafka ceiling.
func serveKfake(port int, partitions int32) error {
	c, err := kfake.NewCluster(kfake.Ports(port), kfake.SeedTopics(partitions, "bench"))
	if err != nil {
		return err
	}
	defer c.Close()
	ready(map[string]string{"addr": c.ListenAddrs()[0]})
	<-sigterm()
	return nil
}

// serveSink accepts connections and discards what they send: the far end of the loopback
// calibration.
func serveSink() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 1<<20)
				for {
					if _, err := conn.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	ready(map[string]string{"addr": l.Addr().String()})
	<-sigterm()
	return l.Close()
}

// seqResult is what `serve seq` prints on its RESULT line.
type seqResult struct {
	CommitsPerSec    float64 `json:"commits_per_s"`
	Commits          int64   `json:"commits"`
	RaftLogPerCommit float64 `json:"raftlog_bytes_per_commit"`
}

// serveSeq runs a single-voter sequencer (fsync on) and commits 8 MiB WAL objects with one
// chunk per partition from conc committers for dur, through the in-process client (as the
// embedded cluster's log node does), then prints the rate.
func serveSeq(dir string, parts int, dur time.Duration, conc int) error {
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.Bootstrap = true
	cfg.DisableRPC = true
	var err error
	if cfg.RaftAddr, err = localAddr(); err != nil {
		return err
	}
	cfg.FastTimeouts()
	cfg.SnapshotThreshold = 1 << 30 // keep the log to measure it
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.RaftLogOutput = io.Discard
	ctx := context.Background()
	n, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	c := server.NewLocalClient(n)
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "bench", Partitions: int32(parts)})
	if err != nil {
		n.Close()
		return err
	}
	created := time.Now().UnixMilli()
	tmpl := meta.CommitWal{NodeID: "node-1", Class: meta.ClassStandard, CreatedMs: created}
	const flushBytes = 8 << 20
	per, off := int64(flushBytes/parts), int64(64)
	for p := range parts {
		tmpl.Chunks = append(tmpl.Chunks, meta.Chunk{StreamID: s.ID, Partition: int32(p), Records: 100, Offset: off, Length: per, MaxTimestamp: created - 5})
		off += per + 48
	}
	from := n.AppliedIndex()
	var seq atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	t0 := time.Now()
	deadline := t0.Add(dur)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				cw := tmpl
				cw.Object = fmt.Sprintf("wal/standard/node-1/%026d.wal", seq.Add(1))
				cw.StampMs = time.Now().UnixMilli()
				if _, err := c.CommitWal(ctx, cw); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	c.Close()
	if err := n.Close(); err != nil {
		return err
	}
	if e, _ := firstErr.Load().(error); e != nil {
		return fmt.Errorf("suite: CommitWal: %w", e)
	}
	logBytes, err := raftLogBytes(filepath.Join(dir, "raft.db"), from)
	if err != nil {
		return err
	}
	commits := seq.Load()
	b, _ := json.Marshal(seqResult{CommitsPerSec: float64(commits) / el.Seconds(), Commits: commits, RaftLogPerCommit: float64(logBytes) / float64(commits)})
	ready(map[string]string{"result": string(b)})
	return nil
}

// serveSeqHeap runs a single-voter sequencer alone and measures what idle partitions cost
// it: the heap after GC before and after a stream of parts partitions is created and one
// CommitWal writes one record to each (the state a log node's writes leave). It prints
// {"heap_mib_per_1000": …}.
func serveSeqHeap(dir string, parts int) error {
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.Bootstrap = true
	cfg.DisableRPC = true
	var err error
	if cfg.RaftAddr, err = localAddr(); err != nil {
		return err
	}
	cfg.FastTimeouts()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.RaftLogOutput = io.Discard
	ctx := context.Background()
	n, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	c := server.NewLocalClient(n)
	defer c.Close()
	if err := n.WaitLeader(ctx); err != nil {
		return err
	}
	// A first stream and commit, so lazily built state is not charged to the partitions.
	warm, err := c.CreateStream(ctx, meta.StreamConfig{Name: "warm", Partitions: 1})
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	if _, err := c.CommitWal(ctx, meta.CommitWal{NodeID: "node-1", Class: meta.ClassStandard, CreatedMs: now, StampMs: now,
		Object: fmt.Sprintf("wal/standard/node-1/%026d.wal", 0), Chunks: []meta.Chunk{{StreamID: warm.ID, Records: 1, Offset: 64, Length: 100, MaxTimestamp: now}}}); err != nil {
		return err
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	h0 := heap()
	s, err := c.CreateStream(ctx, meta.StreamConfig{Name: "h", Partitions: int32(parts)})
	if err != nil {
		return err
	}
	for p0, obj := 0, 1; p0 < parts; p0, obj = p0+1000, obj+1 {
		cw := meta.CommitWal{NodeID: "node-1", Class: meta.ClassStandard, CreatedMs: now, StampMs: time.Now().UnixMilli(),
			Object: fmt.Sprintf("wal/standard/node-1/%026d.wal", obj)}
		for p := p0; p < min(p0+1000, parts); p++ {
			cw.Chunks = append(cw.Chunks, meta.Chunk{StreamID: s.ID, Partition: int32(p), Records: 1, Offset: int64(64 + 100*(p-p0)), Length: 100, MaxTimestamp: now})
		}
		if _, err := c.CommitWal(ctx, cw); err != nil {
			return fmt.Errorf("suite: CommitWal: %w", err)
		}
	}
	h1 := heap()
	per := (float64(h1) - float64(h0)) / (1 << 20) / (float64(parts) / 1000)
	b, _ := json.Marshal(map[string]float64{"heap_mib_per_1000": per})
	ready(map[string]string{"result": string(b)})
	return nil
}

// serveFunctions runs the background functions (segmenter, retention, compaction, GC) of a
// serve loam child started with -functions=false, in their own process: against its
// directory bucket and its sequencer, with a coordination store of their own (only
// functions take leases in it), as a deployment runs them in Lambda, off the log node.
func serveFunctions(dir, bucketDir, seq string) error {
	if dir == "" || bucketDir == "" || seq == "" {
		return errors.New("serve functions: -dir, -bucket-dir and -sequencer are required")
	}
	b, err := objstore.NewFS(bucketDir)
	if err != nil {
		return err
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mc, err := metagrpc.Dial(ctx, []string{seq})
	if err != nil {
		return err
	}
	defer mc.Close()
	store, err := coord.NewBolt(filepath.Join(dir, "coord.db"))
	if err != nil {
		return err
	}
	defer store.Close()
	fns, err := devcluster.StartFunctions(b, mc, store, devcluster.FunctionsConfig{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	defer fns.Close()
	ready(map[string]string{})
	<-sigterm()
	return nil
}
