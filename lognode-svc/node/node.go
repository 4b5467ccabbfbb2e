// Package node wires a log node: the write path of each served durability class, the read
// path, the sequencer watch that keeps the read path current, the HTTP API and the gRPC API.
//
// A log node is stateless: everything it holds is a cache of the bucket and the sequencer,
// so it may be killed at any time. Start runs it; Close flushes buffered writes and stops.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/grpcapi"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/kafka"
	"github.com/loamhq/loam/lognode-svc/kafka/group"
	"github.com/loamhq/loam/lognode-svc/otlp"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/tlsconf"
)

// DefaultWriterDrainTimeout is Config.WriterDrainTimeout's default.
const DefaultWriterDrainTimeout = 10 * time.Second

// Config configures a log node.
type Config struct {
	NodeID          string
	Zone            string
	HTTPAddr        string       // default 127.0.0.1:8080
	Listener        net.Listener // overrides HTTPAddr (tests)
	Bucket          objstore.Bucket
	Meta            meta.Client
	FlushInterval   time.Duration // standard class, default 250 ms
	MaxBufferBytes  int           // default 8 MiB
	TailCacheBytes  int64
	ChunkCacheBytes int64
	// IndexCacheBytes and MaxPartitions bound the read path's index-entry cache and its
	// tracked partitions (reader.Config; zero: the reader's defaults).
	IndexCacheBytes int64
	MaxPartitions   int
	DiskCacheDir    string         // on-disk cache of segment blocks; empty: none
	DiskCacheBytes  int64          // default 1 GiB
	Limits          httpapi.Limits // request limits and HTTP server timeouts (zero: httpapi defaults)
	// WriterDrainTimeout bounds how long Close waits for buffered writes to commit once the
	// HTTP server has stopped (default 10 s). It is a fresh deadline, not Close's context's.
	WriterDrainTimeout time.Duration
	Logger             *slog.Logger
	Now                func() time.Time

	// Registry, when set, is the coordination store's node registry: the node heartbeats
	// into it and serves GET /v1/cluster/nodes from it.
	Registry      *coord.Registry
	AdvertiseHTTP string        // host:port clients reach the HTTP API at (default: the listener's)
	HeartbeatTTL  time.Duration // default 10 s; heartbeats go every third of it

	// GRPCAddr is the native gRPC API's address (lognode-svc and loam dev default to
	// 127.0.0.1:9090); empty with no GRPCListener: the node serves no gRPC API.
	GRPCAddr     string
	GRPCListener net.Listener // overrides GRPCAddr (tests)

	// TLS, when set, is the certificate every listener serves (HTTP and gRPC), reloaded
	// when its files change; nil: plaintext. Client certificates are not asked for: API
	// keys authenticate users, transport security stays separate.
	TLS *tlsconf.Source

	// Auth checks the API key of every HTTP request and gRPC call (package auth); nil:
	// the node serves without authentication.
	Auth *auth.Authenticator

	// ---- CloudEvents (httpapi/cloudevents.go) ----

	// CloudEvents sets the dedup ledger's window (--cloudevents-dedup-window), claim
	// lifetime and namespace cap, for HTTP and gRPC ingest.
	CloudEvents httpapi.CloudEventsConfig
	// OTLP logs ingest (package otlp). OTLPHTTPAddr serves OTLP/HTTP POST /v1/logs and
	// OTLPGRPCAddr OTLP/gRPC LogsService (lognode-svc and loam dev default to
	// 127.0.0.1:4318 and 127.0.0.1:4317); empty with no listener: that transport is not
	// served. Both serve TLS when TLS is set, and check keys when Auth is set.
	OTLPHTTPAddr     string
	OTLPHTTPListener net.Listener // overrides OTLPHTTPAddr (tests)
	OTLPGRPCAddr     string
	OTLPGRPCListener net.Listener // overrides OTLPGRPCAddr (tests)
	OTLP             otlp.Settings
	// ---- Kafka wire-protocol gateway (package kafka, docs/kafka.md) ----

	// KafkaAddr is the Kafka listener's address (loam dev: 127.0.0.1:9092); empty with no
	// KafkaListener: the node serves no Kafka protocol.
	KafkaAddr     string
	KafkaListener net.Listener // overrides KafkaAddr (tests)
	// KafkaAdvertise is the host:port clients reach this node's Kafka listener at: the node
	// registry records it and Metadata names it (default: the listener's address).
	KafkaAdvertise string
	// KafkaAdvertisedListener, when set, is a load balancer's host:port: Metadata names it
	// as the only broker and group requests are forwarded to their coordinator.
	KafkaAdvertisedListener string
	// KafkaNoAuth serves the Kafka listener without SASL even when Auth is set; without
	// it, Auth makes the listener require SASL (PLAIN or SCRAM) with an API key.
	KafkaNoAuth bool
	// KafkaMaxFrameBytes bounds one Kafka request frame (default kafka.DefaultMaxFrameBytes).
	KafkaMaxFrameBytes int
	// KafkaGroups serves the consumer-group API keys (package kafka/group); nil: groups
	// are not served.
	KafkaGroups kafka.GroupHandler

	// ---- Zone peers' tail caches (package peerfill) ----

	// PeerAddr is the peer listener's address (lognode-svc: 127.0.0.1:0; ECS: 0.0.0.0:7080):
	// the node sends what it commits to the live nodes of its zone in the Registry, which
	// put it in their tail caches, and takes theirs. Empty with no PeerListener, or no
	// Registry: no fills either way.
	PeerAddr     string
	PeerListener net.Listener // overrides PeerAddr (tests)
	// PeerAdvertise is the host:port peers reach the listener at, recorded in the registry
	// (default: the listener's address).
	PeerAdvertise string
	// PeerIdentity is the cluster identity (the CA and a certificate it issued): the peer
	// listener then requires a client certificate of the cluster CA, and fills present
	// this one. nil: plaintext (a cluster on loopback).
	PeerIdentity *tlsconf.Source
	// PeerQueueBytes bounds the commits waiting to be sent to peers (default 64 MiB);
	// beyond it they are dropped, and peers read them from the bucket.
	PeerQueueBytes int64

	// ---- Express class (docs/express.md) ----

	// ExpressBucket, when set, is the express class's two-of-three zonal bucket
	// (objstore.Express, reading this node's zone first): the node serves streams of class
	// express, writing their WAL objects (wal/express/<node>/<ulid>.wal) there every
	// ExpressFlushInterval (default 5 ms) with a buffer of its own, and reads those keys
	// from it. nil: streams of class express are refused.
	ExpressBucket        objstore.Bucket
	ExpressFlushInterval time.Duration
	// ExpressOffload, when set, is told of each express WAL object the node committed, so
	// the segmenter hears of it within seconds (directory buckets send no S3 event
	// notifications; see ExpressNotifier).
	ExpressOffload ExpressNotifier
	// ---- Envelope encryption of namespaces with a key (kms.go, docs/encryption.md) ----

	// KMS, when set, is the KMS API the node gets namespaces' key-encryption keys from:
	// it seals the chunks of namespaces with a key and opens them on reads. nil: such
	// chunks answer key_unavailable, and produce to such a namespace is refused.
	KMS envelope.KMS
	// KMSAdmin creates and shreds KMS keys for the key admin routes (nil: they take only
	// existing keys and cannot shred).
	KMSAdmin envelope.Admin
	// KeyRefresh is how often the node lists the namespace keys (default 1 s); KeyRotate
	// how long one key-encryption key seals new chunks (default 1 h: one GenerateDataKey
	// per namespace and hour).
	KeyRefresh time.Duration
	KeyRotate  time.Duration

	// ---- Quorum class (quorum.go, docs/quorum.md) ----

	// Quorum serves streams of class quorum from a Raft journal of log nodes (Addr empty:
	// quorum streams are refused).
	Quorum QuorumConfig

	// Fault injection (a testing aid): Collectors are registered on the node's /metrics,
	// e.g. the counters of a fault-injecting bucket (objstore.FaultBucket).
	Collectors []prometheus.Collector
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.NodeID == "":
		return errors.New("node: NodeID is required")
	case c.Bucket == nil:
		return errors.New("node: Bucket is required")
	case c.Meta == nil:
		return errors.New("node: Meta is required")
	case c.TLS != nil && !c.TLS.HasCertificate():
		return errors.New("node: TLS names no certificate for the listeners")
	}
	return c.Limits.Validate()
}

// Node is a running log node.
type Node struct {
	cfg     Config
	peers   *peers // nil: no zone-peer fills
	ln      net.Listener
	srv     *http.Server
	api     *httpapi.Server
	gln     net.Listener // nil: no gRPC API
	gsrv    *grpc.Server
	gapi    *grpcapi.Server
	kln     net.Listener // nil: no Kafka listener
	kapi    *kafka.Server
	kgroups *group.Coordinator // the Kafka group coordinator the node made; nil: none or Config's
	quorum  *quorum            // nil: class quorum not served
	reader  *reader.Reader
	writers map[string]writer.Writer
	otlp    otlpListeners
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	reg     *prometheus.Registry
}

// Start starts a log node and serves its HTTP API until Close.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:8080"
	}
	if cfg.WriterDrainTimeout <= 0 {
		cfg.WriterDrainTimeout = DefaultWriterDrainTimeout
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	log := cfg.Logger.With("node", cfg.NodeID)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range cfg.Collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("node: metrics collector: %w", err)
		}
	}

	bucket, offload, err := expressRead(cfg)
	if err != nil {
		return nil, err
	}
	var rd *reader.Reader
	keys, err := namespaceKeys(&cfg, &rd, log) // kms.go
	if err != nil {
		return nil, err
	}
	readBucket, err := sealedSegments(bucket, keys)
	if err != nil {
		return nil, err
	}
	qm, err := startQuorum(&cfg, keys, reg, log) // quorum.go; nil: class quorum not served
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			qm.closeIfAny()
		}
	}()
	var journalSrc reader.JournalSource
	if qm != nil {
		journalSrc = qm
	}
	rd, err = reader.New(reader.Config{Bucket: readBucket, Meta: cfg.Meta, TailCacheBytes: cfg.TailCacheBytes,
		ChunkCacheBytes: cfg.ChunkCacheBytes, DiskCacheDir: cfg.DiskCacheDir, DiskCacheBytes: cfg.DiskCacheBytes,
		IndexCacheBytes: cfg.IndexCacheBytes, MaxPartitions: cfg.MaxPartitions, Opener: opener(keys),
		Logger: log, Metrics: reader.NewMetrics(reg), Journal: journalSrc})
	if err != nil {
		return nil, err
	}
	sink := peerSink{keep: func(stream uint64) bool {
		_, keyed, err := keys.NamespaceOf(context.Background(), stream)
		return err == nil && !keyed
	}}
	onCommit := func(cs []writer.Committed) {
		for _, c := range cs {
			rd.Committed(c.StreamID, c.Partition, c.Entry, c.Batches...)
		}
		sink.committed(cs)
	}
	classes, err := writer.NewClasses(writer.ClassesConfig{NodeID: cfg.NodeID, Meta: cfg.Meta, Now: cfg.Now, OnCommit: onCommit,
		Logger: log, Registry: reg,
		Standard: writer.Config{FlushInterval: cfg.FlushInterval, MaxBufferBytes: cfg.MaxBufferBytes, Bucket: cfg.Bucket, Sealer: sealer(keys)},
		Express: writer.Config{FlushInterval: cfg.ExpressFlushInterval, MaxBufferBytes: cfg.MaxBufferBytes, Bucket: cfg.ExpressBucket,
			OnCommit: offload(onCommit), Sealer: sealer(keys)}})
	if err != nil {
		return nil, err
	}
	writers := classes.Map()
	apiMeta := cfg.Meta
	if qm != nil {
		writers[meta.ClassQuorum] = qm
		apiMeta = wrapMeta(cfg.Meta, qm) // quorum.go
	}
	var nodes func(ctx context.Context, zone string) ([]streamapi.Node, error)
	if cfg.Registry != nil {
		nodes = func(ctx context.Context, zone string) ([]streamapi.Node, error) {
			live, err := cfg.Registry.Live(ctx, zone)
			out := make([]streamapi.Node, len(live))
			for i, n := range live {
				out[i] = streamapi.Node{ID: n.ID, Zone: n.Zone, HTTPAddr: n.HTTPAddr}
			}
			return out, err
		}
	}
	api, err := httpapi.New(httpapi.Config{NodeID: cfg.NodeID, Meta: apiMeta, Writers: writers, Reader: rd,
		Limits: cfg.Limits, Logger: log, Registry: reg, Now: cfg.Now, Nodes: nodes, Auth: cfg.Auth,
		CloudEvents: cfg.CloudEvents, Keys: keys, KMSAdmin: cfg.KMSAdmin})
	if err != nil {
		return nil, err
	}
	gapi, err := grpcapi.New(grpcapi.Config{Meta: apiMeta, Writers: writers, Reader: rd, Streams: api, Admission: api.Admission(),
		Limits: cfg.Limits, Logger: log, Registry: reg, Now: cfg.Now, Auth: cfg.Auth, NamespaceKeys: api.NamespaceKeys()})
	if err != nil {
		return nil, err
	}
	ol, err := startOTLP(cfg, api, writers, reg, log)
	if err != nil {
		return nil, err
	}
	ln := cfg.Listener
	if ln == nil {
		ln, err = net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			ol.close()
			return nil, fmt.Errorf("node: listen %s: %w", cfg.HTTPAddr, err)
		}
	}
	gln := cfg.GRPCListener
	if gln == nil && cfg.GRPCAddr != "" {
		gln, err = net.Listen("tcp", cfg.GRPCAddr)
		if err != nil {
			ln.Close()
			ol.close()
			return nil, fmt.Errorf("node: listen %s (gRPC): %w", cfg.GRPCAddr, err)
		}
	}
	kcfg := cfg
	kcfg.Meta = apiMeta // quorum partitions' bounds from the journal (quorum.go)
	kln, kapi, kgroups, err := startKafka(kcfg, log, reg, writers, rd, api)
	if err != nil {
		ln.Close()
		if gln != nil {
			gln.Close()
		}
		ol.close()
		return nil, err
	}
	pp, err := startPeers(&cfg, rd, reg, log)
	if err != nil {
		ln.Close()
		if gln != nil {
			gln.Close()
		}
		if kln != nil {
			kln.Close()
		}
		if kapi != nil {
			kapi.Close()
		}
		if kgroups != nil {
			kgroups.Close()
		}
		ol.close()
		return nil, err
	}
	sink.p.Store(pp)
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if cfg.AdvertiseHTTP == "" {
		cfg.AdvertiseHTTP = ln.Addr().String()
	}
	if cfg.HeartbeatTTL <= 0 {
		cfg.HeartbeatTTL = 10 * time.Second
	}
	if kln != nil && cfg.KafkaAdvertise == "" {
		cfg.KafkaAdvertise = kln.Addr().String()
	}
	n := &Node{cfg: cfg, quorum: qm, peers: pp, ln: ln, api: api, gln: gln, gapi: gapi, kln: kln, kapi: kapi, kgroups: kgroups, reader: rd, writers: writers, otlp: ol, cancel: cancel, reg: reg,
		srv: &http.Server{Handler: api, ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout, ReadTimeout: cfg.Limits.ReadTimeout,
			WriteTimeout: cfg.Limits.WriteTimeout, IdleTimeout: cfg.Limits.IdleTimeout,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		n.watch(ctx, log)
	}()
	if keys != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			keys.Run(ctx)
		}()
	}
	if cfg.Registry != nil {
		if err := n.heartbeat(ctx); err != nil {
			log.Warn("node registry heartbeat failed", "err", err)
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			t := time.NewTicker(cfg.HeartbeatTTL / 3)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if err := n.heartbeat(ctx); err != nil {
						log.Warn("node registry heartbeat failed", "err", err)
					}
				}
			}
		}()
	}
	serve := n.srv.Serve
	if cfg.TLS != nil {
		// ServeTLS adds h2 to the protocols; the certificate comes from GetCertificate.
		n.srv.TLSConfig = cfg.TLS.ServerConfig()
		serve = func(ln net.Listener) error { return n.srv.ServeTLS(ln, "", "") }
	}
	go func() {
		defer n.wg.Done()
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "err", err)
		}
	}()
	if kln != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := kapi.Serve(kln); err != nil {
				log.Error("kafka server stopped", "err", err)
			}
		}()
		log.Info("kafka listener serving", "kafka", kln.Addr().String(), "advertise", cfg.KafkaAdvertise, "sasl", cfg.Auth != nil && !cfg.KafkaNoAuth)
	}
	if gln != nil {
		var gopts []grpc.ServerOption
		if cfg.TLS != nil {
			gopts = append(gopts, grpc.Creds(cfg.TLS.ServerCredentials()))
		}
		n.gsrv = gapi.NewGRPCServer(gopts...)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := n.gsrv.Serve(gln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				log.Error("grpc server stopped", "err", err)
			}
		}()
		log.Info("log node serving", "http", ln.Addr().String(), "grpc", gln.Addr().String(), "tls", cfg.TLS != nil)
	} else {
		log.Info("log node serving", "http", ln.Addr().String(), "tls", cfg.TLS != nil)
	}
	n.serveOTLP(log)
	started = true
	return n, nil
}

// watch follows the sequencer's watch stream into the read path until ctx ends. When the
// stream breaks it resubscribes from the last applied index it saw, so the sequencer
// replays what was missed (or sends a Reset when it cannot); meanwhile the node keeps
// serving what it knows.
func (n *Node) watch(ctx context.Context, log *slog.Logger) {
	backoff := 100 * time.Millisecond
	var last uint64
	for ctx.Err() == nil {
		err := n.cfg.Meta.Watch(ctx, last, func(ev meta.Event) error {
			backoff = 100 * time.Millisecond
			last = ev.AppliedIndex
			n.reader.Apply(ev)
			n.quorum.eventIfAny(ev) // quorum_placement.go
			if ev.StreamsChanged || ev.Reset {
				n.api.StreamsChanged()
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		log.Warn("sequencer watch ended, resubscribing", "err", err, "from", last)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (n *Node) heartbeat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.HeartbeatTTL/3)
	defer cancel()
	return n.cfg.Registry.Heartbeat(ctx, coord.Node{ID: n.cfg.NodeID, Zone: n.cfg.Zone, HTTPAddr: n.cfg.AdvertiseHTTP, KafkaAddr: n.cfg.KafkaAdvertise, PeerAddr: n.peerAddr(),
		JournalAddr: n.quorum.journalAddrIfAny()}, n.cfg.HeartbeatTTL)
}

// peerAddr is the peer listener's advertised address, or "".
func (n *Node) peerAddr() string {
	if n.peers == nil {
		return ""
	}
	return n.peers.advertise
}

// PeerAddr is the peer listener's address, or "" when the node fills no peers.
func (n *Node) PeerAddr() string {
	if n.peers == nil {
		return ""
	}
	return n.peers.ln.Addr().String()
}

// Addr is the HTTP API's address.
func (n *Node) Addr() string { return n.ln.Addr().String() }

// URL is the HTTP API's base URL: https:// when the node serves TLS.
func (n *Node) URL() string {
	if n.cfg.TLS != nil {
		return "https://" + n.Addr()
	}
	return "http://" + n.Addr()
}

// KafkaAddr is the Kafka listener's address, or "" when the node serves none.
func (n *Node) KafkaAddr() string {
	if n.kln == nil {
		return ""
	}
	return n.kln.Addr().String()
}

// GRPCAddr is the gRPC API's address, or "" when the node serves none.
func (n *Node) GRPCAddr() string {
	if n.gln == nil {
		return ""
	}
	return n.gln.Addr().String()
}

// Handler is the HTTP API (for in-process tests and benchmarks).
func (n *Node) Handler() http.Handler { return n.api }

// Gatherer is the node's metrics registry, the one /metrics serves.
func (n *Node) Gatherer() prometheus.Gatherer { return n.reg }

// Close stops the node: it answers open long-polls at once with what they have and ends
// gRPC subscriptions (UNAVAILABLE: resubscribe elsewhere), stops accepting requests and
// waits for those in flight until ctx ends (then cuts the gRPC calls still open), then
// flushes buffered writes within WriterDrainTimeout (a fresh deadline, so a Shutdown that
// used up ctx still leaves the writers their time), and stops the watch.
func (n *Node) Close(ctx context.Context) error {
	n.gapi.Drain()
	n.reader.Drain() // first: open polls answer now instead of holding Shutdown for their wait
	// quorum.go: the journal's open polls too.
	n.quorum.drainIfAny()
	gstopped := make(chan struct{})
	if n.gsrv != nil {
		go func() {
			n.gsrv.GracefulStop()
			close(gstopped)
		}()
	}
	ostopped := n.otlp.shutdown(ctx)
	err := n.srv.Shutdown(ctx)
	err = errors.Join(err, ostopped())
	if n.kapi != nil {
		n.kapi.Close() // a produce being served goes on to its commit below
	}
	if n.kgroups != nil {
		n.kgroups.Close()
	}
	if n.gsrv != nil {
		select {
		case <-gstopped:
		case <-ctx.Done():
			n.gsrv.Stop() // calls still open past the deadline are cut
			<-gstopped
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.WriterDrainTimeout)
	defer cancel()
	for _, w := range n.writers {
		err = errors.Join(err, w.Close(wctx))
	}
	if n.peers != nil {
		n.peers.close() // after the writers: their last commits were queued
	}
	n.quorum.closeIfAny() // after the writers: a quorum produce in flight got its answer
	n.cancel()
	n.wg.Wait()
	if n.cfg.Registry != nil {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if lerr := n.cfg.Registry.Leave(lctx, n.cfg.NodeID); lerr != nil {
			n.cfg.Logger.Warn("leave node registry", "err", lerr)
		}
	}
	return err
}
