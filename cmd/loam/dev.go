package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loamhq/loam/local/devcluster"
	"github.com/loamhq/loam/local/supervisor"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/envflag"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/tlsconf"
)

const devUsage = `usage: loam dev [flags]

Runs the embedded cluster: a single-voter Raft sequencer and a log node in one process,
on a filesystem bucket under --data-dir (or any S3 API with --bucket s3://NAME). A restart
on the same data directory keeps all data. Stop it with Ctrl-C (SIGINT) or SIGTERM.
It serves plaintext; with --tls it generates a local CA and certificates in
<data-dir>/tls, serves HTTPS and gRPC over TLS, and prints how to trust the CA
(curl --cacert, grpcurl -cacert, LOAM_CA_CERT).

With --sequencers N or --nodes M other than 1 it runs a cluster instead: N sequencer
voters (loam sequencer) and M log nodes (loam lognode), each its own process of this
same binary, supervised: a child that dies is restarted. Voter i (from 0) serves RPC on --sequencer-port+2i and
Raft on --raft-port+2i, log node j HTTP on --http-port+j and gRPC on --grpc-port+j, in
zones zone-a, zone-b, ...; OTLP on --otlp-http-port+j and --otlp-grpc-port+j only when those
flags are given.
Children and their addresses are printed and kept in <data-dir>/cluster.json; their logs
go to <data-dir>/logs/. --sequencer-bin/--lognode-bin run other binaries instead
(sequencer-svc, lognode-svc). The supervising process runs the background functions
(segmenter, retention, compaction, GC; the --segment-*/--gc-* flags) and serves the log
nodes a coordination store (<data-dir>/coord.db) for their node registry. With --tls
every child gets its own certificate of the local CA. See local/supervisor.

Flags:
`

// runDev is `loam dev`.
func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), devUsage)
		fs.PrintDefaults()
	}
	var cfg devcluster.Config
	host := fs.String("host", envOr("LOAM_HOST", "127.0.0.1"), "address every port binds to (env LOAM_HOST)")
	fs.StringVar(&cfg.DataDir, "data-dir", envOr("LOAM_DATA_DIR", "loam-data"), "directory for the bucket and the sequencer's state (env LOAM_DATA_DIR)")
	fs.StringVar(&cfg.Bucket, "bucket", os.Getenv("LOAM_BUCKET"), "s3://NAME[/PREFIX] to keep data on an S3 API instead of the filesystem (env LOAM_BUCKET)")
	fs.StringVar(&cfg.S3Endpoint, "s3-endpoint", envOr("LOAM_S3_ENDPOINT", os.Getenv("AWS_ENDPOINT_URL")), "S3 API endpoint URL, e.g. http://127.0.0.1:7000 (env LOAM_S3_ENDPOINT or AWS_ENDPOINT_URL); credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
	fs.StringVar(&cfg.S3Region, "s3-region", os.Getenv("AWS_REGION"), "S3 region (env AWS_REGION; default us-east-1)")
	httpPort := fs.Int("http-port", 8080, "native HTTP API port")
	grpcPort := fs.Int("grpc-port", 9090, "native gRPC API port (0: a free port; -1: no gRPC API)")
	kafkaPort := fs.Int("kafka-port", 9092, "Kafka protocol port, plaintext; SASL/PLAIN or SCRAM with an API key under --auth (0: a free port, or none with --nodes; -1: no Kafka listener; with --nodes N, node i listens on port+i)")
	rpcPort := fs.Int("sequencer-port", 7070, "sequencer gRPC port")
	raftPort := fs.Int("raft-port", 7071, "sequencer Raft port")
	fs.DurationVar(&cfg.FlushInterval, "flush-interval", 250*time.Millisecond, "standard-class WAL flush interval")
	fs.StringVar(&cfg.ObjstoreLatency, "objstore-latency", "none", "delay every object-store call by a modelled latency: none, s3-standard (PUT median 100 ms, p99 400 ms) or s3-express (5 ms, p99 20 ms); see shared/objstore/latency.go")
	fs.StringVar(&cfg.NodeID, "node-id", "dev-1", "log node id (names its WAL objects)")
	fs.DurationVar(&cfg.ClockOffset, "clock-offset", 0, "testing aid: shift the log nodes' clocks by this much (e.g. 1h, -90s) wherever they stamp; the sequencer keeps its own (use --sequencer-args \"--clock-offset D\" to shift a voter)")
	level := fs.String("log-level", envOr("LOAM_LOG_LEVEL", "info"), "debug, info, warn or error")
	fs.Int64Var(&cfg.Functions.SegmentTargetBytes, "segment-target-bytes", devcluster.DefaultSegmentTargetBytes, "segment a partition once this many bytes of its WAL data are pending (at least 1024)")
	fs.DurationVar(&cfg.Functions.SegmentMaxAge, "segment-max-age", devcluster.DefaultSegmentMaxAge, "segment a partition's WAL data older than this whatever its size")
	fs.DurationVar(&cfg.Functions.GCGrace, "gc-grace", devcluster.DefaultGCGrace, "delete retired WAL and segment objects this long after no index entry references them")
	functions := fs.Bool("functions", true, "run the background functions (segmenter, retention, compaction, GC); false: WAL objects stay WAL objects")
	useTLS := fs.Bool("tls", false, "serve HTTPS and gRPC over TLS, and the sequencer over mutual TLS, with a local CA and certificates generated in <data-dir>/tls (kept across restarts); prints how to trust them")
	cfg.Limits.RegisterFlags(fs)
	fs.DurationVar(&cfg.WriterDrainTimeout, "writer-drain-timeout", node.DefaultWriterDrainTimeout, "on stop, after the HTTP server stopped: how long buffered writes get to commit")
	shutdown := fs.Duration("shutdown-timeout", 15*time.Second, "on stop: how long requests in flight get to finish (open long-polls answer at once)")
	ceWindow := fs.Duration("cloudevents-dedup-window", meta.DefaultEventWindow, "how long a CloudEvent's source + id is remembered after it was appended: a retry within it never appends again (at most 24h)")
	awsEndpoint := fs.String("aws", os.Getenv("LOAM_AWS_ENDPOINT"), "run on an AWS API endpoint (moto_server, LocalStack: e.g. http://127.0.0.1:5000; env LOAM_AWS_ENDPOINT) in a deployment's topology: S3 bucket loam-dev, DynamoDB table loam-dev-coord, wal/ notifications through SQS queue loam-dev-wal-events to the segmenter; created when missing")
	fs.StringVar(&cfg.FaultProfile, "fault-profile", os.Getenv("LOAM_FAULT_PROFILE"), "testing aid: inject the object-store faults of this JSON profile (docs/faults.md) into every bucket call (supervised: the log nodes'); re-read every second (env LOAM_FAULT_PROFILE)")
	fs.BoolVar(&cfg.Auth, "auth", false, "check API keys (the bootstrap admin key: env LOAM_ADMIN_KEY, else a new one printed once)")
	// Supervised multi-process cluster (local/supervisor).
	var sup supervisedFlags
	sup.register(fs)
	var otlpf devOTLPFlags // dev_otlp.go
	otlpf.register(fs)
	var xf devExpressFlags // dev_express.go
	xf.register(fs)
	var kmsf devKMSFlags // dev_kms.go
	kmsf.register(fs)
	var qf devQuorumFlags // dev_quorum.go
	qf.register(fs)
	if inspectDevFlags != nil {
		inspectDevFlags(fs)
		return nil
	}
	if err := envflag.Parse(fs, args, devVars); err != nil {
		return usageError{err}
	}
	cfg.Functions.Disabled = !*functions
	// loam dev's own LOAM_* variables are not its children's (the AWS SDK's stay theirs too).
	fs.VisitAll(func(f *flag.Flag) {
		for _, v := range devVars.Of(f.Name) {
			if strings.HasPrefix(v, envflag.Prefix) {
				sup.dropEnv = append(sup.dropEnv, v)
			}
		}
	})
	stopKMS, err := kmsf.apply(&cfg, &sup)
	if err != nil {
		return err
	}
	defer stopKMS()
	if err := otlpf.apply(fs, *host, &cfg); err != nil {
		return err
	}
	expressArgs, err := xf.apply(&cfg)
	if err != nil {
		return usageError{err}
	}
	if err := qf.apply(&cfg, *host); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("dev: unexpected argument %q", fs.Arg(0))}
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return usageError{fmt.Errorf("dev: --log-level %q: %w", *level, err)}
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	cfg.AdminKey = os.Getenv("LOAM_ADMIN_KEY")
	cfg.HTTPAddr = fmt.Sprintf("%s:%d", *host, *httpPort)
	if *grpcPort < -1 || *grpcPort > 65535 {
		return usageError{fmt.Errorf("dev: --grpc-port %d: want a port, 0 (a free port) or -1 (none)", *grpcPort)}
	}
	if *grpcPort >= 0 {
		cfg.GRPCAddr = fmt.Sprintf("%s:%d", *host, *grpcPort)
	}
	if *awsEndpoint != "" {
		if cfg.Bucket != "" || sup.sequencers != 1 || sup.nodes != 1 {
			return usageError{fmt.Errorf("dev: --aws names its own bucket and runs in the single-process mode: drop --bucket, --sequencers and --nodes")}
		}
		cfg.AWS = &devcluster.AWS{Endpoint: *awsEndpoint, Region: cfg.S3Region}
		cfg.S3Endpoint = ""
	}
	if *ceWindow <= 0 || *ceWindow > meta.MaxEventWindow {
		return usageError{fmt.Errorf("dev: --cloudevents-dedup-window %v: want up to %v", *ceWindow, meta.MaxEventWindow)}
	}
	cfg.CloudEvents.Window = *ceWindow
	if *kafkaPort < -1 || *kafkaPort > 65535 {
		return usageError{fmt.Errorf("dev: --kafka-port %d: want a port, 0 (a free port) or -1 (none)", *kafkaPort)}
	}
	if *kafkaPort >= 0 {
		cfg.KafkaAddr = fmt.Sprintf("%s:%d", *host, *kafkaPort)
	}
	cfg.SequencerRPC = fmt.Sprintf("%s:%d", *host, *rpcPort)
	cfg.SequencerRaft = fmt.Sprintf("%s:%d", *host, *raftPort)
	if *useTLS {
		files, err := tlsconf.GenerateDev(filepath.Join(cfg.DataDir, "tls"), devHosts(*host))
		if err != nil {
			return fmt.Errorf("dev: --tls: %w", err)
		}
		cfg.TLS = &files
	}
	if sup.sequencers != 1 || sup.nodes != 1 {
		if cfg.ObjstoreLatency != "none" && cfg.ObjstoreLatency != "" {
			return usageError{fmt.Errorf("dev: --objstore-latency works in the single-process mode only, not with --sequencers/--nodes")}
		}
		sup.otlpHTTPPort, sup.otlpGRPCPort = otlpf.supervisedPorts()
		sup.express = expressArgs
		return runSupervised(ctx, sup, cfg, *level, *host, *rpcPort, *raftPort, *httpPort, *grpcPort, max(*kafkaPort, 0))
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := devcluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	c.PrintBanner(os.Stdout)
	<-ctx.Done()
	fmt.Fprintln(os.Stdout, "loam dev: stopping (flushing buffered writes)")
	sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	return c.Close(sctx)
}

// devHosts are the names the generated service certificate carries besides localhost and
// the loopback addresses: the --host address and, when it is a wildcard, this machine's
// name.
func devHosts(host string) []string {
	var out []string
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		out = append(out, host)
	} else if name, err := os.Hostname(); err == nil {
		out = append(out, name)
	}
	return out
}

func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

// ---- loam dev --sequencers N --nodes M: the supervised multi-process cluster ----

type supervisedFlags struct {
	sequencers, nodes          int
	sequencerBin, lognodeBin   string
	sequencerArgs, lognodeArgs string
	stopTimeout                time.Duration
	otlpHTTPPort, otlpGRPCPort int // dev_otlp.go
	zones                      string
	childArgs                  []string
	childHosts, childNetns     map[string]string
	dropEnv                    []string // loam dev's own variables, not the children's
	express                    []string // express buckets and zones, comma-separated (dev_express.go); nil: none
}

func (f *supervisedFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.sequencers, "sequencers", 1, "sequencer voters; other than 1 (or --nodes other than 1): one process each, supervised")
	fs.IntVar(&f.nodes, "nodes", 1, "log nodes; other than 1 (or --sequencers other than 1): one process each, supervised")
	fs.StringVar(&f.sequencerBin, "sequencer-bin", os.Getenv("LOAM_SEQUENCER_BIN"), "sequencer-svc binary for a supervised cluster (env LOAM_SEQUENCER_BIN; default: this binary's loam sequencer)")
	fs.StringVar(&f.lognodeBin, "lognode-bin", os.Getenv("LOAM_LOGNODE_BIN"), "lognode-svc binary for a supervised cluster (env LOAM_LOGNODE_BIN; default: this binary's loam lognode)")
	fs.StringVar(&f.sequencerArgs, "sequencer-args", "", "extra sequencer-svc flags, space-separated (supervised cluster), e.g. \"--snapshot-threshold 64\"")
	fs.StringVar(&f.lognodeArgs, "lognode-args", "", "extra lognode-svc flags, space-separated (supervised cluster)")
	fs.DurationVar(&f.stopTimeout, "stop-timeout", 30*time.Second, "supervised cluster: how long children get after SIGTERM before SIGKILL")
	fs.StringVar(&f.zones, "zones", "", "supervised cluster: comma-separated zones; voter and log node i are in zone i mod their number (default zone-a,zone-b)")
	fs.Func("child-args", "supervised cluster, a testing aid: ID=FLAGS adds space-separated flags to one child, e.g. \"seq-2=--clock-offset 2m\" or \"node-1=--fault-profile f.json\" (repeatable)", func(v string) error {
		if id, _, ok := strings.Cut(v, "="); !ok || id == "" {
			return fmt.Errorf("want ID=FLAGS, got %q", v)
		}
		f.childArgs = append(f.childArgs, v)
		return nil
	})
	f.childHosts, f.childNetns = map[string]string{}, map[string]string{}
	for _, m := range []struct {
		name, help string
		into       map[string]string
	}{
		{"child-host", "supervised cluster, a testing aid: ID=ADDRESS binds one child to its own address instead of --host (repeatable)", f.childHosts},
		{"child-netns", "supervised cluster, a testing aid: ID=NETNS runs one child in a network namespace, with ip netns exec (repeatable)", f.childNetns},
	} {
		fs.Func(m.name, m.help, func(v string) error {
			id, val, ok := strings.Cut(v, "=")
			if !ok || id == "" || val == "" {
				return fmt.Errorf("want ID=VALUE, got %q", v)
			}
			m.into[id] = val
			return nil
		})
	}
}

// runSupervised runs `loam dev` as a supervised multi-process cluster until ctx ends or a
// signal arrives; a second signal during the stop kills the children at once.
func runSupervised(ctx context.Context, f supervisedFlags, cfg devcluster.Config, level, host string, rpcPort, raftPort, httpPort, grpcPort, kafkaPort int) error {
	bucket, err := supervisor.BucketURL(cfg.Bucket, cfg.S3Endpoint, cfg.S3Region, cfg.DataDir)
	if err != nil {
		return usageError{fmt.Errorf("dev: %w", err)}
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	var lognodeArgs []string
	if cfg.ClockOffset != 0 {
		lognodeArgs = []string{"--clock-offset", cfg.ClockOffset.String()}
	}
	if w := cfg.CloudEvents.Window; w != 0 && w != meta.DefaultEventWindow {
		lognodeArgs = append(lognodeArgs, "--cloudevents-dedup-window", strconv.FormatInt(int64(w/time.Second), 10))
	}
	if cfg.FaultProfile != "" {
		abs, err := filepath.Abs(cfg.FaultProfile)
		if err != nil {
			return usageError{fmt.Errorf("dev: --fault-profile: %w", err)}
		}
		if _, err := objstore.LoadFaultProfile(abs); err != nil {
			return usageError{fmt.Errorf("dev: --fault-profile: %w", err)}
		}
		lognodeArgs = append(lognodeArgs, "--fault-profile", abs)
	}
	lognodeArgs = append(lognodeArgs, strings.Fields(f.lognodeArgs)...)
	scfg := supervisor.Config{
		DataDir: cfg.DataDir, Host: host, Sequencers: f.sequencers, Nodes: f.nodes,
		SequencerPort: rpcPort, RaftPort: raftPort, HTTPPort: httpPort, GRPCPort: grpcPort, KafkaPort: kafkaPort, Bucket: bucket,
		OTLPHTTPPort: f.otlpHTTPPort, OTLPGRPCPort: f.otlpGRPCPort, JournalPort: cfg.Quorum.Port,
		SequencerBin: f.sequencerBin, LognodeBin: f.lognodeBin,
		SequencerArgs: strings.Fields(f.sequencerArgs), LognodeArgs: lognodeArgs,
		FlushInterval: cfg.FlushInterval, StopTimeout: f.stopTimeout, NodeAuth: cfg.Auth,
		TLS: cfg.TLS,
		Env: append([]string{"LOAM_LOG_LEVEL=" + level}, expressEnv(f.express)...), DropEnv: f.dropEnv, Out: os.Stdout, Logger: cfg.Logger,
	}
	if f.express != nil {
		scfg.ExpressBuckets, scfg.ExpressZones = strings.Split(f.express[0], ","), strings.Split(f.express[1], ",")
	}
	if !cfg.Functions.Disabled {
		scfg.Functions = &cfg.Functions
	}
	if f.zones != "" {
		scfg.Zones = strings.Split(f.zones, ",")
	}
	scfg.ChildHosts, scfg.ChildNetns = f.childHosts, f.childNetns
	for _, a := range f.childArgs {
		id, flags, _ := strings.Cut(a, "=")
		if scfg.ChildArgs == nil {
			scfg.ChildArgs = map[string][]string{}
		}
		scfg.ChildArgs[id] = append(scfg.ChildArgs[id], strings.Fields(flags)...)
	}
	s, err := supervisor.Start(ctx, scfg)
	if err != nil {
		return err
	}
	s.PrintBanner(os.Stdout)
	<-ctx.Done()
	fmt.Fprintln(os.Stdout, "loam dev: stopping (log nodes flush buffered writes first; a second Ctrl-C kills at once)")
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	go func() {
		select {
		case <-sigs:
			scancel()
		case <-sctx.Done():
		}
	}()
	return s.Close(sctx)
}
