package httpapi

// Deleting a named consumer and resetting its offsets over HTTP (docs/consumers.md):
//
//	DELETE /v1/namespaces/{ns}/consumers/{name}[?force=true]  -> 204
//	POST   /v1/namespaces/{ns}/consumers/{name}/reset         {"stream","to","partitions","offset","timestamp_ms","force"}
//	                                                          -> {"offsets": [{"partition","offset"}]}
//
// Both are refused with consumer_active (409) while members are live (on the stream, for a
// reset) unless forced, as Kafka's tools refuse them for a group that is not empty. The
// sequencer applies them (meta.Client.DeleteConsumer, ResetConsumerOffsets).

import (
	"errors"
	"net/http"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// routeConsumerAdmin registers the delete and reset routes.
func (s *Server) routeConsumerAdmin() {
	const consumer = "/v1/namespaces/{ns}/consumers/{name}"
	s.handle("DELETE "+consumer, s.deleteConsumer)
	s.handle("POST "+consumer+"/reset", s.resetConsumerOffsets)
	s.mux.HandleFunc(consumer+"/reset", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, streamapi.CodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path)
	})
}

// consumerAdminErr maps ErrConsumerActive, then the other consumer sentinels.
func consumerAdminErr(err error) error {
	if errors.Is(err, meta.ErrConsumerActive) {
		return badInput(http.StatusConflict, streamapi.CodeConsumerActive, "%s", err.Error())
	}
	return consumerErr(err)
}

func (s *Server) deleteConsumer(w http.ResponseWriter, r *http.Request) error {
	force := false
	for k, v := range r.URL.Query() {
		switch {
		case k != "force":
			return badInput(400, streamapi.CodeBadRequest, "unknown query parameter %q: a consumer delete takes force", k)
		case len(v) != 1 || (v[0] != "true" && v[0] != "false"):
			return badInput(400, streamapi.CodeBadRequest, "query parameter force=%q: want true or false", v)
		}
		force = v[0] == "true"
	}
	if err := s.cfg.Meta.DeleteConsumer(r.Context(), r.PathValue("ns"), r.PathValue("name"), force); err != nil {
		return consumerAdminErr(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) resetConsumerOffsets(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req streamapi.ResetOffsetsRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	rs, err := ConsumerReset(r.PathValue("ns"), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	offs, err := s.cfg.Meta.ResetConsumerOffsets(r.Context(), rs)
	if err != nil {
		return consumerAdminErr(err)
	}
	out := streamapi.ResetOffsetsResponse{Offsets: make([]streamapi.PartitionOffset, len(offs))}
	for i, o := range offs {
		out.Offsets[i] = streamapi.PartitionOffset{Partition: o.Partition, Offset: o.Offset}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// ConsumerReset checks a reset request (its fields against "to") and makes it the
// sequencer's; the gRPC API checks its requests the same way.
func ConsumerReset(ns, name string, req streamapi.ResetOffsetsRequest) (meta.ConsumerReset, error) {
	rs := meta.ConsumerReset{Namespace: ns, Consumer: name, Stream: req.Stream, Partitions: req.Partitions, To: req.To, Force: req.Force}
	if req.Stream == "" {
		return rs, badInput(400, streamapi.CodeInvalidArgument, `"stream" is required`)
	}
	switch req.To {
	case streamapi.ResetEarliest, streamapi.ResetLatest:
		if req.Offset != nil || req.TimestampMs != nil {
			return rs, badInput(400, streamapi.CodeInvalidArgument, `"to": %q takes neither "offset" nor "timestamp_ms"`, req.To)
		}
	case streamapi.ResetOffset:
		if req.Offset == nil || req.TimestampMs != nil {
			return rs, badInput(400, streamapi.CodeInvalidArgument, `"to": "offset" takes "offset" (and not "timestamp_ms")`)
		}
		rs.Offset = *req.Offset
	case streamapi.ResetTimestamp:
		if req.TimestampMs == nil || req.Offset != nil {
			return rs, badInput(400, streamapi.CodeInvalidArgument, `"to": "timestamp" takes "timestamp_ms" (and not "offset")`)
		}
		rs.TimestampMs = *req.TimestampMs
	default:
		return rs, badInput(400, streamapi.CodeInvalidArgument, `"to": %q: want earliest, latest, offset or timestamp`, req.To)
	}
	if err := meta.CheckConsumerReset(rs); err != nil {
		return rs, badInput(400, streamapi.CodeInvalidArgument, "%v", err)
	}
	return rs, nil
}
