package grpcapi

import (
	"context"

	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// createArrowStream creates an arrow stream with schema version 1 from the request's
// schema: its JSON form or an Arrow IPC schema message, with the HTTP API's checks.
func (s *Server) createArrowStream(ctx context.Context, cfg meta.StreamConfig, req *loamv1pb.CreateStreamRequest) (meta.Stream, error) {
	var (
		sch *arrowenc.Schema
		err error
	)
	switch js, ipc := req.GetSchema(), req.GetArrowSchema(); {
	case js != "" && len(ipc) > 0:
		return meta.Stream{}, badInput(streamapi.CodeInvalidArgument, "set schema or arrow_schema, not both")
	case js != "":
		sch, err = arrowenc.ParseSchema([]byte(js))
	case len(ipc) > 0:
		sch, err = arrowenc.ParseIPCSchema(ipc)
	default:
		return meta.Stream{}, badInput(streamapi.CodeInvalidArgument, `encoding "arrow" needs a schema (JSON) or an arrow_schema (Arrow IPC schema message)`)
	}
	if err != nil {
		return meta.Stream{}, badInput(streamapi.CodeInvalidArgument, "%v", err)
	}
	if cfg.Class != meta.ClassStandard {
		// Fetch reads arrow chunks from the standard class's bucket.
		return meta.Stream{}, badInput(streamapi.CodeInvalidArgument, "class %q: arrow streams are of class standard for now", cfg.Class)
	}
	if cfg.KeyAttribute != "" {
		return meta.Stream{}, badInput(streamapi.CodeInvalidArgument, "key_attribute is for OTLP streams; an arrow stream is keyed by its schema's key column")
	}
	sc, ok := s.cfg.Meta.(meta.SchemaClient)
	if !ok {
		return meta.Stream{}, badInput(streamapi.CodeInvalidArgument, "this node's sequencer client keeps no stream schemas")
	}
	st, _, err := sc.CreateArrowStream(ctx, cfg, sch.JSON())
	return st, err
}
