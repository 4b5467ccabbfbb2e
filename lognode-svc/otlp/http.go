package otlp

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/otlplogs"
)

// OTLP/HTTP: POST /v1/logs, Content-Type application/x-protobuf or application/json,
// Content-Encoding gzip or none. The answer has the request's Content-Type: an
// ExportLogsServiceResponse on success (200, partial_success when records were
// rejected), a google.rpc.Status on failure, with the status errors.go gives and
// Retry-After when the failure is retryable.

// Paths served.
const PathLogs = "/v1/logs"

const (
	mediaProtobuf = "application/x-protobuf"
	mediaJSON     = "application/json"
)

// HTTPHandler is the OTLP/HTTP handler.
func (s *Server) HTTPHandler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	// Answers are in the request's encoding when it names one of OTLP's, else JSON.
	media, known := mediaJSON, false
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && (mt == mediaProtobuf || mt == mediaJSON) {
		media, known = mt, true
	}
	switch {
	case r.URL.Path != PathLogs:
		s.httpFail(w, media, 0, &requestError{status: http.StatusNotFound, code: codes.Unimplemented, msg: fmt.Sprintf("no route %s %s: OTLP logs go to POST %s", r.Method, r.URL.Path, PathLogs)})
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		s.httpFail(w, media, 0, &requestError{status: http.StatusMethodNotAllowed, code: codes.Unimplemented, msg: fmt.Sprintf("%s is not allowed on %s: send POST", r.Method, PathLogs)})
		return
	case !known:
		s.httpFail(w, media, 0, &requestError{status: http.StatusUnsupportedMediaType, code: codes.InvalidArgument,
			msg: fmt.Sprintf("Content-Type %q is not supported: send %s or %s", r.Header.Get("Content-Type"), mediaProtobuf, mediaJSON)})
		return
	}
	gz := false
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		gz = true
	default:
		s.httpFail(w, media, 0, &requestError{status: http.StatusUnsupportedMediaType, code: codes.InvalidArgument,
			msg: fmt.Sprintf("Content-Encoding %q is not supported: send gzip or none", enc)})
		return
	}
	if err := s.hadm.enter(); err != nil {
		s.httpFail(w, media, 0, err)
		return
	}
	defer s.hadm.leave()
	body, wire, held, err := s.readBody(w, r, gz)
	defer s.hadm.release(held)
	s.m.bytes.WithLabelValues(transportHTTP).Add(float64(wire))
	if err != nil {
		s.httpFail(w, media, 0, err)
		return
	}
	var req *collogspb.ExportLogsServiceRequest
	if media == mediaProtobuf {
		req, err = otlplogs.DecodeProto(body)
	} else {
		req, err = otlplogs.DecodeJSON(body)
	}
	if err != nil {
		s.httpFail(w, media, 0, err)
		return
	}
	n := otlplogs.Count(req)
	t, err := s.resolve(r.Context(), r.Header.Get("Authorization"), r.Header.Get(HeaderNamespace), r.Header.Get(HeaderStream))
	if err != nil {
		s.httpFail(w, media, n, err)
		return
	}
	out, err := s.export(r.Context(), t, req, len(body))
	if err != nil {
		s.httpFail(w, media, n, err)
		return
	}
	s.done(transportHTTP, out)
	resp := &collogspb.ExportLogsServiceResponse{}
	if out.rejected > 0 {
		resp.PartialSuccess = &collogspb.ExportLogsPartialSuccess{RejectedLogRecords: out.rejected, ErrorMessage: out.message}
	}
	writeMessage(w, media, http.StatusOK, resp)
}

// done counts a successful Export.
func (s *Server) done(transport string, out exported) {
	s.m.received.WithLabelValues(transport).Add(float64(out.committed))
	outcome := "ok"
	if out.rejected > 0 {
		s.m.partial.WithLabelValues(transport).Add(float64(out.rejected))
		outcome = "partial"
	}
	s.m.requests.WithLabelValues(transport, outcome).Inc()
}

// readBody reads the body within Limits.MaxRequestBytes, decompressing it when gz, and
// holds its bytes (compressed and decompressed) from the admission budget; the caller
// releases held. wire is the number of body bytes read.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, gz bool) (body []byte, wire int, held int64, err error) {
	limit := int64(s.cfg.Limits.MaxRequestBytes)
	if r.ContentLength > limit {
		return nil, 0, 0, &requestError{status: http.StatusRequestEntityTooLarge, code: codes.ResourceExhausted,
			msg: fmt.Sprintf("the request body of %d bytes is over the limit of %d bytes", r.ContentLength, limit)}
	}
	want := r.ContentLength
	if want < 0 {
		want = limit
	}
	if err := s.hadm.reserve(want); err != nil {
		return nil, 0, 0, err
	}
	held = want
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, len(raw), held, err
		}
		return nil, len(raw), held, badRequest("read the request body: %v", err)
	}
	if !gz {
		return raw, len(raw), held, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, len(raw), held, badRequest("the body is not gzip (Content-Encoding: gzip): %v", err)
	}
	body, err = io.ReadAll(io.LimitReader(zr, limit+1))
	switch {
	case err != nil:
		return nil, len(raw), held, badRequest("the gzip body is corrupt: %v", err)
	case int64(len(body)) > limit:
		return nil, len(raw), held, &requestError{status: http.StatusRequestEntityTooLarge, code: codes.ResourceExhausted,
			msg: fmt.Sprintf("the request body decompresses to more than the limit of %d bytes", limit)}
	}
	// The decompressed bytes are held too (at most MaxRequestBytes were read).
	if err := s.hadm.reserve(int64(len(body))); err != nil {
		return nil, len(raw), held, err
	}
	return body, len(raw), held + int64(len(body)), nil
}

// httpFail answers err as a google.rpc.Status in media; records is the number of log
// records of the request (0 when it did not decode).
func (s *Server) httpFail(w http.ResponseWriter, media string, records int, err error) {
	a := errorAnswer(err)
	if a.status == http.StatusInternalServerError || a.status == http.StatusServiceUnavailable {
		s.cfg.Logger.Warn("OTLP export failed", "transport", transportHTTP, "status", a.status, "err", err)
	}
	s.m.refused.WithLabelValues(transportHTTP).Add(float64(records))
	s.m.requests.WithLabelValues(transportHTTP, strconv.Itoa(a.status)).Inc()
	if a.retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((a.retry+999_999_999)/1e9))))
	}
	writeMessage(w, media, a.status, &status.Status{Code: int32(a.code), Message: a.msg})
}

// writeMessage answers m in media (protobuf, or OTLP/JSON through protojson: neither
// message has ids or enums, where the two encodings differ).
func writeMessage(w http.ResponseWriter, media string, code int, m proto.Message) {
	var (
		b   []byte
		err error
	)
	if media == mediaProtobuf {
		b, err = proto.Marshal(m)
	} else {
		b, err = protojson.Marshal(m)
	}
	if err != nil {
		code, media, b = http.StatusInternalServerError, mediaJSON, []byte(`{"code":13,"message":"encode the answer"}`)
	}
	w.Header().Set("Content-Type", media)
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
