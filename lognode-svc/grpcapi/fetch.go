package grpcapi

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// Fetch and Subscribe read through the node's reader, with the HTTP API's bounds
// (httpapi.DefaultFetchBytes, MaxFetchBytes, MaxWait). Records answers decode the stored
// batches; RECORD_BATCHES answers hand the stored bytes out as they are (baseOffset
// patched by the reader), never decoding them.

// read is a checked fetch or subscription.
type read struct {
	st       meta.Stream
	p        int32
	offset   int64
	maxBytes int
	raw      bool
}

func (s *Server) checkRead(ctx context.Context, ns, stream string, p int32, offset int64, maxBytes int32, format loamv1pb.FetchFormat) (read, error) {
	if err := required("namespace", ns, "stream", stream); err != nil {
		return read{}, err
	}
	st, err := s.cfg.Streams.Stream(ctx, ns, stream)
	if err != nil {
		return read{}, err
	}
	if p < 0 || p >= st.Partitions {
		return read{}, &inputError{code: codes.NotFound, reason: streamapi.CodePartitionNotFound,
			msg: fmt.Sprintf("partition %d does not exist: stream %q has partitions 0..%d", p, st.Name, st.Partitions-1)}
	}
	if offset < 0 {
		return read{}, badInput(streamapi.CodeBadRequest, "offset %d is negative", offset)
	}
	if maxBytes < 0 || maxBytes > httpapi.MaxFetchBytes {
		return read{}, badInput(streamapi.CodeBadRequest, "max_bytes %d is out of range [0, %d]", maxBytes, httpapi.MaxFetchBytes)
	}
	r := read{st: st, p: p, offset: offset, maxBytes: int(maxBytes)}
	if r.maxBytes == 0 {
		r.maxBytes = httpapi.DefaultFetchBytes
	}
	switch format {
	case loamv1pb.FetchFormat_FETCH_FORMAT_UNSPECIFIED, loamv1pb.FetchFormat_FETCH_FORMAT_RECORDS:
	case loamv1pb.FetchFormat_FETCH_FORMAT_RECORD_BATCHES:
		r.raw = true
	default:
		return read{}, badInput(streamapi.CodeBadRequest, "format %d is not a FetchFormat", int32(format))
	}
	if r.raw && st.Encoding == meta.EncodingArrow {
		return read{}, badInput(streamapi.CodeInvalidArgument, "stream %q is an arrow stream: fetch it as records, or as Arrow with Flight DoGet (RECORD_BATCHES is RecordBatch v2)", st.Name)
	}
	return r, nil
}

// Fetch implements loamv1pb.RecordServiceServer.
func (s *Server) Fetch(ctx context.Context, req *loamv1pb.FetchRequest) (*loamv1pb.FetchResponse, error) {
	r, err := s.checkRead(ctx, req.GetNamespace(), req.GetStream(), req.GetPartition(), req.GetOffset(), req.GetMaxBytes(), req.GetFormat())
	if err != nil {
		return nil, err
	}
	if w := req.GetMaxWaitMs(); w < 0 || w > httpapi.MaxWait.Milliseconds() {
		return nil, badInput(streamapi.CodeBadRequest, "max_wait_ms %d is out of range [0, %d]", w, httpapi.MaxWait.Milliseconds())
	}
	token, err := parseToken(req.GetToken())
	if err != nil {
		return nil, err
	}
	wait := httpapi.AwaitToken(ctx, s.cfg.Reader, r.st, r.p, token, time.Duration(req.GetMaxWaitMs())*time.Millisecond)
	if r.st.Encoding == meta.EncodingArrow {
		recs, rd, err := s.arrowRecords(ctx, r.st, r.p, r.offset, r.maxBytes, wait) // arrow.go
		if err != nil {
			return nil, err
		}
		s.m.fetched.Add(float64(len(recs)))
		return &loamv1pb.FetchResponse{Records: recs, NextOffset: rd.NextOffset, HighWatermark: rd.HighWatermark, LogStart: rd.LogStart}, nil
	}
	res, err := s.cfg.Reader.Fetch(ctx, r.st.ID, r.p, r.offset, r.maxBytes, wait)
	if err != nil {
		return nil, err
	}
	out := &loamv1pb.FetchResponse{NextOffset: res.NextOffset, HighWatermark: res.HighWatermark, LogStart: res.LogStart}
	if r.raw {
		out.RecordBatches = concat(res.Batches)
		return out, nil
	}
	out.Records, err = records(r.p, r.offset, res.Batches)
	if err != nil {
		return nil, err
	}
	s.m.fetched.Add(float64(len(out.Records)))
	return out, nil
}

// Subscribe implements loamv1pb.RecordServiceServer: fetch, Send, repeat. Send blocks
// while the client's receive window is full, so one answer at most is held.
func (s *Server) Subscribe(req *loamv1pb.SubscribeRequest, ss loamv1pb.RecordService_SubscribeServer) error {
	ctx := ss.Context()
	r, err := s.checkRead(ctx, req.GetNamespace(), req.GetStream(), req.GetPartition(), req.GetOffset(), req.GetMaxBytes(), req.GetFormat())
	if err != nil {
		return err
	}
	token, err := parseToken(req.GetToken())
	if err != nil {
		return err
	}
	httpapi.AwaitToken(ctx, s.cfg.Reader, r.st, r.p, token, 0)
	s.m.subOpen.Inc()
	defer s.m.subOpen.Dec()
	offset := r.offset
	for {
		select {
		case <-s.draining:
			return &inputError{code: codes.Unavailable, reason: streamapi.CodeUnavailable,
				msg: fmt.Sprintf("the node is shutting down: subscribe again (to another node) from offset %d", offset)}
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if r.st.Encoding == meta.EncodingArrow {
			if offset, err = s.subscribeArrow(ctx, ss, r, offset); err != nil { // arrow.go
				return err
			}
			continue
		}
		res, err := s.cfg.Reader.Fetch(ctx, r.st.ID, r.p, offset, r.maxBytes, s.cfg.SubscribePoll)
		if err != nil {
			return err
		}
		if res.NextOffset <= offset {
			// The poll waited its time and nothing came: check the stream is still the
			// one subscribed to (a stream deleted through another node is known here
			// through the catalog), then poll again.
			st, err := s.cfg.Streams.Stream(ctx, req.GetNamespace(), req.GetStream())
			if err != nil {
				return err
			}
			if st.ID != r.st.ID {
				return &inputError{code: codes.NotFound, reason: streamapi.CodeStreamNotFound,
					msg: fmt.Sprintf("stream %q was deleted (and created again) while subscribed", st.Name)}
			}
			continue
		}
		msg := &loamv1pb.SubscribeResponse{NextOffset: res.NextOffset, HighWatermark: res.HighWatermark, LogStart: res.LogStart}
		size := 0
		for _, b := range res.Batches {
			size += len(b)
		}
		if r.raw {
			msg.RecordBatches = concat(res.Batches)
		} else if msg.Records, err = records(r.p, offset, res.Batches); err != nil {
			return err
		}
		s.m.subSent.Add(float64(size))
		s.m.fetched.Add(float64(len(msg.Records)))
		if err := ss.Send(msg); err != nil {
			return err
		}
		offset = res.NextOffset
	}
}

func concat(bs [][]byte) []byte {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	out := make([]byte, 0, n)
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// records decodes stored batches into answer records of partition p, leaving out those
// below from.
func records(p int32, from int64, batches [][]byte) ([]*loamv1pb.Record, error) {
	var out []*loamv1pb.Record
	for _, raw := range batches {
		b, _, err := recordbatch.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("fetch: stored batch: %w", err)
		}
		recs, err := b.Records()
		if err != nil {
			return nil, fmt.Errorf("fetch: stored batch at %d: %w", b.BaseOffset, err)
		}
		if out == nil {
			out = make([]*loamv1pb.Record, 0, len(recs))
		}
		for _, rc := range recs {
			off := b.BaseOffset + int64(rc.OffsetDelta)
			if off < from {
				continue
			}
			out = append(out, recordPB(p, off, rc))
		}
	}
	return out, nil
}

func recordPB(p int32, off int64, rc recordbatch.Record) *loamv1pb.Record {
	ts := rc.Timestamp
	r := &loamv1pb.Record{Key: rc.Key, Value: rc.Value, TimestampMs: &ts, Partition: &p, Offset: &off}
	if len(rc.Headers) > 0 {
		r.Headers = make([]*loamv1pb.Header, len(rc.Headers))
		for i, h := range rc.Headers {
			r.Headers[i] = &loamv1pb.Header{Key: h.Key, Value: h.Value}
		}
	}
	return r
}
