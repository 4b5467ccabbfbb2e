package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/arrowstream"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/arrowenc"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// Arrow streams over loam.v1 (docs/arrow.md): Produce takes records whose value is a JSON
// object of the schema's columns (as the HTTP JSON produce) or arrow_ipc, an Arrow IPC
// stream (as the HTTP Arrow IPC produce); Fetch and Subscribe answer records built from
// the rows, value the row as a JSON object (the HTTP JSON fetch's value), key the key
// column's value, timestamp the timestamp column's (ms), headers the headers column's.
// RECORD_BATCHES answers are refused: Arrow Flight DoGet serves the rows as Arrow.

// arrowSchemas returns the API's schema cache (Server.arrow, made once).
func (s *Server) arrowSchemas() *arrowstream.Schemas {
	s.arrowOnce.Do(func() { s.arrow = arrowstream.NewSchemas(s.cfg.Meta) })
	return s.arrow
}

// produceArrow is a Produce to an arrow stream.
func (s *Server) produceArrow(ctx context.Context, req *loamv1pb.ProduceRequest, st meta.Stream, wr writer.Writer) (*loamv1pb.ProduceResponse, error) {
	switch {
	case len(req.GetBatches()) > 0:
		return nil, badInput(streamapi.CodeInvalidRecord, "stream %q is an arrow stream: send records (values as JSON objects) or arrow_ipc, not RecordBatch v2 batches", st.Name)
	case req.GetProducer() != nil:
		return nil, badInput(streamapi.CodeInvalidArgument, "idempotent producers are not supported on arrow streams yet")
	case len(req.GetArrowIpc()) > 0 && len(req.GetRecords()) > 0:
		return nil, badInput(streamapi.CodeInvalidRecord, "the request has both records and arrow_ipc: send one kind per request")
	case len(req.GetArrowIpc()) == 0 && len(req.GetRecords()) == 0:
		return nil, badInput(streamapi.CodeInvalidRecord, "the request has no records and no arrow_ipc")
	case req.ArrowPartition != nil && len(req.GetArrowIpc()) == 0:
		return nil, badInput(streamapi.CodeInvalidArgument, "arrow_partition is the partition of arrow_ipc: records carry their own partition")
	}
	sch, version, err := s.arrowSchemas().Get(ctx, st.ID, 0)
	if err != nil {
		return nil, err
	}
	sticky := int32(s.sticky.Add(1) % uint32(st.Partitions))
	now := s.cfg.Now().UnixMilli()
	var plan *arrowstream.Plan
	if ipcBytes := req.GetArrowIpc(); len(ipcBytes) > 0 {
		plan, err = s.planArrowIPC(ctx, st, ipcBytes, req.ArrowPartition, sticky, now)
	} else {
		plan, err = s.planArrowJSON(st, sch, version, req.GetRecords(), sticky, now)
	}
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.Limits.ProduceWait)
	defer cancel()
	outs, token, partial, err := arrowstream.Write(wctx, wr, plan)
	if err != nil {
		return nil, &writeFailure{err}
	}
	out := &loamv1pb.ProduceResponse{Offsets: make([]*loamv1pb.RecordOffset, len(plan.RowPart)), Partial: partial, Token: httpapi.FormatToken(token)}
	for i, pi := range plan.RowPart {
		o := outs[pi]
		if o.Err != nil {
			a := writeOutcome(o.Err)
			a.msg = o.Err.Error()
			out.Offsets[i] = &loamv1pb.RecordOffset{Partition: o.Partition, Offset: -1, Error: errorOf(a)}
			continue
		}
		out.Offsets[i] = &loamv1pb.RecordOffset{Partition: o.Partition, Offset: o.BaseOffset + plan.RowWithin[i]}
	}
	for _, o := range outs {
		if o.Err == nil {
			s.m.records.Add(float64(o.Rows))
		}
	}
	return out, nil
}

func (s *Server) planArrowIPC(ctx context.Context, st meta.Stream, b []byte, partition *int32, sticky int32, now int64) (*arrowstream.Plan, error) {
	as, batches, err := arrowenc.ReadIPC(b)
	if err != nil {
		return nil, badInput(streamapi.CodeInvalidRecord, "arrow_ipc: %v", err)
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
		return nil, badInput(streamapi.CodeRequestTooLarge, "arrow_ipc has %d rows, more than the limit of %d records", rows, s.cfg.Limits.MaxRecords)
	}
	sch, version, err := s.arrowSchemas().Match(ctx, st, as)
	if errors.Is(err, arrowenc.ErrSchemaMismatch) {
		return nil, badInput(streamapi.CodeInvalidRecord, "arrow_ipc: %v", err)
	}
	if err != nil {
		return nil, err
	}
	place := arrowstream.Placement{Partition: -1, Sticky: sticky}
	if partition != nil {
		if err := checkPartition("arrow_partition", *partition, st.Partitions); err != nil {
			return nil, err
		}
		place.Partition = *partition
	}
	plan, err := arrowstream.Build(st, sch, version, batches, place, now, 0)
	if errors.Is(err, arrowenc.ErrInvalidIPC) || errors.Is(err, arrowenc.ErrSchemaMismatch) || errors.Is(err, arrowstream.ErrNoRows) {
		return nil, badInput(streamapi.CodeInvalidRecord, "arrow_ipc: %v", err)
	}
	return plan, err
}

func (s *Server) planArrowJSON(st meta.Stream, sch *arrowenc.Schema, version uint32, in []*loamv1pb.Record, sticky int32, now int64) (*arrowstream.Plan, error) {
	if len(in) > s.cfg.Limits.MaxRecords {
		return nil, badInput(streamapi.CodeRequestTooLarge, "the request has %d records, more than the limit of %d", len(in), s.cfg.Limits.MaxRecords)
	}
	recs := make([]arrowstream.JSONRecord, len(in))
	for i, r := range in {
		switch {
		case r.Key != nil:
			return nil, badInput(streamapi.CodeInvalidRecord, "record %d: an arrow stream's key is its schema's key column, not key", i)
		case r.Value == nil:
			return nil, badInput(streamapi.CodeInvalidRecord, "record %d: an arrow stream's record needs a value: a JSON object of the schema's columns", i)
		case r.Offset != nil:
			return nil, badInput(streamapi.CodeInvalidRecord, "record %d: offset is set by the stream", i)
		case r.TimestampMs != nil && *r.TimestampMs < 0:
			return nil, badInput(streamapi.CodeInvalidRecord, "record %d: timestamp_ms %d is negative", i, *r.TimestampMs)
		}
		recs[i] = arrowstream.JSONRecord{Value: r.Value, Partition: r.Partition, TimestampMs: r.TimestampMs}
		for _, h := range r.Headers {
			recs[i].Headers = append(recs[i].Headers, arrowenc.Header{Key: h.Key, Value: h.Value})
		}
	}
	plan, err := arrowstream.BuildJSON(st, sch, version, recs, sticky, now)
	switch {
	case errors.Is(err, arrowenc.ErrInvalidRecord):
		return nil, badInput(streamapi.CodeInvalidRecord, "%v", err)
	case errors.Is(err, arrowstream.ErrBadPartition):
		return nil, badInput(streamapi.CodePartitionNotFound, "%v", err)
	}
	return plan, err
}

// arrowRecords reads an arrow stream's partition as records (see the file comment):
// at most maxBytes of stored chunks from offset, waiting up to wait at the high watermark.
func (s *Server) arrowRecords(ctx context.Context, st meta.Stream, p int32, offset int64, maxBytes int, wait time.Duration) ([]*loamv1pb.Record, *arrowstream.Read, error) {
	rd, err := arrowstream.ReadBatches(ctx, s.cfg.Reader, st.ID, p, offset, int64(maxBytes), wait)
	if err != nil {
		return nil, nil, err
	}
	defer rd.Release()
	out := make([]*loamv1pb.Record, 0, rd.Rows())
	for _, b := range rd.Batches {
		all, err := arrowenc.Project(b.Batch.Schema(), nil)
		if err != nil {
			return nil, nil, err
		}
		for i := 0; i < int(b.Batch.NumRows()); i++ {
			off := b.Offset + int64(i)
			r := &loamv1pb.Record{Value: arrowenc.AppendRowJSON(nil, b.Batch, i, all), Partition: &p, Offset: &off}
			key, ts, hasTS := arrowenc.RowKeyTimestamp(b.Batch, i)
			if key != nil {
				r.Key = key
			}
			if hasTS {
				r.TimestampMs = &ts
			}
			for _, h := range arrowenc.RowHeaders(b.Batch, i) {
				r.Headers = append(r.Headers, &loamv1pb.Header{Key: h.Key, Value: h.Value})
			}
			out = append(out, r)
		}
	}
	return out, rd, nil
}

// subscribeArrow is one poll of a subscription to an arrow stream: it sends what it read
// (nothing when the poll waited its time) and returns the next offset.
func (s *Server) subscribeArrow(ctx context.Context, ss loamv1pb.RecordService_SubscribeServer, r read, offset int64) (int64, error) {
	recs, rd, err := s.arrowRecords(ctx, r.st, r.p, offset, r.maxBytes, s.cfg.SubscribePoll)
	if err != nil {
		return offset, err
	}
	if rd.NextOffset <= offset {
		// Nothing came: check the stream is still the one subscribed to, as Subscribe does.
		st, err := s.cfg.Streams.Stream(ctx, r.st.Namespace, r.st.Name)
		if err != nil {
			return offset, err
		}
		if st.ID != r.st.ID {
			return offset, &inputError{code: codes.NotFound, reason: streamapi.CodeStreamNotFound,
				msg: fmt.Sprintf("stream %q was deleted (and created again) while subscribed", st.Name)}
		}
		return offset, nil
	}
	s.m.fetched.Add(float64(len(recs)))
	if err := ss.Send(&loamv1pb.SubscribeResponse{Records: recs, NextOffset: rd.NextOffset, HighWatermark: rd.HighWatermark, LogStart: rd.LogStart}); err != nil {
		return offset, err
	}
	return rd.NextOffset, nil
}
