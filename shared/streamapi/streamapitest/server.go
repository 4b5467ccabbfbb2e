package streamapitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

// Limits of the fake, the log node's defaults.
const (
	MaxRequestBytes = 8 << 20         // produce bodies above this answer 413
	MaxRecordBytes  = 1 << 20         // key + value + headers of one record; above: 413 record_too_large
	MaxRecords      = 100_000         // records per produce; above: 413 request_too_large
	DefaultMaxBytes = 1 << 20         // fetch max_bytes when absent
	MaxFetchBytes   = 64 << 20        // fetch max_bytes above this answer 400
	MaxWait         = 5 * time.Minute // fetch max_wait_ms above this answers 400
)

// Server is the fake. Create it with New; it is an http.Handler.
type Server struct {
	apiKey string
	now    func() time.Time
	mux    *http.ServeMux

	mu      sync.Mutex
	ns      map[string]map[string]*stream // namespace → name → stream
	nextID  uint64
	token   uint64
	changed chan struct{} // closed and replaced on every change that can wake a fetch
	faults  []fault
	reqs    int
	batches []int // records of each accepted produce
}

type stream struct {
	info  streamapi.Stream
	parts []*partition
	rr    int // round-robin cursor for keyless records
}

type partition struct {
	logStart int64
	recs     []stored // recs[i] has offset logStart+i
	batches  []batch  // one per accepted produce, in offset order
}

// batch is one stored RecordBatch, as the log node stores it: a JSON produce's share of
// a partition, or one batch of a binary produce. Its bytes are what a binary fetch answers
// and what fetch's max_bytes counts.
type batch struct {
	start, end int64  // offsets of its first record and after its last
	raw        []byte // baseOffset as sent; patched on the way out
}

type stored struct {
	key, value []byte // nil: null
	headers    []recordbatch.Header
	ts         int64
}

type fault struct {
	status int
	detail streamapi.ErrorDetail
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey makes every request need "Authorization: Bearer key".
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithNamespaces replaces the namespaces that exist (default: just "default").
func WithNamespaces(names ...string) Option {
	return func(s *Server) {
		s.ns = map[string]map[string]*stream{}
		for _, n := range names {
			s.ns[n] = map[string]*stream{}
		}
	}
}

// WithClock sets the clock that stamps created_at_ms and records without a timestamp.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// New returns a fake with the namespace "default" and no streams.
func New(opts ...Option) *Server {
	s := &Server{
		now:     time.Now,
		ns:      map[string]map[string]*stream{meta.DefaultNS: {}},
		changed: make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	m := http.NewServeMux()
	m.HandleFunc("/v1/namespaces/{ns}/streams", s.handleStreams)
	m.HandleFunc("/v1/namespaces/{ns}/streams/{stream}", s.handleStream)
	m.HandleFunc("/v1/namespaces/{ns}/streams/{stream}/records", s.handleProduce)
	m.HandleFunc("/v1/namespaces/{ns}/streams/{stream}/partitions/{p}/records", s.handleFetch)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, http.StatusNotFound, streamapi.CodeNotFound, "no route "+r.Method+" "+r.URL.Path)
	})
	s.mux = m
	return s
}

// FailNext makes the next n requests answer status with the given error detail instead of
// being served.
func (s *Server) FailNext(n int, status int, detail streamapi.ErrorDetail) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults = append(s.faults, fault{status: status, detail: detail})
	}
}

// Requests returns how many requests the server has received.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs
}

// ProduceBatches returns the number of records of each accepted produce request, in the
// order they were accepted.
func (s *Server) ProduceBatches() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches)
}

// Trim moves a partition's log start forward to logStart (at most the high watermark),
// dropping the records below it, as retention would.
func (s *Server) Trim(ns, name string, p int32, logStart int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.ns[ns][name]
	if st == nil || p < 0 || int(p) >= len(st.parts) {
		return fmt.Errorf("streamapitest: trim %s/%s/%d: no such partition", ns, name, p)
	}
	part := st.parts[p]
	hw := part.logStart + int64(len(part.recs))
	if logStart < part.logStart || logStart > hw {
		return fmt.Errorf("streamapitest: trim %s/%s/%d to %d: outside [%d, %d]", ns, name, p, logStart, part.logStart, hw)
	}
	part.recs = part.recs[logStart-part.logStart:]
	part.logStart = logStart
	for len(part.batches) > 0 && part.batches[0].end <= logStart {
		part.batches = part.batches[1:]
	}
	s.notifyLocked()
	return nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs++
	var f *fault
	if len(s.faults) > 0 {
		f = &s.faults[0]
		s.faults = s.faults[1:]
	}
	s.mu.Unlock()
	if f != nil {
		writeJSON(w, f.status, streamapi.ErrorBody{Error: f.detail})
		return
	}
	if s.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		writeErr(w, http.StatusUnauthorized, streamapi.CodeUnauthorized, "missing or wrong API key")
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

func validName(n string) bool {
	return len(n) <= meta.MaxNameLength && nameRE.MatchString(n) && n != "." && n != ".."
}

// lookupLocked finds a stream, writing the error answer when it fails.
func (s *Server) lookupLocked(w http.ResponseWriter, ns, name string) *stream {
	streams, ok := s.ns[ns]
	if !ok {
		writeErr(w, http.StatusNotFound, streamapi.CodeNamespaceNotFound, fmt.Sprintf("namespace %q not found", ns))
		return nil
	}
	st := streams[name]
	if st == nil {
		writeErr(w, http.StatusNotFound, streamapi.CodeStreamNotFound, fmt.Sprintf("stream %q not found in namespace %q", name, ns))
	}
	return st
}

func (st *stream) describe() streamapi.Stream {
	d := st.info
	d.PartitionInfo = make([]streamapi.PartitionInfo, len(st.parts))
	for i, p := range st.parts {
		d.PartitionInfo[i] = streamapi.PartitionInfo{
			Partition:     int32(i),
			LogStart:      p.logStart,
			HighWatermark: p.logStart + int64(len(p.recs)),
		}
	}
	return d
}

func (s *Server) handleStreams(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("ns")
	switch r.Method {
	case http.MethodGet:
		s.mu.Lock()
		defer s.mu.Unlock()
		streams, ok := s.ns[ns]
		if !ok {
			writeErr(w, http.StatusNotFound, streamapi.CodeNamespaceNotFound, fmt.Sprintf("namespace %q not found", ns))
			return
		}
		res := streamapi.ListStreamsResponse{Streams: []streamapi.Stream{}}
		for _, st := range streams {
			res.Streams = append(res.Streams, st.info)
		}
		sort.Slice(res.Streams, func(i, j int) bool { return res.Streams[i].Name < res.Streams[j].Name })
		writeJSON(w, http.StatusOK, res)
	case http.MethodPost:
		var req streamapi.CreateStreamRequest
		if !decodeBody(w, r, &req) {
			return
		}
		info := streamapi.Stream{
			Namespace: ns, Name: req.Name, Partitions: 1, Class: meta.ClassStandard,
			Encoding: meta.EncodingKafka, RetentionMs: 7 * 24 * 3600 * 1000, RetentionBytes: -1,
			CleanupPolicy: meta.CleanupDelete,
		}
		if req.Partitions != nil {
			info.Partitions = *req.Partitions
		}
		if req.Class != "" {
			info.Class = req.Class
		}
		if req.Encoding != "" {
			info.Encoding = req.Encoding
		}
		if req.RetentionMs != nil {
			info.RetentionMs = *req.RetentionMs
		}
		if req.RetentionBytes != nil {
			info.RetentionBytes = *req.RetentionBytes
		}
		if req.CleanupPolicy != "" {
			info.CleanupPolicy = req.CleanupPolicy
		}
		info.KeyAttribute = req.KeyAttribute
		info.LeaderZone = req.LeaderZone
		if code, msg := validate(info); code != "" {
			writeErr(w, http.StatusBadRequest, code, msg)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		streams, ok := s.ns[ns]
		if !ok {
			writeErr(w, http.StatusNotFound, streamapi.CodeNamespaceNotFound, fmt.Sprintf("namespace %q not found", ns))
			return
		}
		if streams[req.Name] != nil {
			writeErr(w, http.StatusConflict, streamapi.CodeStreamExists, fmt.Sprintf("stream %q already exists", req.Name))
			return
		}
		s.nextID++
		info.ID = s.nextID
		info.CreatedAtMs = s.now().UnixMilli()
		st := &stream{info: info}
		for range info.Partitions {
			st.parts = append(st.parts, &partition{})
		}
		streams[req.Name] = st
		s.notifyLocked()
		writeJSON(w, http.StatusCreated, st.info)
	default:
		methodNotAllowed(w, r, "GET, POST")
	}
}

// validate checks a stream's settings, returning an error code and message.
func validate(info streamapi.Stream) (code, msg string) {
	switch {
	case !validName(info.Name):
		return streamapi.CodeInvalidArgument, fmt.Sprintf("invalid stream name %q: want 1-%d of [a-zA-Z0-9._-]", info.Name, meta.MaxNameLength)
	case info.Partitions < 1 || info.Partitions > meta.MaxPartitions:
		return streamapi.CodeInvalidArgument, fmt.Sprintf("partitions %d: want 1-%d", info.Partitions, meta.MaxPartitions)
	case info.Class == meta.ClassExpress || info.Class == meta.ClassQuorum:
		return streamapi.CodeUnsupportedClass, fmt.Sprintf("class %q is not served by this deployment yet: use \"standard\"", info.Class)
	case info.Class != meta.ClassStandard:
		return streamapi.CodeInvalidArgument, fmt.Sprintf("class %q is not one of standard, express, quorum", info.Class)
	case info.Encoding != meta.EncodingKafka:
		return streamapi.CodeInvalidArgument, fmt.Sprintf("encoding %q: only kafka is served", info.Encoding)
	case info.RetentionMs < -1 || info.RetentionMs == 0:
		return streamapi.CodeInvalidArgument, fmt.Sprintf("retention_ms %d: want -1 or > 0", info.RetentionMs)
	case info.RetentionBytes < -1 || info.RetentionBytes == 0:
		return streamapi.CodeInvalidArgument, fmt.Sprintf("retention_bytes %d: want -1 or > 0", info.RetentionBytes)
	case info.CleanupPolicy != meta.CleanupDelete && info.CleanupPolicy != meta.CleanupCompact:
		return streamapi.CodeInvalidArgument, fmt.Sprintf("cleanup_policy %q: want delete or compact", info.CleanupPolicy)
	case !meta.ValidKeyAttribute(info.KeyAttribute):
		return streamapi.CodeInvalidArgument, fmt.Sprintf(`"key_attribute" of %d bytes: want empty (keyless) or 1..%d bytes of valid UTF-8`,
			len(info.KeyAttribute), meta.MaxKeyAttributeLength)
	case meta.CheckLeaderZone(info.Class, info.LeaderZone) != nil:
		return streamapi.CodeInvalidArgument, strings.TrimPrefix(meta.CheckLeaderZone(info.Class, info.LeaderZone).Error(), meta.ErrInvalidArgument.Error()+": ")
	}
	return "", ""
}

func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("stream")
	switch r.Method {
	case http.MethodGet:
		s.mu.Lock()
		defer s.mu.Unlock()
		if st := s.lookupLocked(w, ns, name); st != nil {
			writeJSON(w, http.StatusOK, st.describe())
		}
	case http.MethodPatch:
		var req streamapi.PatchStreamRequest
		if !decodeBody(w, r, &req) {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		st := s.lookupLocked(w, ns, name)
		if st == nil {
			return
		}
		info := st.info
		if req.Partitions != nil {
			if *req.Partitions < info.Partitions {
				writeErr(w, http.StatusBadRequest, streamapi.CodeInvalidArgument, fmt.Sprintf("partitions may only grow: %d < %d", *req.Partitions, info.Partitions))
				return
			}
			info.Partitions = *req.Partitions
		}
		if req.RetentionMs != nil {
			info.RetentionMs = *req.RetentionMs
		}
		if req.RetentionBytes != nil {
			info.RetentionBytes = *req.RetentionBytes
		}
		if req.CleanupPolicy != nil {
			info.CleanupPolicy = *req.CleanupPolicy
		}
		if req.KeyAttribute != nil {
			info.KeyAttribute = *req.KeyAttribute
		}
		if req.LeaderZone != nil {
			info.LeaderZone = *req.LeaderZone
		}
		if code, msg := validate(info); code != "" {
			writeErr(w, http.StatusBadRequest, code, msg)
			return
		}
		for int32(len(st.parts)) < info.Partitions {
			st.parts = append(st.parts, &partition{})
		}
		st.info = info
		s.notifyLocked()
		writeJSON(w, http.StatusOK, st.info)
	case http.MethodDelete:
		s.mu.Lock()
		defer s.mu.Unlock()
		if st := s.lookupLocked(w, ns, name); st != nil {
			delete(s.ns[ns], name)
			s.notifyLocked()
			w.WriteHeader(http.StatusNoContent)
		}
	default:
		methodNotAllowed(w, r, "GET, PATCH, DELETE")
	}
}

func (s *Server) handleProduce(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, r, "POST")
		return
	}
	ns, name := r.PathValue("ns"), r.PathValue("stream")
	if streamapi.IsMediaRecordBatch(r.Header.Get("Content-Type")) {
		s.produceBatches(w, r, ns, name)
		return
	}
	var req streamapi.ProduceRequest
	if !decodeBody(w, r, &req) {
		return
	}
	recs, status, code, msg := decodeRecords(req, s.now().UnixMilli())
	if code != "" {
		writeErr(w, status, code, msg)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.lookupLocked(w, ns, name)
	if st == nil {
		return
	}
	n := int32(len(st.parts))
	parts := make([]int32, len(recs))
	sticky := int32(st.rr % int(n))
	for i, rec := range req.Records {
		switch {
		case rec.Partition != nil:
			if *rec.Partition < 0 || *rec.Partition >= n {
				writeErr(w, http.StatusBadRequest, streamapi.CodePartitionNotFound, fmt.Sprintf("record %d: partition %d of %d", i, *rec.Partition, n))
				return
			}
			parts[i] = *rec.Partition
		case recs[i].key != nil:
			parts[i] = int32(murmur2(recs[i].key)&0x7fffffff) % n
		default:
			parts[i] = sticky
		}
	}
	st.rr++
	res := streamapi.ProduceResponse{Offsets: make([]streamapi.RecordOffset, len(recs))}
	shares := map[int32][]stored{}
	var order []int32
	for i, p := range parts {
		if shares[p] == nil {
			order = append(order, p)
		}
		shares[p] = append(shares[p], recs[i])
		part := st.parts[p]
		res.Offsets[i] = streamapi.RecordOffset{Partition: p, Offset: part.logStart + int64(len(part.recs)) + int64(len(shares[p])-1)}
	}
	raws := make([][]byte, len(order))
	for i, p := range order {
		raw, err := buildBatch(shares[p])
		if err != nil {
			writeErr(w, http.StatusBadRequest, streamapi.CodeInvalidRecord, fmt.Sprintf("partition %d: %v", p, err))
			return
		}
		raws[i] = raw
	}
	for i, p := range order {
		st.parts[p].append(shares[p], raws[i])
	}
	s.token++
	s.batches = append(s.batches, len(recs))
	res.Token = "v1." + strconv.FormatUint(s.token, 10)
	s.notifyLocked()
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) handleFetch(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, r, "GET")
		return
	}
	ns, name := r.PathValue("ns"), r.PathValue("stream")
	q := r.URL.Query()
	p, err := strconv.ParseInt(r.PathValue("p"), 10, 32)
	if err != nil {
		writeErr(w, http.StatusBadRequest, streamapi.CodeBadRequest, fmt.Sprintf("partition %q is not an integer", r.PathValue("p")))
		return
	}
	for k := range q {
		if k != "offset" && k != "max_bytes" && k != "max_wait_ms" {
			writeErr(w, http.StatusBadRequest, streamapi.CodeBadRequest, fmt.Sprintf("unknown query parameter %q", k))
			return
		}
	}
	offset, ok := intParam(w, q.Get("offset"), "offset", 0, 0, 1<<62)
	if !ok {
		return
	}
	maxBytes, ok := intParam(w, q.Get("max_bytes"), "max_bytes", DefaultMaxBytes, 1, MaxFetchBytes)
	if !ok {
		return
	}
	waitMs, ok := intParam(w, q.Get("max_wait_ms"), "max_wait_ms", 0, 0, MaxWait.Milliseconds())
	if !ok {
		return
	}
	wait := time.Duration(waitMs) * time.Millisecond
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		st := s.lookupLocked(w, ns, name)
		if st == nil {
			s.mu.Unlock()
			return
		}
		if p < 0 || p >= int64(len(st.parts)) {
			s.mu.Unlock()
			writeErr(w, http.StatusNotFound, streamapi.CodePartitionNotFound, fmt.Sprintf("partition %d of %d", p, len(st.parts)))
			return
		}
		part := st.parts[p]
		hw := part.logStart + int64(len(part.recs))
		if offset < part.logStart || offset > hw {
			s.mu.Unlock()
			ls := part.logStart
			writeJSON(w, http.StatusRequestedRangeNotSatisfiable, streamapi.ErrorBody{Error: streamapi.ErrorDetail{
				Code:      streamapi.CodeOffsetOutOfRange,
				Message:   fmt.Sprintf("offset %d outside [%d, %d]", offset, ls, hw),
				LogStart:  &ls,
				HighWater: &hw,
			}})
			return
		}
		if offset < hw || wait == 0 {
			picked, next := part.pick(offset, maxBytes)
			if streamapi.AcceptsRecordBatch(r.Header.Get("Accept")) {
				body := appendBatches(nil, picked)
				s.mu.Unlock()
				writeBatches(w, body, next, hw, part.logStart)
				return
			}
			res := part.read(offset, picked, next)
			s.mu.Unlock()
			writeFetch(w, res)
			return
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			wait = 0 // answer with what is there, which is nothing
		case <-r.Context().Done():
			return
		}
	}
}

// intParam parses a query parameter within [lo, hi], writing the error answer when it fails.
func intParam(w http.ResponseWriter, v, name string, def, lo, hi int64) (int64, bool) {
	if v == "" {
		return def, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		writeErr(w, http.StatusBadRequest, streamapi.CodeBadRequest, fmt.Sprintf("query parameter %s=%q: want an integer in [%d, %d]", name, v, lo, hi))
		return 0, false
	}
	return n, true
}

// append stores recs, which raw holds as one batch.
func (part *partition) append(recs []stored, raw []byte) {
	start := part.logStart + int64(len(part.recs))
	part.recs = append(part.recs, recs...)
	part.batches = append(part.batches, batch{start: start, end: start + int64(len(recs)), raw: raw})
}

// pick chooses what a fetch from offset answers, as the log node does: whole stored
// batches from the one holding offset, while fewer than maxBytes batch bytes are taken,
// and at least one. It returns them with the next offset.
func (part *partition) pick(offset, maxBytes int64) ([]batch, int64) {
	var (
		out  []batch
		size int64
		next = offset
	)
	for _, b := range part.batches {
		if b.end <= offset {
			continue
		}
		if size >= maxBytes && len(out) > 0 {
			break
		}
		out = append(out, b)
		next = b.end
		size += int64(len(b.raw))
	}
	return out, next
}

// read is the JSON answer of the picked batches, leaving out the records below offset.
func (part *partition) read(offset int64, picked []batch, next int64) streamapi.FetchResponse {
	hw := part.logStart + int64(len(part.recs))
	res := streamapi.FetchResponse{Records: []streamapi.Record{}, NextOffset: next, HighWatermark: hw, LogStart: part.logStart}
	for _, b := range picked {
		for off := max(offset, b.start, part.logStart); off < b.end; off++ {
			res.Records = append(res.Records, fetched(off, part.recs[off-part.logStart]))
		}
	}
	return res
}

// fetched is one stored record as fetch answers it.
func fetched(off int64, rec stored) streamapi.Record {
	hs := make([]recordbatch.Header, len(rec.headers))
	for i, h := range rec.headers {
		hs[i] = recordbatch.Header{Key: h.Key, Value: slices.Clone(h.Value)}
	}
	return streamapi.FetchedRecord(off, recordbatch.Record{Timestamp: rec.ts, Key: slices.Clone(rec.key), Value: slices.Clone(rec.value), Headers: hs})
}

// appendBatches appends copies of the picked batches with their base offsets set: the
// binary fetch answer.
func appendBatches(dst []byte, picked []batch) []byte {
	for _, b := range picked {
		at := len(dst)
		dst = append(dst, b.raw...)
		_ = recordbatch.SetBaseOffset(dst[at:], b.start)
	}
	return dst
}

// writeBatches answers a binary fetch as the log node does: 200, the batches (an empty
// body when there is none) and the offsets in headers.
func writeBatches(w http.ResponseWriter, body []byte, next, hw, logStart int64) {
	h := w.Header()
	h.Set("Content-Type", streamapi.MediaRecordBatch)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set(streamapi.HeaderNextOffset, strconv.FormatInt(next, 10))
	h.Set(streamapi.HeaderHighWatermark, strconv.FormatInt(hw, 10))
	h.Set(streamapi.HeaderLogStart, strconv.FormatInt(logStart, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// produceBatches serves a binary produce: RecordBatch v2 batches for one partition (the
// partition query parameter, or round-robin when absent), checked as the log node checks
// them (streamapi.CheckBatches); the answer has one offset per batch, its base offset.
func (s *Server) produceBatches(w http.ResponseWriter, r *http.Request, ns, name string) {
	q := r.URL.Query()
	for k := range q {
		if k != "partition" {
			writeErr(w, http.StatusBadRequest, streamapi.CodeBadRequest, fmt.Sprintf("unknown query parameter %q: a binary produce takes partition", k))
			return
		}
	}
	p := int64(-1)
	if v := q.Get("partition"); v != "" {
		var err error
		if p, err = strconv.ParseInt(v, 10, 32); err != nil {
			writeErr(w, http.StatusBadRequest, streamapi.CodeBadRequest, fmt.Sprintf("query parameter partition=%q is not an integer", v))
			return
		}
		if p < 0 {
			writeErr(w, http.StatusBadRequest, streamapi.CodePartitionNotFound, fmt.Sprintf("partition %d does not exist", p))
			return
		}
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	batches, err := streamapi.CheckBatches(body, streamapi.BatchLimits{MaxRecordBytes: MaxRecordBytes, MaxRecords: MaxRecords, MaxDecompressed: MaxRequestBytes})
	if err != nil {
		var be *streamapi.BatchError
		if !errors.As(err, &be) {
			be = &streamapi.BatchError{Batch: -1, Code: streamapi.CodeInvalidRecord, Msg: err.Error()}
		}
		writeErr(w, be.Status(), be.Code, be.Msg)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.lookupLocked(w, ns, name)
	if st == nil {
		return
	}
	n := int64(len(st.parts))
	if p >= n {
		writeErr(w, http.StatusBadRequest, streamapi.CodePartitionNotFound, fmt.Sprintf("partition %d does not exist: the stream has partitions 0..%d", p, n-1))
		return
	}
	if p < 0 {
		p = int64(st.rr) % n
	}
	st.rr++
	part := st.parts[p]
	res := streamapi.ProduceResponse{Offsets: make([]streamapi.RecordOffset, len(batches))}
	total := 0
	for i, b := range batches {
		decoded, err := b.Batch.RecordsLimit(MaxRequestBytes)
		if err != nil { // CheckBatches decoded them already
			writeErr(w, http.StatusInternalServerError, streamapi.CodeInternal, err.Error())
			return
		}
		recs := make([]stored, len(decoded))
		for j, rc := range decoded {
			hs := make([]recordbatch.Header, len(rc.Headers))
			for k, h := range rc.Headers {
				hs[k] = recordbatch.Header{Key: h.Key, Value: slices.Clone(h.Value)}
			}
			recs[j] = stored{key: slices.Clone(rc.Key), value: slices.Clone(rc.Value), headers: hs, ts: rc.Timestamp}
		}
		res.Offsets[i] = streamapi.RecordOffset{Partition: int32(p), Offset: part.logStart + int64(len(part.recs))}
		part.append(recs, slices.Clone(b.Batch.Raw))
		total += len(recs)
	}
	s.token++
	s.batches = append(s.batches, total)
	res.Token = "v1." + strconv.FormatUint(s.token, 10)
	s.notifyLocked()
	writeJSON(w, http.StatusOK, res)
}

// decodeRecords validates a produce's records as the log node does, answering the status,
// code and message of the first problem (code "" when there is none).
func decodeRecords(req streamapi.ProduceRequest, nowMs int64) (recs []stored, status int, code, msg string) {
	bad := func(status int, code, format string, args ...any) ([]stored, int, string, string) {
		return nil, status, code, fmt.Sprintf(format, args...)
	}
	switch {
	case req.Records == nil:
		return bad(400, streamapi.CodeInvalidRecord, `the request has no "records" array`)
	case len(req.Records) == 0:
		return bad(400, streamapi.CodeInvalidRecord, `"records" is empty`)
	case len(req.Records) > MaxRecords:
		return bad(413, streamapi.CodeRequestTooLarge, "the request has %d records, more than the limit of %d", len(req.Records), MaxRecords)
	}
	recs = make([]stored, len(req.Records))
	for i, rec := range req.Records {
		if rec.Offset != nil {
			return bad(400, streamapi.CodeInvalidRecord, `records[%d]: "offset" is assigned by the sequencer and cannot be produced`, i)
		}
		key, err := rec.KeyBytes()
		if err == nil {
			recs[i].value, err = rec.Bytes()
		}
		if err != nil {
			return bad(400, streamapi.CodeInvalidRecord, "records[%d]: %v", i, err)
		}
		if rec.IsTombstone() {
			recs[i].value = nil
		}
		size := len(key) + len(recs[i].value)
		for _, h := range rec.Headers {
			size += len(h.Key) + len(h.Value)
			recs[i].headers = append(recs[i].headers, recordbatch.Header{Key: h.Key, Value: slices.Clone(h.Value)})
		}
		if size > MaxRecordBytes {
			return bad(413, streamapi.CodeRecordTooLarge, "records[%d]: %d bytes of key, value and headers, more than the limit of %d", i, size, MaxRecordBytes)
		}
		recs[i].key = key
		recs[i].ts = nowMs
		if rec.Timestamp != nil {
			if *rec.Timestamp < 0 {
				return bad(400, streamapi.CodeInvalidRecord, `records[%d]: "timestamp" %d is negative`, i, *rec.Timestamp)
			}
			recs[i].ts = *rec.Timestamp
		}
	}
	return recs, 0, "", ""
}

// buildBatch encodes recs as one RecordBatch, as the log node stores a JSON produce's
// share of a partition.
func buildBatch(recs []stored) ([]byte, error) {
	rs := make([]recordbatch.Record, len(recs))
	for i, r := range recs {
		rs[i] = recordbatch.Record{Timestamp: r.ts, Key: r.key, Value: r.value, Headers: r.headers}
	}
	return recordbatch.Append(nil, rs, recordbatch.DefaultBuildOptions())
}

// writeFetch answers a fetch as the log node does: each value's JSON text verbatim.
func writeFetch(w http.ResponseWriter, res streamapi.FetchResponse) {
	buf := []byte(`{"records":[`)
	for i, r := range res.Records {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = streamapi.AppendRecordJSON(buf, r); err != nil {
			writeErr(w, http.StatusInternalServerError, streamapi.CodeInternal, err.Error())
			return
		}
	}
	buf = fmt.Appendf(buf, `],"next_offset":%d,"high_watermark":%d,"log_start":%d}`+"\n", res.NextOffset, res.HighWatermark, res.LogStart)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(buf)))
	_, _ = w.Write(buf)
}

// decodeBody decodes a JSON request body into v, writing the error answer when it fails.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeErr(w, http.StatusUnsupportedMediaType, streamapi.CodeUnsupportedMedia, fmt.Sprintf("Content-Type %q: send application/json", ct))
		return false
	}
	body, ok := readBody(w, r)
	if !ok {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, http.StatusBadRequest, streamapi.CodeInvalidJSON, err.Error())
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeErr(w, http.StatusBadRequest, streamapi.CodeInvalidJSON, "trailing data after the JSON body")
		return false
	}
	return true
}

// readBody reads a request body within MaxRequestBytes, writing the error answer when it
// fails.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		writeErr(w, http.StatusBadRequest, streamapi.CodeBadRequest, "read body: "+err.Error())
		return nil, false
	}
	if len(body) > MaxRequestBytes {
		writeErr(w, http.StatusRequestEntityTooLarge, streamapi.CodeRequestTooLarge, fmt.Sprintf("body over %d bytes", MaxRequestBytes))
		return nil, false
	}
	return body, true
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeErr(w, http.StatusMethodNotAllowed, streamapi.CodeMethodNotAllowed, r.Method+" not allowed on "+r.URL.Path)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, streamapi.ErrorBody{Error: streamapi.ErrorDetail{Code: code, Message: msg}})
}

// writeJSON answers v as JSON without HTML escaping, so JSON values come back as sent.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, `{"error":{"code":%q,"message":%q}}`, streamapi.CodeInternal, err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// murmur2 is Kafka's default partitioner hash (org.apache.kafka.common.utils.Utils.murmur2).
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(data)
	h := uint32(seed) ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := n &^ 3
	switch n & 3 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
