package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/loamhq/loam/lognode-svc/arrowstream"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// produceArrowIPC is a produce of an Arrow IPC stream (Content-Type
// application/vnd.apache.arrow.stream) to an arrow stream: its schema must be one of the
// stream's schema versions (the error names the first difference from the latest), its
// rows are checked (no null in a column that is not nullable), placed by ?partition= or
// by the key column, and answered as a JSON produce is, one offset per row in the order
// sent. Nothing of the request is written when any row is refused.
func (s *Server) produceArrowIPC(w http.ResponseWriter, r *http.Request, st meta.Stream, wr writer.Writer) error {
	if err := onlyParams(r.URL.Query(), "an Arrow IPC produce takes", "partition"); err != nil {
		return err
	}
	part, err := intParam(r, "partition", -1, -1, int64(st.Partitions)-1)
	if err != nil {
		return err
	}
	body, err := s.readRaw(w, r)
	if err != nil {
		return err
	}
	if err := s.AdmitIngest(r.Context(), st.Namespace, len(body)); err != nil {
		return err
	}
	as, batches, err := arrowenc.ReadIPC(body)
	if err != nil {
		return badInput(400, streamapi.CodeBadRequest, "%v", err)
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	var rows int64
	for _, b := range batches {
		rows += b.NumRows()
	}
	if rows > int64(s.cfg.Limits.MaxRecords) {
		return badInput(413, streamapi.CodeRequestTooLarge, "the Arrow IPC stream has %d rows, more than the limit of %d records", rows, s.cfg.Limits.MaxRecords)
	}
	plan, err := s.planArrowIPC(r.Context(), st, as, batches, arrowstream.Placement{Partition: int32(part), Sticky: int32(s.sticky.Add(1) % uint32(st.Partitions))})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(r.Context(), s.cfg.Limits.ProduceWait)
	defer cancel()
	outs, token, partial, err := arrowstream.Write(wctx, wr, plan)
	if err != nil {
		return &writeFailure{err}
	}
	out := streamapi.ProduceResponse{Offsets: make([]streamapi.RecordOffset, len(plan.RowPart)), Token: FormatToken(token)}
	committed := 0
	for i, pi := range plan.RowPart {
		o := outs[pi]
		if o.Err != nil {
			a := writeOutcome(o.Err)
			a.detail.Message = o.Err.Error()
			out.Offsets[i] = streamapi.RecordOffset{Partition: o.Partition, Offset: -1, Error: &a.detail}
			continue
		}
		out.Offsets[i] = streamapi.RecordOffset{Partition: o.Partition, Offset: o.BaseOffset + plan.RowWithin[i]}
		committed++
	}
	s.m.records.Add(float64(committed))
	s.m.bytes.Add(float64(len(body)))
	status := http.StatusOK
	if partial {
		status = http.StatusMultiStatus
	}
	writeJSON(w, status, out)
	return nil
}

// planArrowIPC matches a client's schema to a version of st's and builds the writer
// requests, answering what is wrong with 400.
func (s *Server) planArrowIPC(ctx context.Context, st meta.Stream, as *arrow.Schema, batches []arrow.RecordBatch, place arrowstream.Placement) (*arrowstream.Plan, error) {
	sch, version, err := arrowstream.MatchWith(ctx, st, as, func(ctx context.Context, v uint32) (*arrowenc.Schema, uint32, error) {
		return s.schema(ctx, st.ID, v)
	})
	if errors.Is(err, arrowenc.ErrSchemaMismatch) {
		return nil, badInput(400, streamapi.CodeInvalidRecord, "%v", err)
	}
	if err != nil {
		return nil, err
	}
	plan, err := arrowstream.Build(st, sch, version, batches, place, s.cfg.Now().UnixMilli(), 0)
	switch {
	case errors.Is(err, arrowenc.ErrInvalidIPC), errors.Is(err, arrowenc.ErrSchemaMismatch), errors.Is(err, arrowstream.ErrNoRows):
		return nil, badInput(400, streamapi.CodeInvalidRecord, "%v", err)
	case errors.Is(err, arrowstream.ErrBadPartition):
		return nil, badInput(400, streamapi.CodeInvalidRecord, "%v", err)
	}
	return plan, err
}
