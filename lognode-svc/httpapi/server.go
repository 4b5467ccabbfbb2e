// Package httpapi serves Loam's native HTTP API on a log node (docs/http-api.md): stream
// admin, produce and long-poll fetch, /v1/cluster/nodes, /healthz and /metrics.
//
// # Basics
//
// Every error answers {"error": {"code", "message"}} with a fitting status; the message
// names what is wrong (the field, the record index, the parameter). errors.go maps every
// failure in one table; a write that may have committed always answers 503
// commit_unknown. A produce is decoded and validated whole before anything is written, so
// a bad request never writes a record, and it is acknowledged only once committed. Records
// of one produce that go to several partitions commit in one WAL object and one CommitWal.
//
// Admission (Limits) comes before any body is read: a Content-Length over MaxRequestBytes
// is refused at once, each body reserves its length from a node-wide budget
// (MaxInflightBodyBytes), and at most MaxConcurrent API requests are served at once; the
// node answers 429 overloaded with Retry-After past either. Memory held for request bodies
// is therefore bounded by MaxInflightBodyBytes (plus the decoded records of the requests
// admitted), whatever the load. A fetch answer is valid JSON whatever the stored bytes.
//
// The binary fast path (binary.go): produce takes RecordBatch v2 bytes for one partition
// (Content-Type application/vnd.loam.recordbatch), checked whole with
// streamapi.CheckBatches and written as sent; fetch answers the stored batches verbatim to
// an Accept naming that type, the offsets in Loam-* headers.
//
// # Caveats
//
// Authentication is not enforced yet (loam dev serves without auth).
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/loamhq/loam/lognode-svc/arrowstream"
	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

// Fetch parameter bounds.
const (
	DefaultFetchBytes = 1 << 20
	MaxFetchBytes     = 64 << 20
	MaxWait           = 5 * time.Minute
)

// Config configures a Server.
type Config struct {
	NodeID   string
	Meta     meta.Client
	Writers  map[string]writer.Writer // by durability class
	Reader   *reader.Reader
	Limits   Limits
	Logger   *slog.Logger
	Registry *prometheus.Registry // served at /metrics
	Now      func() time.Time
	// Nodes lists the live log nodes of a zone (all live nodes when the zone has none),
	// for GET /v1/cluster/nodes.
	Nodes func(ctx context.Context, zone string) ([]streamapi.Node, error)
	// Auth checks the API key of every request but /healthz and /metrics (auth.go); nil
	// serves without authentication.
	Auth *auth.Authenticator

	// ---- CloudEvents ingest and consume (cloudevents.go) ----

	// CloudEvents sets the dedup ledger's window, claim lifetime and namespace cap.
	CloudEvents CloudEventsConfig
	// Admission is the node's admission counters, shared with its gRPC API (nil: the
	// HTTP API's own, of Limits).
	Admission *Admission

	// ---- Namespace keys (nskeys.go) ----

	// Keys is the node's namespace key catalog, refreshed at once after a key change here
	// (nil: no namespace is encrypted on this node). KMSAdmin creates and shreds KMS keys
	// (nil: the key routes take only existing keys and cannot shred).
	Keys     *envelope.Catalog
	KMSAdmin envelope.Admin
}

// Admission is the node's admission counters this API admits requests against (Config).
func (s *Server) Admission() *Admission { return s.cfg.Admission }

// Server is the HTTP handler.
type Server struct {
	cfg       Config
	mux       *http.ServeMux
	h         http.Handler // mux behind the key check
	streams   *catalog
	sticky    atomic.Uint32 // keyless round-robin; unsigned, so it wraps without going negative
	adm       *admission
	m         *metrics
	quotas    *ingestQuotas        // quota.go
	routes    []string             // registered routes (openapi.go)
	bodies    *bodyPool            // JSON produce body buffers (bodypool.go)
	arrow     *arrowstream.Schemas // arrow streams' schemas (arrow.go, arrowCache)
	arrowOnce sync.Once
}

// New returns the API handler.
func New(cfg Config) (*Server, error) {
	if cfg.Meta == nil || cfg.Reader == nil || len(cfg.Writers) == 0 {
		return nil, errors.New("httpapi: Meta, Reader and Writers are required")
	}
	cfg.Limits.defaults()
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.CloudEvents.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Admission == nil {
		cfg.Admission = NewAdmission(cfg.Limits)
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), streams: newCatalog(cfg.Meta, 5*time.Second), bodies: newBodyPool(cfg.Limits.MaxRequestBytes),
		adm: &admission{lim: cfg.Limits, Admission: cfg.Admission}, m: newMetrics(cfg.Registry), quotas: newIngestQuotas(cfg.Meta, cfg.NodeID, cfg.Now)}
	const streams = "/v1/namespaces/{ns}/streams"
	const stream = streams + "/{stream}"
	s.handle("POST "+streams, s.createStream)
	s.handle("GET "+streams, s.listStreams)
	s.handle("GET "+stream, s.getStream)
	s.handle("PATCH "+stream, s.patchStream)
	s.handle("DELETE "+stream, s.deleteStream)
	s.handle("POST "+stream+"/records", s.produce)
	s.handle("GET "+stream+"/partitions/{p}/records", s.fetch)
	s.handle("POST /v1/namespaces/{ns}/producers", s.initProducer)
	s.routeConsumers()   // consumers.go
	s.routeKafkaGroups() // kafkagroups.go
	s.routeConsumerAdmin()
	s.handle("GET /v1/namespaces/{ns}/quota", s.getQuota)
	s.handle("PUT /v1/namespaces/{ns}/quota", s.putQuota)
	s.routeNamespaceKeys()                             // nskeys.go
	s.routeArrow()                                     // arrow.go
	s.handle("POST "+stream+"/events", s.ingestEvents) // CloudEvents (cloudevents.go)
	s.handle("GET "+stream+"/partitions/{p}/events", s.consumeEvents)
	for _, p := range []string{streams, stream, stream + "/records", stream + "/partitions/{p}/records"} {
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusMethodNotAllowed, streamapi.CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path))
		})
	}
	s.handle("GET /v1/cluster/nodes", s.listNodes)
	s.handle("GET /v1/namespaces", s.listNamespaces) // namespaces and keys: auth.go
	s.handle("POST /v1/namespaces", s.createNamespace)
	s.handle("DELETE /v1/namespaces/{ns}", s.deleteNamespace)
	s.handle("POST /v1/keys", s.createKey)
	s.handle("GET /v1/keys", s.listKeys)
	s.handle("DELETE /v1/keys/{id}", s.revokeKey)
	s.register("GET /v1/openapi.json", http.HandlerFunc(s.openAPI))
	s.register("GET /healthz", http.HandlerFunc(s.healthz))
	s.register("GET /metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{}))
	s.h = authenticate(cfg.Auth, s.mux)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, streamapi.CodeNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return s, nil
}

// StreamsChanged drops cached stream descriptions (a watch event said one changed).
func (s *Server) StreamsChanged() { s.streams.invalidate() }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) handle(pattern string, h handlerFunc) {
	route := pattern
	s.register(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		release, err := s.adm.admit(r)
		if err == nil {
			err = h(w, r)
			release()
		}
		status := http.StatusOK
		if err != nil {
			status = s.writeErr(w, r, err)
		}
		s.m.requests.WithLabelValues(route, strconv.Itoa(status/100)+"xx").Inc()
		s.m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	}))
}

// writeErr answers err (errorAnswer maps it) and returns the status.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) int {
	a := errorAnswer(err)
	if a.status >= 500 {
		s.cfg.Logger.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", a.status, "err", err)
	}
	if a.detail.Retriable {
		w.Header().Set("Retry-After", "1")
		setRetryAfter(w.Header(), err)
	}
	writeJSON(w, a.status, streamapi.ErrorBody{Error: a.detail})
	return a.status
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, streamapi.ErrorBody{Error: streamapi.ErrorDetail{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"encode answer"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// readBody reads a JSON request body within the request limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return nil, badInput(http.StatusUnsupportedMediaType, streamapi.CodeUnsupportedMedia, "Content-Type %q is not supported: send application/json", ct)
	}
	return s.readRaw(w, r)
}

// readRaw reads a request body within the request limit, whatever its type.
func (s *Server) readRaw(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > int64(s.cfg.Limits.MaxRequestBytes) {
		return nil, badInput(http.StatusRequestEntityTooLarge, streamapi.CodeRequestTooLarge, "the request body of %d bytes is over the limit of %d bytes", r.ContentLength, s.cfg.Limits.MaxRequestBytes)
	}
	body := http.MaxBytesReader(w, r.Body, int64(s.cfg.Limits.MaxRequestBytes))
	if r.ContentLength <= 0 {
		b, err := io.ReadAll(body)
		return b, bodyError(err)
	}
	// Known length: one allocation, no regrowth copies.
	buf := make([]byte, r.ContentLength+1)
	n, err := io.ReadFull(body, buf)
	switch {
	case err == io.ErrUnexpectedEOF && int64(n) == r.ContentLength:
		return buf[:n], nil
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return nil, badInput(400, streamapi.CodeBadRequest, "the request body ended after %d of its %d announced bytes", n, r.ContentLength)
	case err != nil:
		return nil, bodyError(err)
	}
	rest, err := io.ReadAll(body) // a body longer than announced: read it within the limit
	return append(buf[:n], rest...), bodyError(err)
}

// bodyError names a failure to read a request body: over the limit (413), or a body the
// client sent malformed, cut short or too slowly (400).
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	if err == nil || errors.As(err, &mbe) {
		return err
	}
	return badInput(400, streamapi.CodeBadRequest, "read the request body: %v", err)
}

// decodeStrict decodes one JSON object of body into v, refusing unknown fields and
// trailing data, with errors that name the problem.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badInput(400, streamapi.CodeInvalidJSON, "invalid JSON: unexpected data after the request object")
	}
	return nil
}

func (s *Server) createStream(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req streamapi.CreateStreamRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	cfg := meta.StreamConfig{Namespace: r.PathValue("ns"), Name: req.Name, Partitions: 1, Class: meta.ClassStandard,
		Encoding: meta.EncodingKafka, RetentionMs: 7 * 24 * time.Hour.Milliseconds(), RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete}
	if req.Name == "" {
		return badInput(400, streamapi.CodeInvalidArgument, `"name" is required`)
	}
	if req.Partitions != nil {
		cfg.Partitions = *req.Partitions
	}
	if req.Class != "" {
		cfg.Class = req.Class
	}
	if _, ok := s.cfg.Writers[cfg.Class]; !ok {
		switch cfg.Class {
		case meta.ClassExpress, meta.ClassQuorum:
			return badInput(400, streamapi.CodeUnsupportedClass, "class %q is not served by this deployment yet: use \"standard\"", cfg.Class)
		}
		return badInput(400, streamapi.CodeInvalidArgument, `"class" %q is not one of standard, express, quorum`, cfg.Class)
	}
	if req.Encoding != "" {
		if req.Encoding != meta.EncodingKafka && req.Encoding != meta.EncodingArrow {
			return badInput(400, streamapi.CodeInvalidArgument, `"encoding" %q is not one of kafka, arrow`, req.Encoding)
		}
		cfg.Encoding = req.Encoding
	}
	if req.Schema != nil && cfg.Encoding != meta.EncodingArrow {
		return badInput(400, streamapi.CodeInvalidArgument, `"schema" is for encoding "arrow"`)
	}
	if err := checkRetention(req.RetentionMs, req.RetentionBytes); err != nil {
		return err
	}
	if req.RetentionMs != nil {
		cfg.RetentionMs = *req.RetentionMs
	}
	if req.RetentionBytes != nil {
		cfg.RetentionBytes = *req.RetentionBytes
	}
	if req.CleanupPolicy != "" {
		cfg.CleanupPolicy = req.CleanupPolicy
	}
	if err := checkKeyAttribute(&req.KeyAttribute); err != nil {
		return err
	}
	cfg.KeyAttribute = req.KeyAttribute
	if err := checkLeaderZone(cfg.Class, req.LeaderZone); err != nil {
		return err
	}
	cfg.LeaderZone = req.LeaderZone
	var st meta.Stream
	if cfg.Encoding == meta.EncodingArrow {
		st, err = s.createArrowStream(r.Context(), cfg, req.Schema) // arrow.go
	} else {
		st, err = s.cfg.Meta.CreateStream(r.Context(), cfg)
	}
	if err != nil {
		return err
	}
	s.streams.invalidate()
	writeJSON(w, http.StatusCreated, streamJSON(st, nil))
	return nil
}

// checkRetention refuses retention settings that are neither -1 (unbounded) nor positive.
func checkRetention(ms, bytes *int64) error {
	if ms != nil && *ms != -1 && *ms <= 0 {
		return badInput(400, streamapi.CodeInvalidArgument, `"retention_ms" %d: want -1 (forever) or a positive number of milliseconds`, *ms)
	}
	if bytes != nil && *bytes != -1 && *bytes <= 0 {
		return badInput(400, streamapi.CodeInvalidArgument, `"retention_bytes" %d: want -1 (unbounded) or a positive number of bytes`, *bytes)
	}
	return nil
}

// checkKeyAttribute refuses a key attribute longer than meta.MaxKeyAttributeLength bytes
// or not valid UTF-8; nil and "" (keyless) pass.
func checkKeyAttribute(a *string) error {
	if a != nil && !meta.ValidKeyAttribute(*a) {
		return badInput(400, streamapi.CodeInvalidArgument, `"key_attribute" of %d bytes: want empty (keyless) or 1..%d bytes of valid UTF-8`,
			len(*a), meta.MaxKeyAttributeLength)
	}
	return nil
}

// checkLeaderZone refuses a leader zone hint meta.CheckLeaderZone refuses (on a stream
// that is not of class quorum, or not 1..64 bytes of printable ASCII); "" passes.
func checkLeaderZone(class, zone string) error {
	if err := meta.CheckLeaderZone(class, zone); err != nil {
		return badInput(400, streamapi.CodeInvalidArgument, "%s", strings.TrimPrefix(err.Error(), meta.ErrInvalidArgument.Error()+": "))
	}
	return nil
}

func (s *Server) listStreams(w http.ResponseWriter, r *http.Request) error {
	list, err := s.cfg.Meta.ListStreams(r.Context(), r.PathValue("ns"))
	if err != nil {
		return err
	}
	out := streamapi.ListStreamsResponse{Streams: make([]streamapi.Stream, 0, len(list))}
	for _, st := range list {
		out.Streams = append(out.Streams, streamJSON(st, nil))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getStream(w http.ResponseWriter, r *http.Request) error {
	st, parts, err := s.cfg.Meta.GetStream(r.Context(), r.PathValue("ns"), r.PathValue("stream"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, streamJSON(st, parts))
	return nil
}

func (s *Server) patchStream(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req streamapi.PatchStreamRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if err := checkRetention(req.RetentionMs, req.RetentionBytes); err != nil {
		return err
	}
	if err := checkKeyAttribute(req.KeyAttribute); err != nil {
		return err
	}
	if req.LeaderZone != nil {
		if err := checkLeaderZone(meta.ClassQuorum, *req.LeaderZone); err != nil { // its form; the sequencer checks the class
			return err
		}
	}
	st, err := s.cfg.Meta.UpdateStream(r.Context(), r.PathValue("ns"), r.PathValue("stream"), meta.StreamPatch{
		Partitions: req.Partitions, RetentionMs: req.RetentionMs, RetentionBytes: req.RetentionBytes, CleanupPolicy: req.CleanupPolicy,
		KeyAttribute: req.KeyAttribute, LeaderZone: req.LeaderZone})
	if err != nil {
		return err
	}
	s.streams.invalidate()
	writeJSON(w, http.StatusOK, streamJSON(st, nil))
	return nil
}

func (s *Server) deleteStream(w http.ResponseWriter, r *http.Request) error {
	st, err := s.streams.get(r.Context(), r.PathValue("ns"), r.PathValue("stream"))
	if err != nil {
		return err
	}
	if err := s.cfg.Meta.DeleteStream(r.Context(), r.PathValue("ns"), r.PathValue("stream")); err != nil {
		return err
	}
	s.streams.invalidate()
	s.cfg.Reader.Forget(st.ID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func streamJSON(st meta.Stream, parts []meta.PartitionState) streamapi.Stream {
	out := streamapi.Stream{Namespace: st.Namespace, Name: st.Name, ID: st.ID, Partitions: st.Partitions, Class: st.Class,
		Encoding: st.Encoding, RetentionMs: st.RetentionMs, RetentionBytes: st.RetentionBytes, CleanupPolicy: st.CleanupPolicy,
		KeyAttribute: st.KeyAttribute, LeaderZone: st.LeaderZone, CreatedAtMs: st.CreatedAtMs}
	for _, p := range parts {
		out.PartitionInfo = append(out.PartitionInfo, streamapi.PartitionInfo{Partition: p.Partition, LogStart: p.LogStart, HighWatermark: p.HighWatermark})
	}
	return out
}

func (s *Server) produce(w http.ResponseWriter, r *http.Request) error {
	st, err := s.streams.get(r.Context(), r.PathValue("ns"), r.PathValue("stream"))
	if err != nil {
		return err
	}
	wr, ok := s.cfg.Writers[st.Class]
	if !ok {
		return badInput(400, streamapi.CodeUnsupportedClass, "stream %q has class %q, which this node does not serve", st.Name, st.Class)
	}
	if st.Encoding == meta.EncodingArrow {
		return s.produceArrow(w, r, st, wr) // arrow.go
	}
	if streamapi.IsMediaRecordBatch(r.Header.Get("Content-Type")) {
		return s.produceBatches(w, r, st, wr)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return badInput(http.StatusUnsupportedMediaType, streamapi.CodeUnsupportedMedia, "Content-Type %q is not supported: send application/json or %s", ct, streamapi.MediaRecordBatch)
	}
	body, release, err := s.readPooled(w, r)
	defer release()
	if err != nil {
		return err
	}
	bodyLen := len(body)
	if err := s.AdmitIngest(r.Context(), st.Namespace, bodyLen); err != nil {
		return err
	}
	recs, pf, err := decodeProduce(body, st.Partitions, s.cfg.Limits, s.sticky.Add(1), s.cfg.Now().UnixMilli())
	if err != nil {
		return err
	}
	// The records own their bytes (decoding copied them): the body's buffer is free.
	release()
	body = nil
	// One batch per partition, records in request order.
	var (
		order  []int32
		groups = make(map[int32][]recordbatch.Record)
		within = make([]int32, len(recs))
	)
	for i, rc := range recs {
		g, seen := groups[rc.partition]
		if !seen {
			order = append(order, rc.partition)
		}
		within[i] = int32(len(g))
		rc.rec.OffsetDelta = int32(len(g))
		groups[rc.partition] = append(g, rc.rec)
	}
	reqs := make([]writer.Request, len(order))
	at := make(map[int32]int, len(order))
	for i, p := range order {
		g := groups[p]
		batch, err := recordbatch.Append(nil, g, recordbatch.DefaultBuildOptions())
		if err != nil {
			return badInput(400, streamapi.CodeInvalidRecord, "partition %d: %v", p, err)
		}
		var maxTS int64
		for _, rc := range g {
			maxTS = max(maxTS, rc.Timestamp)
		}
		reqs[i] = writer.Request{StreamID: st.ID, Partition: p, Batches: batch, Records: int64(len(g)), MaxTimestamp: maxTS}
		at[p] = i
	}
	if err := withProducer(pf, recs, reqs); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(r.Context(), s.cfg.Limits.ProduceWait)
	defer cancel()
	res, err := wr.Write(wctx, reqs)
	partial := errors.Is(err, writer.ErrPartialCommit) && len(res) == len(reqs)
	if err != nil && !partial {
		return &writeFailure{err}
	}
	// A partial commit (some partitions' chunks committed, others refused) answers 207 with
	// each record's own outcome: a committed record its offset, a refused one its error.
	out := streamapi.ProduceResponse{Offsets: make([]streamapi.RecordOffset, len(recs))}
	var token uint64
	committed := 0
	for i, rc := range recs {
		rs := res[at[rc.partition]]
		if rs.Err != nil {
			a := writeOutcome(rs.Err)
			a.detail.Message = rs.Err.Error()
			out.Offsets[i] = streamapi.RecordOffset{Partition: rc.partition, Offset: -1, Error: &a.detail}
			continue
		}
		out.Offsets[i] = streamapi.RecordOffset{Partition: rc.partition, Offset: rs.BaseOffset + int64(within[i])}
		token = max(token, rs.Token)
		committed++
	}
	out.Token = FormatToken(token)
	s.m.records.Add(float64(committed))
	s.m.bytes.Add(float64(bodyLen))
	status := http.StatusOK
	if partial {
		status = http.StatusMultiStatus
	}
	writeJSON(w, status, out)
	return nil
}

// FormatToken renders a consistency token: the sequencer's applied index of the commit.
func FormatToken(index uint64) string { return "v1." + strconv.FormatUint(index, 10) }

func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, badInput(400, streamapi.CodeBadRequest, "query parameter %s=%q is not an integer", name, v)
	}
	if n < lo || n > hi {
		return 0, badInput(400, streamapi.CodeBadRequest, "query parameter %s=%d is out of range [%d, %d]", name, n, lo, hi)
	}
	return n, nil
}

func (s *Server) fetch(w http.ResponseWriter, r *http.Request) error {
	st, err := s.streams.get(r.Context(), r.PathValue("ns"), r.PathValue("stream"))
	if err != nil {
		return err
	}
	pv := r.PathValue("p")
	p, err := strconv.ParseInt(pv, 10, 32)
	if err != nil {
		return badInput(400, streamapi.CodeBadRequest, "partition %q is not an integer", pv)
	}
	if p < 0 || p >= int64(st.Partitions) {
		return badInput(404, streamapi.CodePartitionNotFound, "partition %d does not exist: stream %q has partitions 0..%d", p, st.Name, st.Partitions-1)
	}
	if st.Encoding == meta.EncodingArrow {
		return s.fetchArrow(w, r, st, int32(p)) // arrow.go
	}
	if err := onlyParams(r.URL.Query(), "fetch takes", "offset", "max_bytes", "max_wait_ms", "token"); err != nil {
		return err
	}
	offset, err := intParam(r, "offset", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	maxBytes, err := intParam(r, "max_bytes", DefaultFetchBytes, 1, MaxFetchBytes)
	if err != nil {
		return err
	}
	waitMs, err := intParam(r, "max_wait_ms", 0, 0, MaxWait.Milliseconds())
	if err != nil {
		return err
	}
	token, err := tokenParam(r.URL.Query().Get("token"))
	if err != nil {
		return err
	}
	wait := time.Duration(waitMs) * time.Millisecond
	if wait > 0 || token > 0 {
		// A long-poll outlives the server's read and write timeouts: its connection gets
		// deadlines of the wait plus a margin instead. (An expired read deadline would
		// also cancel the request's context.) Not every ResponseWriter supports this.
		until := time.Now().Add(max(wait, MinTokenWait) + s.cfg.Limits.PollWriteMargin)
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(until)
		_ = rc.SetWriteDeadline(until)
	}
	wait = AwaitToken(r.Context(), s.cfg.Reader, st, int32(p), token, wait)
	res, err := s.cfg.Reader.Fetch(r.Context(), st.ID, int32(p), offset, int(maxBytes), wait)
	if err != nil {
		return err
	}
	setOffsetHeaders(w.Header(), res)
	if streamapi.AcceptsRecordBatch(r.Header.Get("Accept")) {
		return s.writeBatches(w, res)
	}
	buf, n, err := appendFetchBody(make([]byte, 0, 256+int(float64(sizeOf(res.Batches))*1.4)), offset, res)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf)
	s.m.fetched.Add(float64(n))
	return nil
}

// appendFetchBody appends the fetch answer of res, leaving out records below from, and
// returns it with the number of records it holds. It is valid JSON whatever the stored
// bytes are (appendRecordJSON).
func appendFetchBody(buf []byte, from int64, res reader.Result) ([]byte, int, error) {
	buf = append(buf, `{"records":[`...)
	n := 0
	for _, b := range res.Batches {
		batch, _, err := recordbatch.Parse(b)
		if err != nil {
			return nil, 0, fmt.Errorf("fetch: stored batch: %w", err)
		}
		recs, err := batch.Records()
		if err != nil {
			return nil, 0, fmt.Errorf("fetch: stored batch at %d: %w", batch.BaseOffset, err)
		}
		for _, rc := range recs {
			off := batch.BaseOffset + int64(rc.OffsetDelta)
			if off < from {
				continue
			}
			if n > 0 {
				buf = append(buf, ',')
			}
			buf = appendRecordJSON(buf, off, rc)
			n++
		}
	}
	buf = append(buf, `],"next_offset":`...)
	buf = appendInt(buf, res.NextOffset)
	buf = append(buf, `,"high_watermark":`...)
	buf = appendInt(buf, res.HighWatermark)
	buf = append(buf, `,"log_start":`...)
	buf = appendInt(buf, res.LogStart)
	return append(buf, "}\n"...), n, nil
}

func sizeOf(bs [][]byte) int {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	return n
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Nodes == nil {
		return badInput(http.StatusNotImplemented, streamapi.CodeNotFound, "this node keeps no node registry")
	}
	nodes, err := s.cfg.Nodes(r.Context(), r.URL.Query().Get("zone"))
	if err != nil {
		return fmt.Errorf("list nodes: %w: %w", meta.ErrUnavailable, err)
	}
	if nodes == nil {
		nodes = []streamapi.Node{}
	}
	writeJSON(w, http.StatusOK, streamapi.ListNodesResponse{Nodes: nodes})
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.cfg.Meta.ListNamespaces(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "node": s.cfg.NodeID, "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "node": s.cfg.NodeID})
}

// catalog caches stream descriptions by (namespace, name); watch events invalidate it.
type catalog struct {
	meta meta.Client
	ttl  time.Duration
	mu   sync.Mutex
	m    map[[2]string]catalogEntry
}

type catalogEntry struct {
	st meta.Stream
	at time.Time
}

func newCatalog(c meta.Client, ttl time.Duration) *catalog {
	return &catalog{meta: c, ttl: ttl, m: make(map[[2]string]catalogEntry)}
}

func (c *catalog) get(ctx context.Context, ns, name string) (meta.Stream, error) {
	k := [2]string{ns, name}
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && time.Since(e.at) < c.ttl {
		return e.st, nil
	}
	if ok {
		// A known stream is refreshed with a short deadline, so a sequencer out of reach
		// does not stall requests this node can serve from what it knows.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Second)
		defer cancel()
	}
	st, _, err := c.meta.GetStream(ctx, ns, name)
	if err != nil {
		if ok && (errors.Is(err, meta.ErrUnavailable) || errors.Is(err, meta.ErrNotLeader) || errors.Is(err, context.DeadlineExceeded)) {
			// The sequencer is out of reach: keep serving what this node knows.
			return e.st, nil
		}
		return meta.Stream{}, err
	}
	c.mu.Lock()
	c.m[k] = catalogEntry{st: st, at: time.Now()}
	c.mu.Unlock()
	return st, nil
}

// invalidate makes every entry stale: the next use looks it up again, and falls back to
// it only while the sequencer is out of reach.
func (c *catalog) invalidate() {
	c.mu.Lock()
	for k, e := range c.m {
		e.at = time.Time{}
		c.m[k] = e
	}
	c.mu.Unlock()
}

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	records  prometheus.Counter
	bytes    prometheus.Counter
	fetched  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loam_http_requests_total", Help: "HTTP API requests by route and status class."}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "loam_http_request_seconds", Help: "HTTP API latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"route"}),
		records: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_produced_records_total", Help: "Records acknowledged to HTTP producers."}),
		bytes:   prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_produced_request_bytes_total", Help: "Request bytes of acknowledged HTTP produces."}),
		fetched: prometheus.NewCounter(prometheus.CounterOpts{Name: "loam_fetched_records_total", Help: "Records served to HTTP fetches."}),
	}
	reg.MustRegister(m.requests, m.latency, m.records, m.bytes, m.fetched)
	return m
}

// onlyParams refuses a query parameter not in names: 400 "unknown query parameter "x":
// <subject> a, b and c".
func onlyParams(q url.Values, subject string, names ...string) error {
	for k := range q {
		if !slices.Contains(names, k) {
			list := names[len(names)-1]
			if len(names) > 1 {
				list = strings.Join(names[:len(names)-1], ", ") + " and " + list
			}
			return badInput(400, streamapi.CodeBadRequest, "unknown query parameter %q: %s %s", k, subject, list)
		}
	}
	return nil
}
