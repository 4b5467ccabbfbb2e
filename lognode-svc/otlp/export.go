package otlp

import (
	"context"
	"errors"
	"fmt"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/otlplogs"
	"github.com/loamhq/loam/shared/recordbatch"
)

// target is where an Export's logs go.
type target struct{ ns, stream string }

// resolve authenticates the request (authorization is its Authorization value) and
// settles its target from the loam-namespace and loam-stream values (empty: defaults).
func (s *Server) resolve(ctx context.Context, authorization, ns, stream string) (target, error) {
	if s.cfg.Auth != nil {
		k, err := s.cfg.Auth.Check(ctx, authorization, auth.Scope{Namespace: ns})
		if err != nil {
			return target{}, err
		}
		if ns == "" {
			ns = k.Namespace
		}
	}
	if ns == "" {
		ns = meta.DefaultNS
	}
	if stream == "" {
		stream = s.cfg.Settings.DefaultStream
	}
	return target{ns: ns, stream: stream}, nil
}

// stream describes t's stream, creating it when it is one that is created on first use.
func (s *Server) stream(ctx context.Context, t target) (meta.Stream, error) {
	st, err := s.cfg.Streams.Stream(ctx, t.ns, t.stream)
	if err == nil || !errors.Is(err, meta.ErrStreamNotFound) {
		return st, err
	}
	if !s.autoCreates(t.ns, t.stream) {
		return meta.Stream{}, fmt.Errorf("stream %q of namespace %q does not exist (OTLP ingest creates only %q and the streams it is configured to): %w",
			t.stream, t.ns, s.cfg.Settings.DefaultStream, err)
	}
	_, err = s.cfg.Meta.CreateStream(ctx, meta.StreamConfig{Namespace: t.ns, Name: t.stream, Partitions: s.cfg.Settings.Partitions,
		Class: meta.ClassStandard, Encoding: meta.EncodingKafka, RetentionMs: 7 * 24 * time.Hour.Milliseconds(), RetentionBytes: -1,
		CleanupPolicy: meta.CleanupDelete})
	switch {
	case err == nil:
		s.cfg.Logger.Info("OTLP ingest created its stream", "namespace", t.ns, "stream", t.stream, "partitions", s.cfg.Settings.Partitions)
	case errors.Is(err, meta.ErrStreamExists):
		// Another node (or request) created it first.
	default:
		return meta.Stream{}, fmt.Errorf("create stream %q of namespace %q: %w", t.stream, t.ns, err)
	}
	s.cfg.Streams.StreamsChanged()
	return s.cfg.Streams.Stream(ctx, t.ns, t.stream)
}

// exported is the outcome of an Export that succeeded.
type exported struct {
	committed int64
	rejected  int64
	message   string
}

// export writes req's logs to t and returns once every record written is committed.
// size is the request's body size, spent from the namespace's ingest quota.
func (s *Server) export(ctx context.Context, t target, req *collogspb.ExportLogsServiceRequest, size int) (exported, error) {
	total := otlplogs.Count(req)
	if total == 0 {
		return exported{}, nil // an empty request succeeds: nothing to look up or write
	}
	if total > s.cfg.Limits.MaxRecords {
		return exported{}, badRequest("the request has %d log records, more than the limit of %d", total, s.cfg.Limits.MaxRecords)
	}
	st, err := s.stream(ctx, t)
	if err != nil {
		return exported{}, err
	}
	wr, ok := s.cfg.Writers[st.Class]
	if !ok {
		return exported{}, badRequest("stream %q has class %q, which this node does not serve", st.Name, st.Class)
	}
	if s.cfg.AdmitIngest != nil {
		if err := s.cfg.AdmitIngest(ctx, st.Namespace, size); err != nil {
			return exported{}, err
		}
	}
	res := otlplogs.Map(req, otlplogs.Options{KeyAttribute: s.keyAttribute(st),
		MaxRecordBytes: s.cfg.Limits.MaxRecordBytes, ArrivalMs: s.cfg.Now().UnixMilli()})
	out := exported{rejected: res.Rejected, message: res.Message}
	if len(res.Records) == 0 {
		return out, nil
	}
	// One batch per partition, records in request order.
	sticky := int32(s.sticky.Add(1) % uint32(st.Partitions)) // unsigned: wraps without going negative
	var (
		order  []int32
		groups = make(map[int32][]recordbatch.Record)
	)
	for _, r := range res.Records {
		p := sticky
		if r.Key != nil {
			p = httpapi.KeyPartition(r.Key, st.Partitions)
		}
		g, seen := groups[p]
		if !seen {
			order = append(order, p)
		}
		groups[p] = append(g, recordbatch.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers, OffsetDelta: int32(len(g))})
	}
	reqs := make([]writer.Request, len(order))
	for i, p := range order {
		g := groups[p]
		batch, err := recordbatch.Append(nil, g, recordbatch.DefaultBuildOptions())
		if err != nil {
			return exported{}, badRequest("partition %d: %v", p, err)
		}
		var maxTS int64
		for _, r := range g {
			maxTS = max(maxTS, r.Timestamp)
		}
		reqs[i] = writer.Request{StreamID: st.ID, Partition: p, Batches: batch, Records: int64(len(g)), MaxTimestamp: maxTS}
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.Limits.ProduceWait)
	defer cancel()
	results, err := wr.Write(wctx, reqs)
	partial := errors.Is(err, writer.ErrPartialCommit) && len(results) == len(reqs)
	if err != nil && !partial {
		return exported{}, &writeFailure{err}
	}
	if partial {
		// Some partitions' chunks were refused. A refusal that a retry may undo fails the
		// whole Export (retryable: the committed records are written again, at-least-once);
		// a permanent one (the stream is gone) is reported in partial_success.
		for i, r := range results {
			if r.Err == nil {
				continue
			}
			a := writeAnswer(r.Err)
			if !a.permanent {
				return exported{}, &writeFailure{r.Err}
			}
			out.rejected += reqs[i].Records
			if out.message == "" {
				out.message = fmt.Sprintf("partition %d: %v", reqs[i].Partition, r.Err)
			}
		}
	}
	for i, r := range results {
		if r.Err == nil {
			out.committed += reqs[i].Records
		}
	}
	return out, nil
}
