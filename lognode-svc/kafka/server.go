package kafka

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config's bounds.
const (
	DefaultMaxFrameBytes    = 64 << 20  // one request frame
	DefaultMaxInflightBytes = 256 << 20 // frames being read or served, node-wide
	DefaultMaxConnections   = 4096
	DefaultIdleTimeout      = 10 * time.Minute // Kafka's connections.max.idle.ms
	// DefaultNodesTTL is how long a lookup of the live nodes is reused.
	DefaultNodesTTL = time.Second
	// ClusterID is the cluster id Metadata and DescribeCluster answer.
	ClusterID = "loam"
)

// Catalog is the node's stream catalog (httpapi.Server is one).
type Catalog interface {
	Stream(ctx context.Context, ns, name string) (meta.Stream, error)
	StreamsChanged()
}

// GroupHandler serves the consumer-group API keys (OffsetCommit 8, OffsetFetch 9,
// JoinGroup 11, Heartbeat 12, LeaveGroup 13, SyncGroup 14, DescribeGroups 15, ListGroups
// 16, DeleteGroups 42, OffsetDelete 47, ConsumerGroupHeartbeat 68,
// ConsumerGroupDescribe 69) of namespace ns. The gateway sends it only requests of the
// keys and versions Versions lists, and only on the group's coordinator: the rendezvous
// owner of (ns, group) among the live nodes (others forward to it).
type GroupHandler interface {
	Handle(ctx context.Context, ns string, req kmsg.Request) (kmsg.Response, error)
	// Versions lists the keys served, each with its [min, max] version.
	Versions() map[int16][2]int16
}

// Config configures a Server.
type Config struct {
	NodeID  string
	Zone    string
	Meta    meta.Client
	Writers map[string]writer.Writer // by durability class
	Reader  *reader.Reader
	Streams Catalog
	// Limits are the HTTP API's (record size, records per request, produce wait; zero
	// fields: httpapi's defaults).
	Limits httpapi.Limits

	MaxFrameBytes    int   // default DefaultMaxFrameBytes
	MaxInflightBytes int64 // default DefaultMaxInflightBytes
	MaxConnections   int   // default DefaultMaxConnections
	IdleTimeout      time.Duration

	// Self is the host:port clients reach this node's Kafka listener at (default: the
	// listener's address).
	Self string
	// Advertised, when set, is the host:port of a load balancer in front of every node:
	// Metadata names it as the only broker, FindCoordinator answers it, and a node that
	// is not a group's coordinator forwards the group's requests to it.
	Advertised string
	// Nodes lists the live log nodes of zone (every live node when zone has none or is
	// ""); nil: this node alone.
	Nodes func(ctx context.Context, zone string) ([]coord.Node, error)
	// Auth, when set, requires SASL (PLAIN or SCRAM) with an API key as the password before any
	// request but ApiVersions and SASL; nil: no authentication, namespace "default".
	Auth *auth.Authenticator
	// TLS, when set, is the listener's TLS configuration; ForwardTLS the client side used
	// to forward group requests to another node's listener (set it when TLS is).
	TLS        *tls.Config
	ForwardTLS *tls.Config
	// Groups serves the consumer-group keys; nil: they are not served.
	Groups GroupHandler

	Logger   *slog.Logger
	Registry prometheus.Registerer // Kafka metrics (nil: not registered)
	Now      func() time.Time
}

// Server is a Kafka protocol listener of a log node.
type Server struct {
	cfg      Config
	m        *metrics
	budget   *budget
	versions map[int16][2]int16 // what ApiVersions answers

	mu     sync.Mutex
	ln     net.Listener
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup

	nodesMu   sync.Mutex
	nodesAt   time.Time
	nodesZone map[string][]coord.Node
	allNodes  []coord.Node
	allAt     time.Time

	fwd *forwarder
	// issued are the producers InitProducerId answered (adoptEpoch bumps only those).
	issued issuedProducers

	// ctx ends when Close is called: requests being served (a long-poll fetch) end with it.
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a Server; Serve starts it.
func New(cfg Config) (*Server, error) {
	if cfg.Meta == nil || cfg.Reader == nil || len(cfg.Writers) == 0 || cfg.Streams == nil {
		return nil, errors.New("kafka: Meta, Reader, Writers and Streams are required")
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.MaxInflightBytes <= 0 {
		cfg.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if int64(cfg.MaxFrameBytes) > cfg.MaxInflightBytes {
		return nil, fmt.Errorf("kafka: MaxFrameBytes %d is over MaxInflightBytes %d: no frame that large could be read", cfg.MaxFrameBytes, cfg.MaxInflightBytes)
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, m: newMetrics(cfg.Registry), budget: newBudget(cfg.MaxInflightBytes), conns: map[*conn]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.versions = make(map[int16][2]int16, len(handlers)+16)
	for k, h := range handlers {
		if h.min >= 0 {
			s.versions[k] = [2]int16{h.min, h.max}
		}
	}
	if cfg.Groups != nil {
		for k, v := range cfg.Groups.Versions() {
			if !isGroupKey(k) {
				return nil, fmt.Errorf("kafka: the group handler lists key %d, which is no group key", k)
			}
			if v[0] > v[1] || v[0] < 0 {
				return nil, fmt.Errorf("kafka: the group handler lists key %d with versions [%d, %d]", k, v[0], v[1])
			}
			if mx := kmsg.RequestForKey(k).MaxVersion(); v[1] > mx {
				v[1] = mx // kmsg cannot decode past its own maximum
			}
			s.versions[k] = v
		}
		s.versions[10] = [2]int16{findCoordinatorMin, findCoordinatorMax}
	}
	s.fwd = newForwarder(s)
	return s, nil
}

// Serve accepts connections on ln until Close. A TLS configuration wraps ln.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	s.ln = ln
	if s.cfg.Self == "" {
		s.cfg.Self = ln.Addr().String()
	}
	s.mu.Unlock()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("kafka: accept: %w", err)
		}
		delay = 0
		s.mu.Lock()
		if s.closed || len(s.conns) >= s.cfg.MaxConnections {
			full := !s.closed
			s.mu.Unlock()
			if full {
				s.cfg.Logger.Warn("kafka: connection refused: at the connection limit", "remote", c.RemoteAddr().String(), "limit", s.cfg.MaxConnections)
				s.m.refused.Inc()
			}
			c.Close()
			continue
		}
		cc := &conn{s: s, c: c, ns: meta.DefaultNS}
		s.conns[cc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.m.conns.Inc()
		go func() {
			defer s.wg.Done()
			defer s.m.conns.Dec()
			cc.serve()
			s.mu.Lock()
			delete(s.conns, cc)
			s.mu.Unlock()
		}()
	}
}

// Addr is the listener's address ("" before Serve).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops accepting, closes every connection (a request being served is cut: its
// produce, if any, goes on to its commit, unanswered) and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.cancel()
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	for c := range s.conns {
		c.c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.fwd.close()
	return err
}

// conn is one client connection.
type conn struct {
	s  *Server
	c  net.Conn
	ns string // the namespace its topics live in
	// authed is set once SASL succeeded (always true without Config.Auth); mech is the
	// mechanism the handshake chose; key the API key presented (for forwarding).
	authed    bool
	mech      string
	user, key string
	// scram is the SCRAM exchange under way after a SCRAM handshake.
	scram *auth.SCRAMServer
	// adopted is the (producer id, epoch) whose local bump adoptEpoch last saw taken.
	adopted [2]int64
	// order holds, per partition being written through a writer without Submit, the
	// channel its latest write closes once it ended (writeInOrder): at most one entry per
	// partition of the answers pending (maxPipelined requests).
	orderMu sync.Mutex
	order   map[partKey]chan struct{}
}

// request is one decoded request and its header.
type request struct {
	kreq     kmsg.Request
	corr     int32
	clientID string
}

// errClose is returned by a handler to close the connection after logging why.
type closeError struct{ reason string }

func (e *closeError) Error() string { return e.reason }

func closeConn(format string, args ...any) error {
	return &closeError{reason: fmt.Sprintf(format, args...)}
}

// maxPipelined is how many requests of one connection may wait for their answers at once
// (Kafka clients keep at most 5 produce requests in flight per broker).
const maxPipelined = 5

// answer is one request's place in a connection's answer order: the frame, or the wait
// that makes it (a produce waiting for its commit), and the frame budget it holds.
type answer struct {
	frame  []byte
	wait   func() []byte
	budget int64
}

// serve reads and serves the connection's requests in order. Three goroutines: the
// reader reads frames; the handler decodes, checks and serves them one after another (a
// produce is checked and buffered in the writer in order, its commit waited for later);
// the answerer writes the answers in request order (at most maxPipelined pending). The
// reader reads the next frame while the handler checks the one before (a compressed
// produce's records are decompressed to be checked), so a pipelining client's next
// request, which cuts the buffer of the one before it, arrives sooner.
func (c *conn) serve() {
	defer c.c.Close()
	c.authed = c.s.cfg.Auth == nil
	log := c.s.cfg.Logger.With("remote", c.c.RemoteAddr().String())
	answers := make(chan answer, maxPipelined)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		broken := false
		for a := range answers {
			out := a.frame
			if a.wait != nil {
				out = a.wait()
			}
			c.s.budget.release(a.budget)
			if broken || len(out) == 0 {
				continue
			}
			c.c.SetWriteDeadline(time.Now().Add(c.s.cfg.Limits.WriteTimeout))
			if _, err := c.c.Write(out); err != nil {
				log.Debug("kafka: write failed", "err", err)
				broken = true
				c.c.Close() // the reader stops at its next read
				continue
			}
			c.s.m.bytesOut.Add(float64(len(out)))
		}
	}()
	frames := make(chan []byte, 1)
	var stop atomic.Bool // the handler failed: the reader stops (the answers before go out)
	handlerDone := make(chan struct{})
	go func() {
		defer close(handlerDone)
		defer close(answers)
		failed := false
		for body := range frames {
			if failed {
				c.s.budget.release(int64(len(body)))
				continue
			}
			out, wait, err := c.handle(c.s.ctx, body, nil)
			if err != nil {
				c.s.budget.release(int64(len(body)))
				var ce *closeError
				if errors.As(err, &ce) {
					log.Warn("kafka: connection closed", "reason", ce.reason)
				} else {
					log.Warn("kafka: connection closed", "err", err)
				}
				failed = true
				stop.Store(true)
				c.c.SetReadDeadline(time.Now()) // the reader's read ends; it checks stop after each deadline it sets
				continue
			}
			// The frame's budget is held until its answer is made: a produce's batches are
			// the frame's bytes until they commit.
			answers <- answer{frame: out, wait: wait, budget: int64(len(body))}
		}
	}()
	defer func() {
		close(frames)
		<-handlerDone
		<-writerDone
	}()
	var size [4]byte
	for {
		c.c.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		if stop.Load() {
			return
		}
		if _, err := io.ReadFull(c.c, size[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !stop.Load() {
				log.Debug("kafka: connection closed", "err", err)
			}
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 8 || int(n) > c.s.cfg.MaxFrameBytes {
			log.Warn("kafka: connection closed: frame length out of range", "length", n, "limit", c.s.cfg.MaxFrameBytes)
			c.s.m.badFrames.Inc()
			return
		}
		if !c.s.budget.acquire(int64(n), c.s.cfg.IdleTimeout) {
			log.Warn("kafka: connection closed: the node's frame budget stayed full", "length", n, "budget", c.s.cfg.MaxInflightBytes)
			return
		}
		body := make([]byte, n)
		c.c.SetReadDeadline(time.Now().Add(c.s.cfg.Limits.ReadTimeout))
		if stop.Load() {
			c.s.budget.release(int64(n))
			return
		}
		if _, err := io.ReadFull(c.c, body); err != nil {
			c.s.budget.release(int64(n))
			log.Debug("kafka: connection closed inside a frame", "err", err)
			return
		}
		c.s.m.bytesIn.Add(float64(4 + n))
		frames <- body
	}
}

// handle decodes one frame body and serves it: the response frame appended to out, or,
// for a produce, the wait that makes it once committed (an empty frame for acks=0). An
// error closes the connection.
func (c *conn) handle(ctx context.Context, body, out []byte) ([]byte, func() []byte, error) {
	rd := kbin.Reader{Src: body}
	key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
	cid := rd.NullableString()
	if rd.Complete() != nil {
		return nil, nil, closeConn("request header truncated")
	}
	kreq := kmsg.RequestForKey(key)
	if kreq == nil {
		c.s.m.request(key, version, true)
		return nil, nil, closeConn("request of unknown API key %d", key)
	}
	vr, served := c.s.versions[key]
	if !served || version < vr[0] || version > vr[1] {
		c.s.m.request(key, version, true)
		if key == 18 { // ApiVersions answers an unsupported version with v0 and the list
			resp := c.apiVersionsResponse(0)
			resp.ErrorCode = errUnsupportedVersion
			return c.frame(out, corr, resp), nil, nil
		}
		return nil, nil, closeConn("API key %d version %d is not served (versions served: %v)", key, version, vr)
	}
	kreq.SetVersion(version)
	if kreq.IsFlexible() { // request header v2 (ApiVersions' too; only its response header stays v0)
		kmsg.SkipTags(&rd)
	}
	if err := rd.Complete(); err != nil {
		return nil, nil, closeConn("request header of key %d truncated", key)
	}
	if err := kreq.ReadFrom(rd.Src); err != nil {
		c.s.m.request(key, version, true)
		return nil, nil, closeConn("undecodable request (key %d, version %d): %v", key, version, err)
	}
	c.s.m.request(key, version, false)
	req := request{kreq: kreq, corr: corr}
	if cid != nil {
		req.clientID = *cid
	}
	if !c.authed && key != 17 && key != 18 && key != 36 {
		return nil, nil, closeConn("API key %d before SASL authentication: authenticate first (SASL/PLAIN or SCRAM with an API key)", key)
	}
	if key == 0 {
		wait, err := c.produce(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		return nil, func() []byte {
			resp := wait()
			if resp == nil {
				return nil // acks=0: no answer
			}
			c.s.m.responseErrors(resp)
			return c.frame(out, corr, resp)
		}, nil
	}
	resp, err := c.dispatch(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	c.s.m.responseErrors(resp)
	return c.frame(out, corr, resp), nil, nil
}

// frame appends resp's frame: length, correlation id, header tags (flexible responses
// but ApiVersions'), body.
func (c *conn) frame(out []byte, corr int32, resp kmsg.Response) []byte {
	if fr, ok := resp.(*kmsg.FetchResponse); ok && out == nil {
		out = make([]byte, 0, fetchFrameSize(fr))
	}
	start := len(out)
	out = append(out, 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	if resp.IsFlexible() && resp.Key() != 18 {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out
}

// handler serves one API key at versions [min, max]; min < 0: not listed in ApiVersions
// (served through another path).
type handler struct {
	min, max int16
	fn       func(c *conn, ctx context.Context, r request) (kmsg.Response, error)
}

var handlers map[int16]handler

func init() {
	handlers = map[int16]handler{
		0:  {produceMin, produceMax, nil}, // handle serves it: its answer waits for the commit
		1:  {fetchMin, fetchMax, (*conn).fetch},
		2:  {listOffsetsMin, listOffsetsMax, (*conn).listOffsets},
		3:  {metadataMin, metadataMax, (*conn).metadata},
		17: {saslHandshakeMin, saslHandshakeMax, (*conn).saslHandshake},
		18: {apiVersionsMin, apiVersionsMax, (*conn).apiVersions},
		19: {createTopicsMin, createTopicsMax, (*conn).createTopics},
		20: {deleteTopicsMin, deleteTopicsMax, (*conn).deleteTopics},
		22: {initProducerIDMin, initProducerIDMax, (*conn).initProducerID},
		32: {describeConfigsMin, describeConfigsMax, (*conn).describeConfigs},
		33: {alterConfigsMin, alterConfigsMax, (*conn).alterConfigs},
		36: {saslAuthenticateMin, saslAuthenticateMax, (*conn).saslAuthenticate},
		37: {createPartitionsMin, createPartitionsMax, (*conn).createPartitions},
		44: {incrementalAlterConfigsMin, incrementalAlterConfigsMax, (*conn).incrementalAlterConfigs},
		60: {describeClusterMin, describeClusterMax, (*conn).describeCluster},
	}
}

func (c *conn) dispatch(ctx context.Context, r request) (kmsg.Response, error) {
	key := r.kreq.Key()
	if key == 10 {
		return c.findCoordinator(ctx, r)
	}
	if isGroupKey(key) {
		return c.group(ctx, r)
	}
	h, ok := handlers[key]
	if !ok {
		return nil, closeConn("API key %d is not served", key)
	}
	return h.fn(c, ctx, r)
}

// budget is a byte semaphore.
type budget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	free  int64
	limit int64
}

func newBudget(n int64) *budget {
	b := &budget{free: n, limit: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire takes n bytes, waiting up to wait for them.
func (b *budget) acquire(n int64, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	t := time.AfterFunc(wait, func() { b.mu.Lock(); b.cond.Broadcast(); b.mu.Unlock() })
	defer t.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.free < n {
		if !time.Now().Before(deadline) {
			return false
		}
		b.cond.Wait()
	}
	b.free -= n
	return true
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
	b.cond.Broadcast()
}
