// Package otlp serves OTLP logs ingest on a log node (docs/otlp.md): OTLP/HTTP
// POST /v1/logs (protobuf or JSON bodies, gzip allowed; default port 4318) and OTLP/gRPC
// opentelemetry.proto.collector.logs.v1.LogsService/Export (gzip registered; default port
// 4317). Both transports share one handler (export.go) and one failure table (errors.go).
//
// # Basics
//
// Target: the namespace and stream come from the loam-namespace and loam-stream headers
// (gRPC metadata) and default to the API key's namespace (meta.DefaultNS without auth, or
// for an admin key) and Settings.DefaultStream (otel_logs). The default stream, and the
// streams Settings.AutoCreate names, are created on first use with Settings.Partitions
// partitions; two nodes that race to create one both succeed (the loser finds it made).
// Any other missing stream is NOT_FOUND / 404. With auth on, every request needs
// "Authorization: Bearer <key>" of the target namespace (or an admin key).
//
// Mapping: package otlplogs, one record per LogRecord, keyed by the value of the stream's
// key attribute (the stream setting key_attribute; for a stream without one, the node's
// default Settings.KeyAttributes) or keyless; keyless records of one request go to one
// partition, the next request to the next (round-robin per request).
//
// Acknowledgement: an Export is answered only once every record it wrote is committed
// (the node's writer, as a native produce). Records that fail validation (ids of the wrong
// length, over Limits.MaxRecordBytes once mapped) are left out and reported in
// partial_success; the others are written. Over the namespace's ingest quota the request
// is refused whole, before anything is written: HTTP 429 with Retry-After, gRPC
// RESOURCE_EXHAUSTED with RetryInfo, which OTLP exporters honour. OTLP has no producer
// ids, so an exporter that retries after a lost answer writes its logs again:
// at-least-once.
//
// Admission: at most Limits.MaxConcurrent Exports at once per transport, counted before a
// body or message is read (gRPC: a tap handle), and each holds its body's bytes
// (compressed and decompressed; gRPC: the message's size) from a budget of
// Limits.MaxInflightBodyBytes per transport until it is answered; past either the answer
// is 429 / RESOURCE_EXHAUSTED with a retry delay. A body (decompressed) over
// Limits.MaxRequestBytes is refused with 413 / RESOURCE_EXHAUSTED (gRPC's own refusal,
// not retryable). Memory held for OTLP bodies is therefore bounded by configuration: per
// transport MaxInflightBodyBytes of admitted bodies plus their decoded requests, and, for
// gRPC, at most MaxConcurrent × MaxRequestBytes of messages being read (gRPC announces a
// message's size only as it reads it).
//
// # Caveats
//
// Settings are the node's: every node of a deployment must be given the same key
// attributes and auto-created streams, or a stream's records are keyed differently
// depending on the node that took them.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
)

// Defaults of Settings.
const (
	DefaultStream     = "otel_logs"
	DefaultPartitions = 4
)

// Header (and gRPC metadata) names that choose the target.
const (
	HeaderNamespace = "loam-namespace"
	HeaderStream    = "loam-stream"
)

// Settings are what an operator sets for OTLP ingest.
type Settings struct {
	// DefaultStream is the stream of requests that name none (default otel_logs); it is
	// created on first use in whatever namespace a request targets.
	DefaultStream string
	// Partitions is the partition count of the streams OTLP ingest creates (default 4).
	Partitions int32
	// AutoCreate names more streams that are created on first use: "stream" in any
	// namespace, or "namespace/stream".
	AutoCreate []string
	// KeyAttributes names, per stream, a default attribute whose value keys its records
	// (for example service.name, which keeps one service's logs in order): the map key is
	// "namespace/stream", or "stream" for that stream in any namespace. It applies only to
	// streams whose own key_attribute setting is empty; a stream with neither gets keyless
	// records.
	KeyAttributes map[string]string
}

func (s *Settings) defaults() {
	if s.DefaultStream == "" {
		s.DefaultStream = DefaultStream
	}
	if s.Partitions <= 0 {
		s.Partitions = DefaultPartitions
	}
}

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	for _, a := range s.AutoCreate {
		if a == "" || strings.Count(a, "/") > 1 || strings.HasPrefix(a, "/") || strings.HasSuffix(a, "/") {
			return errors.New("otlp: auto-create entry " + quote(a) + " is neither \"stream\" nor \"namespace/stream\"")
		}
	}
	for k, v := range s.KeyAttributes {
		if k == "" || strings.Count(k, "/") > 1 || strings.HasPrefix(k, "/") || strings.HasSuffix(k, "/") {
			return errors.New("otlp: key attribute entry " + quote(k) + " is neither \"stream\" nor \"namespace/stream\"")
		}
		if v == "" {
			return errors.New("otlp: key attribute of " + quote(k) + " is empty")
		}
	}
	if s.Partitions < 0 {
		return errors.New("otlp: partitions must be positive")
	}
	return nil
}

func quote(s string) string { return "\"" + s + "\"" }

// Catalog is the node's stream catalog (httpapi.Server is one).
type Catalog interface {
	Stream(ctx context.Context, ns, name string) (meta.Stream, error)
	StreamsChanged()
}

// Config configures a Server.
type Config struct {
	Meta    meta.Client
	Writers map[string]writer.Writer // by durability class
	Streams Catalog
	// AdmitIngest spends a request's bytes of its namespace's ingest quota, or answers an
	// error wrapping meta.ErrQuotaExceeded (httpapi.Server.AdmitIngest); nil: no quotas.
	AdmitIngest func(ctx context.Context, ns string, n int) error
	// Limits are the node's request limits (zero fields: httpapi's defaults).
	Limits   httpapi.Limits
	Settings Settings
	// Auth checks the API key of every request; nil: no authentication.
	Auth     *auth.Authenticator
	Logger   *slog.Logger
	Registry prometheus.Registerer // nil: metrics are not registered
	Now      func() time.Time
}

// Server serves OTLP logs ingest over HTTP (HTTPHandler) and gRPC (NewGRPCServer).
type Server struct {
	cfg    Config
	sticky atomic.Uint32 // keyless round-robin per request; wraps without going negative
	m      *metrics
	hadm   *admission // HTTP
	gadm   *admission // gRPC
	create map[string]bool
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Meta == nil || len(cfg.Writers) == 0 || cfg.Streams == nil {
		return nil, errors.New("otlp: Meta, Writers and Streams are required")
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	cfg.Settings.defaults()
	if err := cfg.Settings.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, m: newMetrics(cfg.Registry), hadm: newAdmission(cfg.Limits), gadm: newAdmission(cfg.Limits),
		create: map[string]bool{cfg.Settings.DefaultStream: true}}
	for _, a := range cfg.Settings.AutoCreate {
		s.create[a] = true
	}
	return s, nil
}

// keyAttribute is the attribute that keys st's records: the stream's own KeyAttribute
// setting, else the node's default for it (Settings.KeyAttributes), else "" (keyless).
func (s *Server) keyAttribute(st meta.Stream) string {
	if st.KeyAttribute != "" {
		return st.KeyAttribute
	}
	if a, ok := s.cfg.Settings.KeyAttributes[st.Namespace+"/"+st.Name]; ok {
		return a
	}
	return s.cfg.Settings.KeyAttributes[st.Name]
}

// autoCreates reports whether stream name of namespace ns is created on first use.
func (s *Server) autoCreates(ns, name string) bool {
	return s.create[name] || s.create[ns+"/"+name]
}

// ParseSettings builds Settings from their flag forms: autoCreate a comma-separated list
// of STREAM or NAMESPACE/STREAM, keyAttributes a comma-separated list of STREAM=ATTRIBUTE
// or NAMESPACE/STREAM=ATTRIBUTE.
func ParseSettings(stream string, partitions int, autoCreate, keyAttributes string) (Settings, error) {
	if partitions <= 0 || partitions > 1<<20 {
		return Settings{}, fmt.Errorf("otlp: partitions %d: want 1 to %d", partitions, 1<<20)
	}
	s := Settings{DefaultStream: stream, Partitions: int32(partitions)}
	for _, a := range strings.Split(autoCreate, ",") {
		if a = strings.TrimSpace(a); a != "" {
			s.AutoCreate = append(s.AutoCreate, a)
		}
	}
	for _, kv := range strings.Split(keyAttributes, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return Settings{}, fmt.Errorf("otlp: key attribute %q is not STREAM=ATTRIBUTE or NAMESPACE/STREAM=ATTRIBUTE", kv)
		}
		if s.KeyAttributes == nil {
			s.KeyAttributes = map[string]string{}
		}
		s.KeyAttributes[k] = v
	}
	s.defaults()
	return s, s.Validate()
}
