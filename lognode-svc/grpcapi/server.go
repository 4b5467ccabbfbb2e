// Package grpcapi serves Loam's native gRPC API on a log node (docs/grpc-api.md): the
// services of proto package loam.v1 (shared/streamapi/loamv1pb), StreamService (stream
// and namespace admin) and RecordService (Produce, Fetch, Subscribe), beside gRPC health
// and reflection.
//
// # Basics
//
// The handlers use the log node's own parts, as the HTTP API does: the stream catalog,
// the writer of each durability class, the reader, and the HTTP API's limits and rules.
// errors.go maps every failure to a gRPC status in one table; a write that may have
// committed answers UNAVAILABLE with ErrorInfo reason commit_unknown and
// may_have_happened=true. A produce is validated whole before anything is written and is
// answered only once committed; records of one produce that go to several partitions
// commit in one WAL object.
//
// Subscribe is the long-poll fetch held open: one fetch at a time, each answer sent with
// Send, which blocks while the client's gRPC receive window is full. A subscription
// therefore holds at most one fetch answer (max_bytes, plus one batch) whatever the
// client's pace, and a slow client slows only its own subscription.
//
// Admission: at most Limits.MaxConcurrent loam.v1 calls at once, Subscribe included,
// counted before a call's message is read (a tap handle); each Produce then reserves its
// decoded message's size from the Limits.MaxInflightBodyBytes budget before anything is
// checked or written, and holds it until the call ends. Past either limit a call answers
// RESOURCE_EXHAUSTED (reason overloaded) with RetryInfo. gRPC refuses a message over
// Limits.MaxRequestBytes itself, with RESOURCE_EXHAUSTED, while reading it.
//
// Memory bounds: produce messages held (decoded, waiting for their commit) at most
// MaxInflightBodyBytes; messages being read at most MaxConcurrent × MaxRequestBytes
// (gRPC announces a message's length only once it is being read, so no tighter bound is
// possible before reading); subscriptions one fetch answer each (max_bytes plus a batch).
//
// # Caveats
//
// A node's gRPC and HTTP APIs share one set of counters (Config.Admission: the HTTP
// server's), so MaxConcurrent and MaxInflightBodyBytes bound both APIs together.
// Authentication is not enforced yet (loam dev serves without auth).
package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/lognode-svc/arrowstream"
	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/nskeys"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// Catalog is the node's stream catalog: cached stream descriptions by (namespace, name).
// The HTTP API's server is one (httpapi.Server), so both APIs share it.
type Catalog interface {
	// Stream describes a stream, from the cache while it is fresh.
	Stream(ctx context.Context, ns, name string) (meta.Stream, error)
	// StreamsChanged drops cached descriptions (a stream was created, changed or deleted).
	StreamsChanged()
}

// Config configures a Server.
type Config struct {
	Meta    meta.Client
	Writers map[string]writer.Writer // by durability class
	Reader  *reader.Reader
	Streams Catalog
	// Limits are the HTTP API's limits; the gRPC API applies the same ones (zero fields:
	// httpapi's defaults).
	Limits   httpapi.Limits
	Logger   *slog.Logger
	Registry prometheus.Registerer // gRPC metrics (nil: not registered)
	Now      func() time.Time
	// SubscribePoll is how long one fetch of an idle subscription waits before it looks
	// again (default 30 s).
	SubscribePoll time.Duration
	// Auth checks the API key of every loam.v1 call (auth.go); nil: no authentication.
	Auth *auth.Authenticator
	// Admission is the node's admission counters, shared with its HTTP API (nil: this
	// API's own, of Limits).
	Admission *httpapi.Admission
	// NamespaceKeys administers namespace keys for NamespaceKeyService, shared with the HTTP
	// API (httpapi.Server.NamespaceKeys; nil: one on Meta alone, without KMS).
	NamespaceKeys *nskeys.Admin
}

// Server implements the loam.v1 services.
type Server struct {
	loamv1pb.UnimplementedStreamServiceServer
	loamv1pb.UnimplementedRecordServiceServer
	loamv1pb.UnimplementedProducerServiceServer

	cfg      Config
	sticky   atomic.Uint32 // keyless round-robin; unsigned, so it wraps without going negative
	adm      *admission
	m        *metrics
	health   *health.Server
	drainOne sync.Once
	draining chan struct{} // closed by Drain
	// arrow streams' schemas (arrow.go, flight.go): at most arrowstream.MaxCachedSchemas
	arrowOnce sync.Once
	arrow     *arrowstream.Schemas
}

// New returns the API's server.
func New(cfg Config) (*Server, error) {
	if cfg.Meta == nil || cfg.Reader == nil || len(cfg.Writers) == 0 || cfg.Streams == nil {
		return nil, errors.New("grpcapi: Meta, Reader, Writers and Streams are required")
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SubscribePoll <= 0 {
		cfg.SubscribePoll = 30 * time.Second
	}
	if cfg.Admission == nil {
		cfg.Admission = httpapi.NewAdmission(cfg.Limits)
	}
	if cfg.NamespaceKeys == nil {
		cfg.NamespaceKeys = nskeys.New(nskeys.Config{Meta: cfg.Meta, Logger: cfg.Logger})
	}
	s := &Server{cfg: cfg, adm: &admission{cfg.Admission}, m: newMetrics(cfg.Registry),
		health: health.NewServer(), draining: make(chan struct{})}
	for _, svc := range []string{"", loamv1pb.StreamService_ServiceDesc.ServiceName, loamv1pb.RecordService_ServiceDesc.ServiceName, loamv1pb.ProducerService_ServiceDesc.ServiceName,
		loamv1pb.NamespaceService_ServiceDesc.ServiceName, loamv1pb.KeyService_ServiceDesc.ServiceName,
		loamv1pb.ConsumerService_ServiceDesc.ServiceName,
		loamv1pb.QuotaService_ServiceDesc.ServiceName, loamv1pb.NamespaceKeyService_ServiceDesc.ServiceName} {
		s.health.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	return s, nil
}

// NewGRPCServer returns a gRPC server serving s, gRPC health and reflection, with the
// message size limit, admission and interceptors of this API.
func (s *Server) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	base := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(s.cfg.Limits.MaxRequestBytes),
		grpc.MaxSendMsgSize(httpapi.MaxFetchBytes + 16<<20), // a fetch answer's bytes plus its record framing
		grpc.InTapHandle(s.tap),
		grpc.ChainUnaryInterceptor(s.unary, s.authUnary),
		grpc.ChainStreamInterceptor(s.stream, s.authStream),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	g := grpc.NewServer(append(base, opts...)...)
	s.Register(g)
	healthpb.RegisterHealthServer(g, s.health)
	reflection.Register(g)
	return g
}

// Register registers the loam.v1 services on g.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	loamv1pb.RegisterStreamServiceServer(g, s)
	loamv1pb.RegisterRecordServiceServer(g, s)
	s.registerAuth(g)
	s.registerConsumers(g)                                    // consumers.go
	loamv1pb.RegisterQuotaServiceServer(g, quotaServer{s: s}) // quota.go
	loamv1pb.RegisterProducerServiceServer(g, s)
	loamv1pb.RegisterCloudEventServiceServer(g, cloudEventServer{s: s}) // cloudevents.go
	s.registerConsumerAdmin(g)
	s.registerFlight(g)        // flight.go
	s.registerNamespaceKeys(g) // nskeys_service.go
}

// Drain makes health answer NOT_SERVING and ends open subscriptions with UNAVAILABLE (the
// client resubscribes to another node from its last offset); calls keep being served.
func (s *Server) Drain() {
	s.drainOne.Do(func() {
		s.health.Shutdown()
		close(s.draining)
	})
}

const apiPrefix = "/loam.v1."

type reservationKey struct{}

// tap admits a loam.v1 call before its message is read (see the package comment).
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if !strings.HasPrefix(info.FullMethodName, apiPrefix) {
		return ctx, nil // health, reflection
	}
	r, err := s.adm.admit()
	if err != nil {
		s.m.requests.WithLabelValues(info.FullMethodName, "ResourceExhausted").Inc()
		return ctx, statusOf(err).Err()
	}
	// The stream's context ends when the call does, whatever ended it: the reservation
	// cannot outlive the call.
	context.AfterFunc(ctx, r.release)
	return context.WithValue(ctx, reservationKey{}, r), nil
}

// unary reserves a produce's message bytes (see the package comment) and records metrics.
func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	var err error
	if r, ok := ctx.Value(reservationKey{}).(*reservation); ok {
		if m, ok := req.(*loamv1pb.ProduceRequest); ok {
			err = r.reserve(int64(proto.Size(m)))
		}
	}
	var resp any
	if err == nil {
		resp, err = h(ctx, req)
	}
	if err != nil {
		err = s.fail(ctx, info.FullMethod, err)
	}
	s.m.observe(info.FullMethod, err, start)
	return resp, err
}

func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	if err != nil {
		err = s.fail(ss.Context(), info.FullMethod, err)
	}
	s.m.observe(info.FullMethod, err, start)
	return err
}

// fail turns a handler's error into its status, logging server-side failures.
func (s *Server) fail(ctx context.Context, method string, err error) error {
	st := statusOf(err)
	switch st.Code() {
	case codes.Internal, codes.Unavailable, codes.Unknown:
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("grpc call failed", "method", method, "code", st.Code().String(), "err", err)
		}
	}
	return st.Err()
}

// admission admits calls against the node's counters (httpapi.Admission, shared with the
// HTTP API).
type admission struct{ *httpapi.Admission }

// Limits is the HTTP API's limits type, which this API applies too.
type Limits = httpapi.Limits

// reservation is one admitted call's share of the admission counters.
type reservation struct {
	a     *admission
	once  sync.Once
	mu    sync.Mutex
	bytes int64
}

// admit takes one call slot.
func (a *admission) admit() (*reservation, error) {
	if !a.Enter() {
		return nil, &overloadError{fmt.Sprintf("the node is serving its limit of %d concurrent calls and requests (max concurrent requests, gRPC and HTTP together): retry later", a.Limits().MaxConcurrent)}
	}
	return &reservation{a: a}, nil
}

// reserve adds n message bytes to the call's reservation, or refuses the call.
func (r *reservation) reserve(n int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	held, ok := r.a.Hold(n)
	if !ok {
		return &overloadError{fmt.Sprintf("the node holds %d bytes of produce messages and request bodies; %d more would pass its in-flight budget of %d bytes: retry later", held, n, r.a.Limits().MaxInflightBodyBytes)}
	}
	r.bytes += n
	return nil
}

func (r *reservation) release() {
	r.once.Do(func() {
		r.mu.Lock()
		n := r.bytes
		r.bytes = 0
		r.mu.Unlock()
		if n > 0 {
			r.a.Drop(n)
		}
		r.a.Leave()
	})
}

// held reports the calls admitted and the bytes reserved (tests).
func (a *admission) held() (int64, int64) { return a.Held() }

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	records  prometheus.Counter
	bytes    prometheus.Counter
	fetched  prometheus.Counter
	subSent  prometheus.Counter
	subOpen  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_grpc_requests_total", Help: "gRPC API calls by method and status code."}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "loam_grpc_request_seconds", Help: "gRPC API call latency by method (Subscribe: the subscription's life).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"method"}),
		records: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_grpc_produced_records_total", Help: "Records acknowledged to gRPC producers."}),
		bytes:   prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_grpc_produced_bytes_total", Help: "Message bytes of acknowledged gRPC produces."}),
		fetched: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_grpc_fetched_records_total", Help: "Records served to gRPC fetches and subscriptions."}),
		subSent: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_grpc_subscribe_sent_bytes_total", Help: "Record bytes handed to gRPC Send by subscriptions (sent or being sent)."}),
		subOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loam_grpc_subscriptions", Help: "Open gRPC subscriptions."}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, m.records, m.bytes, m.fetched, m.subSent, m.subOpen)
	}
	return m
}

func (m *metrics) observe(method string, err error, start time.Time) {
	m.requests.WithLabelValues(method, status.Code(err).String()).Inc()
	m.latency.WithLabelValues(method).Observe(time.Since(start).Seconds())
}
