package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/loamhq/loam/lognode-svc/arrowstream"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/walfmt"
)

// Arrow streams (encoding arrow): records are rows of the stream's schema, stored as Arrow
// IPC frames (shared/arrowenc). Create takes "schema"; JSON produce validates each
// record's value against the latest schema version and builds one frame per partition;
// fetch builds the records' JSON on the fly (columns=a,b projects) or answers Arrow IPC
// (Accept: application/vnd.apache.arrow.stream).

// MediaArrowStream is the Arrow IPC stream format's media type.
const MediaArrowStream = "application/vnd.apache.arrow.stream"

// arrowCache is the API's cache of arrow streams' schemas (made once; arrowstream.Schemas:
// at most arrowstream.MaxCachedSchemas parsed schemas and as many latest versions).
func (s *Server) arrowCache() *arrowstream.Schemas {
	s.arrowOnce.Do(func() { s.arrow = arrowstream.NewSchemas(s.cfg.Meta) })
	return s.arrow
}

func (s *Server) schemaClient() (meta.SchemaClient, error) {
	sc, ok := s.cfg.Meta.(meta.SchemaClient)
	if !ok {
		return nil, badInput(http.StatusNotImplemented, streamapi.CodeInvalidArgument, "this node's sequencer client keeps no stream schemas")
	}
	return sc, nil
}

// schema returns version v (0: the latest) of stream id's schema and its version.
func (s *Server) schema(ctx context.Context, id uint64, v uint32) (*arrowenc.Schema, uint32, error) {
	sch, got, err := s.arrowCache().Get(ctx, id, v)
	if errors.Is(err, arrowstream.ErrNoSchemas) {
		_, err = s.schemaClient() // the 501 answer
	}
	return sch, got, err
}

// createArrowStream creates an arrow stream with its first schema (createStream).
func (s *Server) createArrowStream(ctx context.Context, cfg meta.StreamConfig, schema json.RawMessage) (meta.Stream, error) {
	if len(bytes.TrimSpace(schema)) == 0 || string(bytes.TrimSpace(schema)) == "null" {
		return meta.Stream{}, badInput(400, streamapi.CodeInvalidArgument, `encoding "arrow" needs a "schema"`)
	}
	sch, err := arrowenc.ParseSchema(schema)
	if err != nil {
		return meta.Stream{}, badInput(400, streamapi.CodeInvalidArgument, "%v", err)
	}
	if cfg.Class != meta.ClassStandard {
		// Fetch reads arrow chunks from the standard class's bucket.
		return meta.Stream{}, badInput(400, streamapi.CodeInvalidArgument, "class %q: arrow streams are of class standard for now", cfg.Class)
	}
	if cfg.KeyAttribute != "" {
		return meta.Stream{}, badInput(400, streamapi.CodeInvalidArgument, `"key_attribute" is for OTLP streams; an arrow stream is keyed by its schema's key column`)
	}
	sc, err := s.schemaClient()
	if err != nil {
		return meta.Stream{}, err
	}
	st, _, err := sc.CreateArrowStream(ctx, cfg, sch.JSON())
	return st, err
}

// produceArrow is a JSON produce to an arrow stream.
func (s *Server) produceArrow(w http.ResponseWriter, r *http.Request, st meta.Stream, wr writer.Writer) error {
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, MediaArrowStream) {
		return s.produceArrowIPC(w, r, st, wr) // arrow_produce.go
	}
	if ct != "" && !strings.HasPrefix(ct, "application/json") {
		return badInput(http.StatusUnsupportedMediaType, streamapi.CodeUnsupportedMedia, "Content-Type %q is not supported by arrow stream %q: send application/json or %s", ct, st.Name, MediaArrowStream)
	}
	body, err := s.readRaw(w, r)
	if err != nil {
		return err
	}
	if err := s.AdmitIngest(r.Context(), st.Namespace, len(body)); err != nil {
		return err
	}
	var req streamapi.ProduceRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if pf := req.ProducerFields; pf.ProducerID != nil || pf.Epoch != nil || pf.Sequences != nil {
		return badInput(400, streamapi.CodeInvalidArgument, "idempotent producers are not supported on arrow streams yet")
	}
	switch {
	case req.Records == nil:
		return badInput(400, streamapi.CodeInvalidRecord, `the request has no "records" array`)
	case len(req.Records) == 0:
		return badInput(400, streamapi.CodeInvalidRecord, `"records" is empty`)
	case len(req.Records) > s.cfg.Limits.MaxRecords:
		return badInput(413, streamapi.CodeRequestTooLarge, "the request has %d records, more than the limit of %d", len(req.Records), s.cfg.Limits.MaxRecords)
	}
	sch, version, err := s.schema(r.Context(), st.ID, 0)
	if err != nil {
		return err
	}
	now := s.cfg.Now().UnixMilli()
	sticky := int32(s.sticky.Add(1) % uint32(st.Partitions))
	type group struct {
		b     *arrowenc.Builder
		maxTS int64
	}
	groups := map[int32]*group{}
	var order []int32
	parts := make([]int32, len(req.Records))
	within := make([]int64, len(req.Records))
	defer func() {
		for _, g := range groups {
			g.b.Release()
		}
	}()
	for i, rec := range req.Records {
		if rec.Key != nil || rec.KeyBase64 != nil {
			return badInput(400, streamapi.CodeInvalidRecord, "record %d: an arrow stream's key is its schema's key column, not \"key\"", i)
		}
		if rec.ValueBase64 != nil || rec.Value == nil {
			return badInput(400, streamapi.CodeInvalidRecord, "record %d: an arrow stream's record needs \"value\": a JSON object of the schema's columns", i)
		}
		if rec.Offset != nil {
			return badInput(400, streamapi.CodeInvalidRecord, "record %d: \"offset\" is set by the stream", i)
		}
		hs := make([]arrowenc.Header, len(rec.Headers))
		for j, h := range rec.Headers {
			hs[j] = arrowenc.Header{Key: h.Key, Value: h.Value}
		}
		row, err := arrowenc.Check(sch, i, rec.Value, hs, now)
		if err != nil {
			return badInput(400, streamapi.CodeInvalidRecord, "%v", err)
		}
		p := sticky
		switch {
		case rec.Partition != nil:
			if *rec.Partition < 0 || *rec.Partition >= st.Partitions {
				return badInput(400, streamapi.CodeInvalidRecord, "record %d: partition %d does not exist: stream %q has partitions 0..%d", i, *rec.Partition, st.Name, st.Partitions-1)
			}
			p = *rec.Partition
		case row.Key != nil:
			p = KeyPartition(row.Key, st.Partitions)
		}
		ts := row.TimestampMs
		if rec.Timestamp != nil {
			ts = *rec.Timestamp
		}
		g := groups[p]
		if g == nil {
			g = &group{b: arrowenc.NewBuilder(sch, nil)}
			groups[p] = g
			order = append(order, p)
		}
		within[i] = int64(g.b.Rows())
		g.b.AppendChecked(row)
		g.maxTS = max(g.maxTS, ts)
		parts[i] = p
	}
	reqs := make([]writer.Request, len(order))
	at := make(map[int32]int, len(order))
	for i, p := range order {
		g := groups[p]
		rows := int64(g.b.Rows())
		batch := g.b.NewBatch()
		frame, err := arrowenc.EncodePayload(version, batch)
		batch.Release()
		if err != nil {
			return err
		}
		reqs[i] = writer.Request{StreamID: st.ID, Partition: p, Batches: frame, Records: rows, MaxTimestamp: g.maxTS, Encoding: walfmt.EncodingArrow}
		at[p] = i
	}
	wctx, cancel := context.WithTimeout(r.Context(), s.cfg.Limits.ProduceWait)
	defer cancel()
	res, err := wr.Write(wctx, reqs)
	partial := errors.Is(err, writer.ErrPartialCommit) && len(res) == len(reqs)
	if err != nil && !partial {
		return &writeFailure{err}
	}
	out := streamapi.ProduceResponse{Offsets: make([]streamapi.RecordOffset, len(req.Records))}
	var token uint64
	committed := 0
	for i := range req.Records {
		rs := res[at[parts[i]]]
		if rs.Err != nil {
			a := writeOutcome(rs.Err)
			a.detail.Message = rs.Err.Error()
			out.Offsets[i] = streamapi.RecordOffset{Partition: parts[i], Offset: -1, Error: &a.detail}
			continue
		}
		out.Offsets[i] = streamapi.RecordOffset{Partition: parts[i], Offset: rs.BaseOffset + within[i]}
		token = max(token, rs.Token)
		committed++
	}
	out.Token = FormatToken(token)
	s.m.records.Add(float64(committed))
	s.m.bytes.Add(float64(len(body)))
	status := http.StatusOK
	if partial {
		status = http.StatusMultiStatus
	}
	writeJSON(w, status, out)
	return nil
}

// fetchArrow is a fetch of an arrow stream: JSON records built from the rows, or Arrow IPC.
// At the high watermark it waits up to max_wait_ms for a commit (reader.WaitArrow).
func (s *Server) fetchArrow(w http.ResponseWriter, r *http.Request, st meta.Stream, p int32) error {
	q := r.URL.Query()
	if err := onlyParams(q, "fetch takes", "offset", "max_bytes", "max_wait_ms", "token", "columns"); err != nil {
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
	var columns []string
	if c := q.Get("columns"); c != "" {
		columns = strings.Split(c, ",")
	}
	waitMs, err := intParam(r, "max_wait_ms", 0, 0, MaxWait.Milliseconds())
	if err != nil {
		return err
	}
	if err := s.cfg.Reader.WaitArrow(r.Context(), st.ID, p, offset, time.Duration(waitMs)*time.Millisecond); err != nil {
		return err
	}
	asIPC := strings.Contains(r.Header.Get("Accept"), MediaArrowStream)
	// From segments only the columns asked are read (JSON records also need their key,
	// timestamp and headers columns).
	res, err := arrowstream.ReadArrowFrames(r.Context(), s.cfg.Reader, reader.ArrowRead{StreamID: st.ID, Partition: p, Offset: offset,
		Columns: columns, RecordColumns: !asIPC, MaxBytes: maxBytes})
	if err != nil {
		return err
	}
	defer res.Release()
	var (
		buf    = []byte(`{"records":[`)
		n      int
		ipcBuf bytes.Buffer
		ipcW   *ipc.Writer
		ipcSch *arrow.Schema
		next   = offset
	)
	if len(res.Chunks) == 0 {
		next = max(offset, res.NextOffset)
	}
chunks:
	for _, c := range res.Chunks {
		off := c.BaseOffset
		for _, f := range c.Frames {
			proj, err := arrowenc.Project(f.Schema, columns)
			if err != nil {
				return badInput(400, streamapi.CodeBadRequest, "columns: %v", err)
			}
			for _, b := range f.Batches {
				rows := int(b.NumRows())
				skip := 0
				if off < offset {
					skip = int(min(int64(rows), offset-off))
				}
				if asIPC {
					pb := arrowenc.ProjectBatch(b, proj)
					if ipcW == nil {
						ipcSch = pb.Schema()
						ipcW = ipc.NewWriter(&ipcBuf, ipc.WithSchema(ipcSch))
					} else if !ipcSch.Equal(pb.Schema()) {
						// A later schema version: the client fetches it from next_offset.
						pb.Release()
						break chunks
					}
					if skip < rows {
						sl := pb.NewSlice(int64(skip), int64(rows))
						err = ipcW.Write(sl)
						sl.Release()
					}
					pb.Release()
					if err != nil {
						return err
					}
				} else {
					for i := skip; i < rows; i++ {
						if n > 0 {
							buf = append(buf, ',')
						}
						buf = appendArrowRecordJSON(buf, off+int64(i), b, i, proj)
						n++
					}
				}
				off += int64(rows)
				next = max(next, off)
			}
		}
	}
	h := w.Header()
	setOffsetHeaders(h, reader.Result{NextOffset: next, HighWatermark: res.HighWatermark, LogStart: res.LogStart})
	if asIPC {
		if ipcW == nil {
			sch, _, err := s.schema(r.Context(), st.ID, 0)
			if err != nil {
				return err
			}
			proj, err := arrowenc.Project(sch.Arrow(), columns)
			if err != nil {
				return badInput(400, streamapi.CodeBadRequest, "columns: %v", err)
			}
			empty := arrowenc.ProjectSchema(sch.Arrow(), proj)
			ipcW = ipc.NewWriter(&ipcBuf, ipc.WithSchema(empty))
		}
		if err := ipcW.Close(); err != nil {
			return err
		}
		h.Set("Content-Type", MediaArrowStream)
		_, _ = w.Write(ipcBuf.Bytes())
		return nil
	}
	buf = append(buf, `],"next_offset":`...)
	buf = appendInt(buf, next)
	buf = append(buf, `,"high_watermark":`...)
	buf = appendInt(buf, res.HighWatermark)
	buf = append(buf, `,"log_start":`...)
	buf = appendInt(buf, res.LogStart)
	buf = append(buf, "}\n"...)
	h.Set("Content-Type", "application/json")
	_, _ = w.Write(buf)
	s.m.fetched.Add(float64(n))
	return nil
}

// appendArrowRecordJSON appends one row as a fetched record: the shape of a kafka
// stream's, its value the row's columns (projected) as a JSON object, its key the key
// column's value, its timestamp the timestamp column's (ms) when the schema has one.
func appendArrowRecordJSON(dst []byte, offset int64, b arrow.RecordBatch, row int, proj arrowenc.Projection) []byte {
	dst = append(dst, `{"offset":`...)
	dst = appendInt(dst, offset)
	key, ts, hasTS := arrowenc.RowKeyTimestamp(b, row)
	if hasTS {
		dst = append(dst, `,"timestamp":`...)
		dst = appendInt(dst, ts)
	}
	if key != nil {
		dst = append(dst, `,"key":`...)
		dst = appendString(dst, string(key))
	}
	dst = append(dst, `,"value":`...)
	dst = arrowenc.AppendRowJSON(dst, b, row, proj)
	if hs := arrowenc.RowHeaders(b, row); len(hs) > 0 {
		dst = append(dst, `,"headers":[`...)
		for i, h := range hs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendHeaderJSON(dst, recordbatch.Header{Key: h.Key, Value: h.Value})
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// routeArrow registers the schema routes of arrow streams.
func (s *Server) routeArrow() {
	const schema = "/v1/namespaces/{ns}/streams/{stream}/schema"
	s.handle("GET "+schema, s.getSchema)
	s.handle("PUT "+schema, s.putSchema)
}

// SchemaResponse answers the schema routes.
type SchemaResponse struct {
	Version   uint32          `json:"version"`
	Schema    json.RawMessage `json:"schema"`
	CreatedMs int64           `json:"created_ms"`
}

// PutSchemaRequest is the body of PUT .../schema: the next version and the version it
// replaces.
type PutSchemaRequest struct {
	Schema        json.RawMessage `json:"schema"`
	ExpectVersion uint32          `json:"expect_version"`
}

func (s *Server) arrowStream(r *http.Request) (meta.Stream, meta.SchemaClient, error) {
	st, err := s.streams.get(r.Context(), r.PathValue("ns"), r.PathValue("stream"))
	if err != nil {
		return st, nil, err
	}
	if st.Encoding != meta.EncodingArrow {
		return st, nil, badInput(400, streamapi.CodeInvalidArgument, "stream %q has encoding %s: only arrow streams have a schema", st.Name, st.Encoding)
	}
	sc, err := s.schemaClient()
	return st, sc, err
}

func (s *Server) getSchema(w http.ResponseWriter, r *http.Request) error {
	st, sc, err := s.arrowStream(r)
	if err != nil {
		return err
	}
	v, err := intParam(r, "version", 0, 0, meta.MaxSchemaVersions)
	if err != nil {
		return err
	}
	got, err := sc.GetSchema(r.Context(), st.ID, uint32(v))
	if errors.Is(err, meta.ErrSchemaNotFound) {
		return badInput(404, streamapi.CodeNotFound, "stream %q has no schema version %d", st.Name, v)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, SchemaResponse{Version: got.Version, Schema: got.Schema, CreatedMs: got.CreatedMs})
	return nil
}

func (s *Server) putSchema(w http.ResponseWriter, r *http.Request) error {
	st, sc, err := s.arrowStream(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req PutSchemaRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.Schema == nil {
		return badInput(400, streamapi.CodeInvalidArgument, `"schema" is required`)
	}
	next, err := arrowenc.ParseSchema(req.Schema)
	if err != nil {
		return badInput(400, streamapi.CodeInvalidArgument, "%v", err)
	}
	got, err := sc.PutSchema(r.Context(), meta.PutSchema{Namespace: st.Namespace, Stream: st.Name, Schema: next.JSON(), ExpectVersion: req.ExpectVersion})
	if err != nil {
		return err
	}
	s.arrowCache().Forget(st.ID) // this node's producers see the new version at once
	writeJSON(w, http.StatusOK, SchemaResponse{Version: got.Version, Schema: got.Schema, CreatedMs: got.CreatedMs})
	return nil
}
