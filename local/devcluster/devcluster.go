// Package devcluster is the embedded all-in-one cluster behind `loam dev`: a single-voter
// Raft sequencer and a log node in one process, on a filesystem bucket and bbolt under one
// data directory (or on any S3 API). A restart on the same data directory keeps all data.
//
// The sequencer is real Raft (one voter) serving its gRPC API on the sequencer RPC port;
// the log node in the same process calls it in-process. The namespace "default" exists in
// every new sequencer state.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/lognode-svc/otlp"
	"github.com/loamhq/loam/sequencer-svc/server"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/tlsconf"
)

// Config configures the embedded cluster. Zero values take the documented defaults (ports in the README).
type Config struct {
	DataDir       string // default ./loam-data
	Bucket        string // "" (filesystem bucket under DataDir), or s3://NAME[/PREFIX]
	S3Endpoint    string // S3 API endpoint (default: AWS, or AWS_ENDPOINT_URL)
	S3Region      string
	HTTPAddr      string // default 127.0.0.1:8080
	GRPCAddr      string // native gRPC API; empty (and no GRPCListener): none (loam dev: 127.0.0.1:9090)
	KafkaAddr     string // Kafka protocol, plaintext (SASL/PLAIN or SCRAM with an API key when Auth); empty (and no KafkaListener): none (loam dev: 127.0.0.1:9092)
	SequencerRPC  string // default 127.0.0.1:7070
	SequencerRaft string // default 127.0.0.1:7071
	NodeID        string // default dev-1
	FlushInterval time.Duration
	// ClockOffset shifts the log node's clock (its WAL object times, commit stamps and
	// record timestamps): a testing aid (loam dev --clock-offset). The sequencer keeps
	// the true clock.
	ClockOffset time.Duration
	Logger      *slog.Logger
	// Limits are the log node's request limits and HTTP timeouts (zero: the defaults);
	// WriterDrainTimeout bounds the flush of buffered writes at Close (zero: the default).
	Limits             httpapi.Limits
	WriterDrainTimeout time.Duration
	// ObjstoreLatency names an objstore latency model ("", "none", "s3-standard",
	// "s3-express") that delays every call to the bucket, Store included (seed 1).
	ObjstoreLatency string
	// Functions tunes the background functions (segmenter, retention, compaction, gc) run
	// in-process; see functions.go.
	Functions FunctionsConfig
	// TLS, when set, names certificate files (tlsconf.GenerateDev's, loam dev --tls): the
	// log node's listeners serve TLS with them and the sequencer's RPC and Raft listeners
	// require the cluster identity (a certificate of their CA). nil: plaintext.
	TLS *tlsconf.DevFiles

	// Auth makes the log node check API keys (loam dev --auth). AdminKey is the bootstrap
	// admin key to store (LOAM_ADMIN_KEY); empty: a new one is made when the metastore
	// holds no live admin key, and BootstrapKey answers it.
	Auth     bool
	AdminKey string

	// OTLP logs ingest: OTLP/HTTP and OTLP/gRPC addresses (empty: not served; loam dev:
	// 127.0.0.1:4318 and 127.0.0.1:4317) and settings (package otlp).
	OTLPHTTPAddr, OTLPGRPCAddr string
	OTLP                       otlp.Settings

	// Seams for tests and benchmarks.
	Store         objstore.Bucket // used instead of opening Bucket; Close leaves it open
	HTTPListener  net.Listener    // used instead of listening on HTTPAddr
	GRPCListener  net.Listener    // used instead of listening on GRPCAddr
	KafkaListener net.Listener    // used instead of listening on KafkaAddr
	// AWS, when set, runs the cluster on an AWS API endpoint (moto_server, LocalStack): an
	// S3 bucket, a DynamoDB coordination table, and notifications through SQS to the
	// segmenter (aws.go). Bucket, S3Endpoint and Store must then be empty.
	AWS *AWS
	// CloudEvents sets the dedup ledger (loam dev --cloudevents-dedup-window; zero: the
	// defaults).
	CloudEvents httpapi.CloudEventsConfig
	// WrapCoord, when set, wraps the coordination store (loam cost counts its requests).
	WrapCoord func(coord.Store) coord.Store
	// FaultProfile names a JSON fault profile (docs/faults.md; loam dev --fault-profile):
	// every bucket call, the functions' included, passes a fault-injecting bucket whose
	// counters are on the log node's /metrics. The file is re-read every second.
	FaultProfile string
	// Express is the express class's three zonal buckets (express.go; loam dev
	// --express-dirs, --express-buckets): by default three directories under DataDir.
	Express ExpressConfig
	// KMSEndpoint is the KMS API the log node gets namespace keys from (loam dev --kms
	// embedded or --kms-endpoint; docs/encryption.md); empty: none.
	KMSEndpoint string
	// Quorum serves class quorum from three in-process journal members (quorum.go).
	Quorum QuorumConfig
}

func (c *Config) defaults() {
	if c.DataDir == "" {
		c.DataDir = "loam-data"
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:8080"
	}
	if c.SequencerRPC == "" {
		c.SequencerRPC = "127.0.0.1:7070"
	}
	if c.SequencerRaft == "" {
		c.SequencerRaft = "127.0.0.1:7071"
	}
	if c.NodeID == "" {
		c.NodeID = "dev-1"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Cluster is a running embedded cluster.
type Cluster struct {
	cfg    Config
	bucket objstore.Bucket
	seq    *server.Node
	client meta.Client
	coord  coord.Store
	node   *node.Node
	fns    *functions
	aws    *awsState // the AWS mode's queue (aws.go); nil otherwise

	quorum *quorumPeers // quorum.go; nil without Config.Quorum

	bootstrapKey string // auth.go

	faults     *objstore.FaultBucket // faults.go; nil without Config.FaultProfile
	stopFaults context.CancelFunc
}

// Start starts the sequencer and the log node.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg.defaults()
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("devcluster: data dir: %w", err)
	}
	model, err := objstore.LatencyModelNamed(cfg.ObjstoreLatency)
	if err != nil {
		return nil, fmt.Errorf("devcluster: %w", err)
	}
	c := &Cluster{cfg: cfg}
	switch {
	case cfg.AWS != nil:
		if cfg.Store != nil || cfg.Bucket != "" || cfg.S3Endpoint != "" {
			return nil, errors.New("devcluster: AWS names the bucket: Store, Bucket and S3Endpoint must be empty")
		}
		cfg.AWS.defaults()
		b, err := cfg.AWS.openBucket(ctx)
		if err != nil {
			return nil, err
		}
		if c.aws, err = cfg.AWS.setupQueue(ctx, b); err != nil {
			b.Close()
			return nil, err
		}
		c.bucket = b
	case cfg.Store != nil:
		c.bucket = nopCloser{cfg.Store}
	default:
		if c.bucket, err = openBucket(ctx, cfg, dir); err != nil {
			return nil, err
		}
	}
	c.bucket = objstore.WithLatencyModel(c.bucket, model, 1)
	if err := c.wrapFaults(); err != nil {
		c.bucket.Close()
		return nil, err
	}
	express, err := c.openExpress(ctx, dir)
	if err != nil {
		c.bucket.Close()
		return nil, err
	}
	if express != nil {
		c.bucket, _ = objstore.NewRouted(c.bucket, express) // the functions read and delete both
	}
	scfg := server.DefaultConfig()
	scfg.ID = "seq-1"
	scfg.DataDir = filepath.Join(dir, "sequencer")
	scfg.RPCAddr = cfg.SequencerRPC
	scfg.RaftAddr = cfg.SequencerRaft
	scfg.Bootstrap = true
	scfg.Logger = cfg.Logger.With("svc", "sequencer")
	scfg.RaftLogOutput = raftLogWriter{cfg.Logger}
	scfg.FastTimeouts() // one voter on one machine: leader within milliseconds
	var listenTLS *tlsconf.Source
	if cfg.TLS != nil {
		if scfg.TLS, err = tlsconf.Load(cfg.TLS.DevConfig()); err != nil {
			c.bucket.Close()
			return nil, fmt.Errorf("devcluster: %w", err)
		}
		if listenTLS, err = tlsconf.Load(tlsconf.Config{CertFile: cfg.TLS.Cert, KeyFile: cfg.TLS.Key}); err != nil {
			c.bucket.Close()
			return nil, fmt.Errorf("devcluster: %w", err)
		}
	}
	c.seq, err = server.Start(ctx, scfg)
	if err != nil {
		c.bucket.Close()
		return nil, fmt.Errorf("devcluster: sequencer: %w", err)
	}
	c.client = server.NewLocalClient(c.seq)
	if cfg.AWS != nil {
		if c.coord, err = cfg.AWS.openCoord(ctx); err != nil {
			c.Close(ctx)
			return nil, err
		}
	} else {
		bolt, err := coord.NewBolt(filepath.Join(dir, "coord.db"))
		if err != nil {
			c.Close(ctx)
			return nil, fmt.Errorf("devcluster: coordination store: %w", err)
		}
		c.coord = bolt
	}
	if cfg.WrapCoord != nil {
		c.coord = cfg.WrapCoord(c.coord)
	}
	var authn *auth.Authenticator
	if cfg.Auth {
		if authn, c.bootstrapKey, err = startAuth(ctx, c.client, cfg.AdminKey); err != nil {
			c.Close(ctx)
			return nil, fmt.Errorf("devcluster: %w", err)
		}
	}
	var kmsClient *kms.Client
	if cfg.KMSEndpoint != "" {
		if kmsClient, err = envelope.NewKMSClient(ctx, cfg.KMSEndpoint, ""); err != nil {
			c.Close(ctx)
			return nil, fmt.Errorf("devcluster: %w", err)
		}
	}
	var qcfg node.QuorumConfig
	if c.quorum, qcfg, err = startQuorum(cfg.Quorum, dir, cfg.NodeID, c.bucket, c.client); err != nil {
		c.Close(ctx)
		return nil, fmt.Errorf("devcluster: quorum class: %w", err)
	}
	c.node, err = node.Start(ctx, node.Config{
		KMS: kmsOrNil(kmsClient), KMSAdmin: kmsAdminOrNil(kmsClient),
		Auth:          authn,
		Registry:      &coord.Registry{Store: c.coord},
		DiskCacheDir:  filepath.Join(dir, "cache"),
		NodeID:        cfg.NodeID,
		Zone:          "local",
		HTTPAddr:      cfg.HTTPAddr,
		Listener:      cfg.HTTPListener,
		GRPCAddr:      cfg.GRPCAddr,
		GRPCListener:  cfg.GRPCListener,
		KafkaAddr:     cfg.KafkaAddr,
		KafkaListener: cfg.KafkaListener,
		KafkaNoAuth:   !cfg.Auth, // with keys checked, Kafka clients authenticate with SASL
		Bucket:        c.bucket,
		ExpressBucket: expressBucket(express),
		Meta:          c.client,
		FlushInterval: cfg.FlushInterval,
		Logger:        cfg.Logger.With("svc", "lognode"),
		Limits:        cfg.Limits,
		Now:           offsetClock(cfg.ClockOffset),
		TLS:           listenTLS,
		OTLPHTTPAddr:  cfg.OTLPHTTPAddr,
		OTLPGRPCAddr:  cfg.OTLPGRPCAddr,
		OTLP:          cfg.OTLP,

		WriterDrainTimeout: cfg.WriterDrainTimeout,
		CloudEvents:        cfg.CloudEvents,
		Collectors:         c.collectors(),

		Quorum: qcfg,
	})
	if err != nil {
		c.Close(ctx)
		return nil, fmt.Errorf("devcluster: log node: %w", err)
	}
	if !cfg.Functions.Disabled {
		if c.fns, err = startFunctions(c); err != nil {
			c.Close(ctx)
			return nil, fmt.Errorf("devcluster: functions: %w", err)
		}
	}
	return c, nil
}

func openBucket(ctx context.Context, cfg Config, dir string) (objstore.Bucket, error) {
	if cfg.Bucket == "" {
		return objstore.NewFS(filepath.Join(dir, "bucket"))
	}
	name, prefix, ok := parseS3(cfg.Bucket)
	if !ok {
		return nil, fmt.Errorf("devcluster: bucket %q: want s3://NAME[/PREFIX]", cfg.Bucket)
	}
	endpoint := cfg.S3Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	return objstore.NewS3(ctx, objstore.S3Config{Bucket: name, Prefix: prefix, Endpoint: endpoint, Region: cfg.S3Region,
		PathStyle: endpoint != "", CreateBucket: true})
}

func parseS3(u string) (bucket, prefix string, ok bool) {
	rest, found := strings.CutPrefix(u, "s3://")
	if !found || rest == "" {
		return "", "", false
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	return bucket, prefix, bucket != ""
}

// HTTPAddr is the log node's HTTP API address.
func (c *Cluster) HTTPAddr() string { return c.node.Addr() }

// Gatherer is the log node's metrics registry (what its /metrics serves).
func (c *Cluster) Gatherer() prometheus.Gatherer { return c.node.Gatherer() }

// OTLPHTTPAddr and OTLPGRPCAddr are the log node's OTLP addresses, or "" when it serves
// that transport not.
func (c *Cluster) OTLPHTTPAddr() string { return c.node.OTLPHTTPAddr() }
func (c *Cluster) OTLPGRPCAddr() string { return c.node.OTLPGRPCAddr() }

// KafkaAddr is the log node's Kafka listener address, or "" when it serves none.
func (c *Cluster) KafkaAddr() string { return c.node.KafkaAddr() }

// GRPCAddr is the log node's gRPC API address, or "" when it serves none.
func (c *Cluster) GRPCAddr() string { return c.node.GRPCAddr() }

// PrintBanner writes what is served where.
func (c *Cluster) PrintBanner(w io.Writer) {
	bucket := c.cfg.Bucket
	if a := c.cfg.AWS; a != nil {
		bucket = fmt.Sprintf("s3://%s at %s (table %s; wal/ notifications through queue %s)", a.Bucket, awsName(a.Endpoint), a.Table, a.Queue)
	} else if bucket == "" {
		bucket = filepath.Join(c.cfg.DataDir, "bucket")
	}
	fmt.Fprintf(w, "loam dev: one sequencer (Raft, 1 voter) and one log node\n")
	fmt.Fprintf(w, "  native HTTP API   %s   (namespace %q; /healthz, /metrics)\n", c.node.URL(), meta.DefaultNS)
	grpcurl, seq := "-plaintext", "(gRPC)"
	if t := c.cfg.TLS; t != nil {
		grpcurl, seq = "-cacert "+t.CA, "(gRPC, mutual TLS: present "+t.ClientCert+")"
	}
	if a := c.node.GRPCAddr(); a != "" {
		fmt.Fprintf(w, "  native gRPC API   %s   (loam.v1; health, reflection: grpcurl %s %s list)\n", a, grpcurl, a)
	}
	if a := c.node.OTLPHTTPAddr(); a != "" {
		fmt.Fprintf(w, "  OTLP/HTTP logs    %s   (POST /v1/logs; default stream %q)\n", a, c.cfg.OTLP.DefaultStream)
	}
	if a := c.node.OTLPGRPCAddr(); a != "" {
		fmt.Fprintf(w, "  OTLP/gRPC logs    %s   (LogsService/Export)\n", a)
	}
	if a := c.node.KafkaAddr(); a != "" {
		if c.cfg.Auth {
			fmt.Fprintf(w, "  Kafka protocol    %s   (plaintext, SASL/PLAIN or SCRAM with an API key: kcat -b %s -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=PLAIN -X sasl.username=default -X sasl.password=$LOAM_API_KEY -L; an admin key acts in the namespace the user name names)\n", a, a)
		} else {
			fmt.Fprintf(w, "  Kafka protocol    %s   (plaintext, no SASL, namespace %q: kcat -b %s -L)\n", a, meta.DefaultNS, a)
		}
	}
	fmt.Fprintf(w, "  sequencer RPC     %s   %s\n", c.cfg.SequencerRPC, seq)
	fmt.Fprintf(w, "  sequencer Raft    %s\n", c.cfg.SequencerRaft)
	fmt.Fprintf(w, "  data dir          %s\n", c.cfg.DataDir)
	fmt.Fprintf(w, "  bucket            %s\n", bucket)
	if d := c.expressBanner(); d != "" {
		fmt.Fprintf(w, "  express class     %s\n", d)
	}
	if c.fns != nil {
		fmt.Fprintf(w, "  functions         %s\n", c.fns.describe())
	}
	if t := c.cfg.TLS; t != nil {
		fmt.Fprintf(w, "TLS: a local CA in %s issued the certificates; trust %s:\n", filepath.Dir(t.CA), t.CA)
		fmt.Fprintf(w, "  curl --cacert %s %s/healthz\n", t.CA, c.node.URL())
		if a := c.node.GRPCAddr(); a != "" {
			fmt.Fprintf(w, "  grpcurl -cacert %s %s list\n", t.CA, a)
		}
		fmt.Fprintf(w, "  export LOAM_CA_CERT=%s LOAM_SERVER=%s   (the loam CLI)\n", t.CA, c.node.URL())
	}
	c.printAuth(w)
	fmt.Fprintf(w, "Try: loam stream create orders --partitions 4 && echo '{\"hello\":1}' | loam produce orders && loam consume orders\n")
}

// Close stops the log node (flushing buffered writes), then the sequencer.
func (c *Cluster) Close(ctx context.Context) error {
	var err error
	if c.fns != nil {
		c.fns.close()
	}
	if c.node != nil {
		err = errors.Join(err, c.node.Close(ctx))
	}
	c.quorum.close()
	if c.coord != nil {
		err = errors.Join(err, c.coord.Close())
	}
	if c.client != nil {
		err = errors.Join(err, c.client.Close())
	}
	if c.seq != nil {
		err = errors.Join(err, c.seq.Close())
	}
	if c.bucket != nil {
		err = errors.Join(err, c.bucket.Close())
	}
	if c.stopFaults != nil {
		c.stopFaults()
	}
	return err
}

// DataDir is the cluster's data directory.
func (c *Cluster) DataDir() string { return c.cfg.DataDir }

// Meta is the in-process sequencer client.
func (c *Cluster) Meta() meta.Client { return c.client }

// Bucket is the cluster's bucket.
func (c *Cluster) Bucket() objstore.Bucket { return c.bucket }

type nopCloser struct{ objstore.Bucket }

func (nopCloser) Close() error { return nil }

// raftLogWriter sends hashicorp/raft's own log lines to the cluster logger at debug level.
type raftLogWriter struct{ log *slog.Logger }

func (w raftLogWriter) Write(p []byte) (int, error) {
	w.log.Debug(strings.TrimSpace(string(p)), "svc", "raft")
	return len(p), nil
}

// offsetClock is time.Now shifted by off (nil, the default clock, when off is 0).
func offsetClock(off time.Duration) func() time.Time {
	if off == 0 {
		return nil
	}
	return func() time.Time { return time.Now().Add(off) }
}
