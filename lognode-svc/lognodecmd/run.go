// Package lognodecmd is the lognode-svc command: it runs one stateless log node: it serves the native HTTP and gRPC APIs, buffers
// produces into WAL objects on the bucket, commits them through the sequencer and serves
// fetches from its caches and the bucket.
//
//	lognode-svc --id node-1 --bucket s3://my-bucket --sequencer 10.0.0.1:7070,10.0.0.2:7070
//
// With TLS on its listeners and the cluster identity towards the sequencer (docs/tls.md):
//
//	lognode-svc ... --tls-cert node.pem --tls-key node-key.pem --cluster-ca cluster-ca.pem
package lognodecmd

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/emf"
	"github.com/loamhq/loam/shared/envflag"
	"github.com/loamhq/loam/shared/meta/metagrpc"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/tlsconf"
)

// Vars are the environment variables of the flags not named by envflag's rule: every
// other flag --x-y is also set by LOAM_X_Y (docs/configuration.md).
var Vars = envflag.Vars{"id": {"LOAM_NODE_ID"}}

// Run runs a log node with the command-line arguments args (without the program name) until
// SIGINT or SIGTERM, then shuts it down. A flag not on the command line is read from its
// environment variable (Vars).
func Run(args []string) error { return run(args, nil) }

// Flags is the log node's flag set as Run defines it (for the configuration table); its
// defaults are those of the current environment.
func Flags() *flag.FlagSet {
	var out *flag.FlagSet
	_ = run(nil, func(fs *flag.FlagSet) { out = fs })
	return out
}

// run is Run; with inspect set it hands the defined flag set to it and returns.
func run(args []string, inspect func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet("lognode-svc", flag.ExitOnError)
	hostname, _ := os.Hostname()
	id := fs.String("id", env("LOAM_NODE_ID", hostname), "node id, unique in the cluster (names its WAL objects)")
	zone := fs.String("zone", env("LOAM_ZONE", ""), "availability zone of this node")
	httpAddr := fs.String("http-addr", env("LOAM_HTTP_ADDR", "127.0.0.1:8080"), "native HTTP API address")
	grpcAddr := fs.String("grpc-addr", envDefault("LOAM_GRPC_ADDR", "127.0.0.1:9090"), "native gRPC API address (host:0 picks a free port; empty: no gRPC API)")
	bucket := fs.String("bucket", env("LOAM_BUCKET", ""), "bucket URL: s3://NAME[/PREFIX]?endpoint=URL&region=R, file:///DIR or a directory")
	seqs := fs.String("sequencer", env("LOAM_SEQUENCER", "127.0.0.1:7070"), "comma-separated sequencer RPC addresses")
	coordURL := fs.String("coord", env("LOAM_COORD", coordFromTable(os.Getenv("LOAM_COORD_TABLE"))), "coordination store for the node registry: dynamodb://TABLE?endpoint=URL&region=R&create=true, bolt:///PATH (one process only) or http(s)://HOST:PORT (served by loam dev for its children; https with the cluster identity of --cluster-ca); default dynamodb://$LOAM_COORD_TABLE when that is set (the functions' variable); empty: none")
	advertise := fs.String("advertise-http", env("LOAM_ADVERTISE_HTTP", ""), "host:port clients reach this node's HTTP API at (default: the listen address)")
	cacheDir := fs.String("cache-dir", env("LOAM_CACHE_DIR", ""), "directory of the on-disk cache of segment blocks (empty: none)")
	cacheBytes := fs.Int64("cache-bytes", 1<<30, "size bound of the on-disk cache")
	tailCache := fs.Int64("tail-cache-bytes", 256<<20, "memory bound of the tail cache (batches this node committed)")
	chunkCache := fs.Int64("chunk-cache-bytes", 256<<20, "memory bound of the chunk cache (WAL chunks and segment blocks read from the bucket)")
	indexCache := fs.Int64("index-cache-bytes", 64<<20, "memory bound of the offset-index entries cached for all partitions")
	maxParts := fs.Int("max-partitions", 32768, "partitions whose read state is tracked at once (LRU)")
	flush := fs.Duration("flush-interval", 250*time.Millisecond, "standard-class WAL flush interval")
	level := fs.String("log-level", env("LOAM_LOG_LEVEL", "info"), "debug, info, warn or error")
	var limits httpapi.Limits
	limits.RegisterFlags(fs)
	shutdown := fs.Duration("shutdown-timeout", 15*time.Second, "on SIGTERM: how long requests in flight get to finish (open long-polls answer at once)")
	drain := fs.Duration("writer-drain-timeout", node.DefaultWriterDrainTimeout, "on SIGTERM, after the HTTP server stopped: how long buffered writes get to commit")
	tlsCert := fs.String("tls-cert", env("LOAM_TLS_CERT", ""), "PEM certificate (chain) every listener serves (HTTP, gRPC), reloaded when the file changes; empty: plaintext")
	tlsKey := fs.String("tls-key", env("LOAM_TLS_KEY", ""), "PEM private key of --tls-cert")
	clusterCA := fs.String("cluster-ca", env("LOAM_CLUSTER_CA", ""), "PEM cluster CA: the sequencer's certificate must chain to it, and calls to the sequencer present --cluster-cert (mutual TLS); empty: plaintext to the sequencer")
	clusterCert := fs.String("cluster-cert", env("LOAM_CLUSTER_CERT", ""), "PEM certificate of the cluster CA this node presents to the sequencer (default: --tls-cert)")
	clusterKey := fs.String("cluster-key", env("LOAM_CLUSTER_KEY", ""), "PEM private key of --cluster-cert (default: --tls-key)")
	clusterName := fs.String("cluster-server-name", env("LOAM_CLUSTER_SERVER_NAME", ""), "name the sequencer's certificates carry (default: the host of each --sequencer address)")
	clockOffset := fs.Duration("clock-offset", 0, "testing aid: shift this node's clock by this much (e.g. 1h, -90s) wherever it stamps (WAL object times, commit stamps, record timestamps)")
	var af authFlags
	af.register(fs)
	var ff faultFlags
	ff.register(fs)
	var ef emf.Flags
	ef.Register(fs)
	var cef ceFlags
	cef.register(fs)
	var of otlpFlags
	of.register(fs)
	var kf kafkaFlags
	kf.register(fs)
	var pf peerFlags
	pf.register(fs)
	var xf expressFlags
	xf.register(fs)
	var kmf kmsFlags // kms_flags.go
	kmf.register(fs)
	var jf journalFlags // journal_flags.go
	jf.register(fs)
	var olf offloadFlags // offload_flags.go
	olf.register(fs)
	if inspect != nil {
		inspect(fs)
		return nil
	}
	if err := envflag.Parse(fs, args, Vars); err != nil {
		return err
	}

	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	if *bucket == "" {
		return fmt.Errorf("--bucket is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b, err := objstore.Open(ctx, *bucket)
	if err != nil {
		return err
	}
	defer b.Close()
	b, faults, err := ff.wrap(ctx, b, log)
	if err != nil {
		return err
	}
	var listenTLS *tlsconf.Source
	if *tlsCert != "" || *tlsKey != "" {
		if listenTLS, err = tlsconf.Load(tlsconf.Config{CertFile: *tlsCert, KeyFile: *tlsKey, Logger: log}); err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	}
	var mopts []metagrpc.Option
	var clusterID *tlsconf.Source // presented to the sequencer, an https:// --coord and zone peers
	if *clusterCA != "" {
		cert, key := *clusterCert, *clusterKey
		if cert == "" && key == "" {
			cert, key = *tlsCert, *tlsKey
		}
		id, err := tlsconf.ClusterClient(*clusterCA, cert, key, *clusterName)
		if err != nil {
			return fmt.Errorf("--cluster-ca/--cluster-cert: %w", err)
		}
		mopts = append(mopts, metagrpc.WithTransportCredentials(id.ClientCredentials()))
		clusterID = id
	} else if *clusterCert != "" {
		return fmt.Errorf("--cluster-cert needs --cluster-ca")
	}
	mc, err := metagrpc.Dial(ctx, strings.Split(*seqs, ","), mopts...)
	if err != nil {
		return err
	}
	defer mc.Close()
	cfg := node.Config{NodeID: *id, Zone: *zone, HTTPAddr: *httpAddr, GRPCAddr: *grpcAddr, AdvertiseHTTP: *advertise, Bucket: b, Meta: mc,
		FlushInterval: *flush, Logger: log, DiskCacheDir: *cacheDir, DiskCacheBytes: *cacheBytes,
		TailCacheBytes: *tailCache, ChunkCacheBytes: *chunkCache, IndexCacheBytes: *indexCache, MaxPartitions: *maxParts,
		Limits: limits, WriterDrainTimeout: *drain, TLS: listenTLS}
	if faults != nil {
		cfg.Collectors = append(cfg.Collectors, faults)
	}
	if cfg.Auth, err = af.setup(ctx, mc, log); err != nil {
		return err
	}
	if cfg.CloudEvents, err = cef.config(); err != nil {
		return err
	}
	if err := of.apply(&cfg); err != nil {
		return err
	}
	if err := kf.apply(&cfg); err != nil {
		return err
	}
	if err := pf.apply(&cfg); err != nil {
		return err
	}
	if err := kmf.apply(ctx, &cfg); err != nil {
		return err
	}
	cfg.PeerIdentity = clusterID
	if xb, err := xf.apply(ctx, &cfg, *zone, log); err != nil {
		return err
	} else if xb != nil {
		defer xb.Close()
	}
	if err := jf.apply(&cfg); err != nil {
		return err
	}
	if err := olf.apply(&cfg); err != nil {
		return err
	}
	if off := *clockOffset; off != 0 {
		cfg.Now = func() time.Time { return time.Now().Add(off) }
	}
	if *coordURL != "" {
		store, err := openCoord(ctx, *coordURL, clusterID)
		if err != nil {
			return err
		}
		defer store.Close()
		cfg.Registry = &coord.Registry{Store: store}
	}
	n, err := node.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if err := ef.Start(ctx, n.Gatherer(), emf.LogNodeMetrics, map[string]string{"Zone": *zone}, log); err != nil {
		n.Close(context.Background())
		return err
	}
	<-ctx.Done()
	// ECS sends SIGKILL 30 s after SIGTERM: the defaults (15 s + 10 s) fit inside it.
	sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	return n.Close(sctx)
}

// openCoord opens the coordination store named by u; an https:// one is called with the
// cluster identity id when there is one (mutual TLS), else trusting the system's roots.
func openCoord(ctx context.Context, u string, id *tlsconf.Source) (coord.Store, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, fmt.Errorf("--coord %q: %w", u, err)
	}
	switch pu.Scheme {
	case "dynamodb":
		q := pu.Query()
		return coord.NewDynamo(ctx, coord.DynamoConfig{Table: pu.Host, Endpoint: q.Get("endpoint"), Region: q.Get("region"),
			CreateTable: q.Get("create") == "true"})
	case "bolt":
		return coord.NewBolt(pu.Path)
	case "http":
		return coord.NewHTTP(u), nil
	case "https":
		if id == nil {
			return coord.NewHTTP(u), nil
		}
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: id.ClientConfig()}}
		return coord.NewHTTPClient(u, hc), nil
	default:
		return nil, fmt.Errorf("--coord %q: want dynamodb://TABLE, bolt:///PATH or http://HOST:PORT (a coordination store served by loam dev)", u)
	}
}

// coordFromTable is the coordination store URL of a DynamoDB table name, as the functions
// take it (LOAM_COORD_TABLE, with LOAM_COORD_ENDPOINT); "" for none.
func coordFromTable(table string) string {
	if table == "" {
		return ""
	}
	u := url.URL{Scheme: "dynamodb", Host: table}
	if ep := os.Getenv("LOAM_COORD_ENDPOINT"); ep != "" {
		u.RawQuery = url.Values{"endpoint": {ep}}.Encode()
	}
	return u.String()
}

// envDefault is the value of variable name when it is set, even to "", else def.

func envDefault(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
