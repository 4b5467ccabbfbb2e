package grpcapi

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// StreamService: the HTTP API's stream routes over gRPC, with the same defaults and
// checks (httpapi's createStream and patchStream).

// CreateStream implements loamv1pb.StreamServiceServer.
func (s *Server) CreateStream(ctx context.Context, req *loamv1pb.CreateStreamRequest) (*loamv1pb.CreateStreamResponse, error) {
	if err := required("namespace", req.GetNamespace(), "name", req.GetName()); err != nil {
		return nil, err
	}
	cfg := meta.StreamConfig{Namespace: req.GetNamespace(), Name: req.GetName(), Partitions: 1, Class: meta.ClassStandard,
		Encoding: meta.EncodingKafka, RetentionMs: 7 * 24 * time.Hour.Milliseconds(), RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete}
	if req.Partitions != nil {
		cfg.Partitions = req.GetPartitions()
	}
	if req.GetClass() != "" {
		cfg.Class = req.GetClass()
	}
	if _, ok := s.cfg.Writers[cfg.Class]; !ok {
		switch cfg.Class {
		case meta.ClassExpress, meta.ClassQuorum:
			return nil, badInput(streamapi.CodeUnsupportedClass, "class %q is not served by this deployment yet: use \"standard\"", cfg.Class)
		}
		return nil, badInput(streamapi.CodeInvalidArgument, "class %q is not one of standard, express, quorum", cfg.Class)
	}
	if e := req.GetEncoding(); e != "" {
		if e != meta.EncodingKafka && e != meta.EncodingArrow {
			return nil, badInput(streamapi.CodeInvalidArgument, "encoding %q is not one of kafka, arrow", e)
		}
		cfg.Encoding = e
	}
	if cfg.Encoding != meta.EncodingArrow && (req.GetSchema() != "" || len(req.GetArrowSchema()) > 0) {
		return nil, badInput(streamapi.CodeInvalidArgument, "schema and arrow_schema are for encoding \"arrow\" (encoding is %q)", cfg.Encoding)
	}
	if err := checkRetention(req.RetentionMs, req.RetentionBytes); err != nil {
		return nil, err
	}
	if req.RetentionMs != nil {
		cfg.RetentionMs = req.GetRetentionMs()
	}
	if req.RetentionBytes != nil {
		cfg.RetentionBytes = req.GetRetentionBytes()
	}
	if p := req.GetCleanupPolicy(); p != "" {
		cfg.CleanupPolicy = p
	}
	if err := checkKeyAttribute(req.GetKeyAttribute()); err != nil {
		return nil, err
	}
	cfg.KeyAttribute = req.GetKeyAttribute()
	if err := checkLeaderZone(cfg.Class, req.GetLeaderZone()); err != nil {
		return nil, err
	}
	cfg.LeaderZone = req.GetLeaderZone()
	var st meta.Stream
	var err error
	if cfg.Encoding == meta.EncodingArrow {
		st, err = s.createArrowStream(ctx, cfg, req) // arrow_admin.go
	} else {
		st, err = s.cfg.Meta.CreateStream(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	s.cfg.Streams.StreamsChanged()
	return &loamv1pb.CreateStreamResponse{Stream: streamPB(st, nil)}, nil
}

// checkRetention refuses retention settings that are neither -1 (unbounded) nor positive.
func checkRetention(ms, bytes *int64) error {
	if ms != nil && *ms != -1 && *ms <= 0 {
		return badInput(streamapi.CodeInvalidArgument, "retention_ms %d: want -1 (forever) or a positive number of milliseconds", *ms)
	}
	if bytes != nil && *bytes != -1 && *bytes <= 0 {
		return badInput(streamapi.CodeInvalidArgument, "retention_bytes %d: want -1 (unbounded) or a positive number of bytes", *bytes)
	}
	return nil
}

// checkKeyAttribute refuses a key attribute longer than meta.MaxKeyAttributeLength bytes
// or not valid UTF-8; "" (keyless) passes.
func checkKeyAttribute(a string) error {
	if !meta.ValidKeyAttribute(a) {
		return badInput(streamapi.CodeInvalidArgument, "key_attribute of %d bytes: want empty (keyless) or 1..%d bytes of valid UTF-8",
			len(a), meta.MaxKeyAttributeLength)
	}
	return nil
}

// checkLeaderZone refuses a leader zone hint meta.CheckLeaderZone refuses (on a stream
// that is not of class quorum, or not 1..64 bytes of printable ASCII); "" passes.
func checkLeaderZone(class, zone string) error {
	if err := meta.CheckLeaderZone(class, zone); err != nil {
		return badInput(streamapi.CodeInvalidArgument, "%s", strings.TrimPrefix(err.Error(), meta.ErrInvalidArgument.Error()+": "))
	}
	return nil
}

// required refuses empty fields, given as name, value pairs.
func required(kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			return badInput(streamapi.CodeInvalidArgument, "%s is required", kv[i])
		}
	}
	return nil
}

// ListStreams implements loamv1pb.StreamServiceServer.
func (s *Server) ListStreams(ctx context.Context, req *loamv1pb.ListStreamsRequest) (*loamv1pb.ListStreamsResponse, error) {
	if err := required("namespace", req.GetNamespace()); err != nil {
		return nil, err
	}
	list, err := s.cfg.Meta.ListStreams(ctx, req.GetNamespace())
	if err != nil {
		return nil, err
	}
	out := &loamv1pb.ListStreamsResponse{Streams: make([]*loamv1pb.Stream, 0, len(list))}
	for _, st := range list {
		out.Streams = append(out.Streams, streamPB(st, nil))
	}
	return out, nil
}

// GetStream implements loamv1pb.StreamServiceServer.
func (s *Server) GetStream(ctx context.Context, req *loamv1pb.GetStreamRequest) (*loamv1pb.GetStreamResponse, error) {
	if err := required("namespace", req.GetNamespace(), "name", req.GetName()); err != nil {
		return nil, err
	}
	st, parts, err := s.cfg.Meta.GetStream(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &loamv1pb.GetStreamResponse{Stream: streamPB(st, parts)}, nil
}

// UpdateStream implements loamv1pb.StreamServiceServer.
func (s *Server) UpdateStream(ctx context.Context, req *loamv1pb.UpdateStreamRequest) (*loamv1pb.UpdateStreamResponse, error) {
	if err := required("namespace", req.GetNamespace(), "name", req.GetName()); err != nil {
		return nil, err
	}
	if err := checkRetention(req.RetentionMs, req.RetentionBytes); err != nil {
		return nil, err
	}
	if req.KeyAttribute != nil {
		if err := checkKeyAttribute(req.GetKeyAttribute()); err != nil {
			return nil, err
		}
	}
	if req.LeaderZone != nil {
		if err := checkLeaderZone(meta.ClassQuorum, req.GetLeaderZone()); err != nil { // its form; the sequencer checks the class
			return nil, err
		}
	}
	st, err := s.cfg.Meta.UpdateStream(ctx, req.GetNamespace(), req.GetName(), meta.StreamPatch{
		Partitions: req.Partitions, RetentionMs: req.RetentionMs, RetentionBytes: req.RetentionBytes, CleanupPolicy: req.CleanupPolicy,
		KeyAttribute: req.KeyAttribute, LeaderZone: req.LeaderZone})
	if err != nil {
		return nil, err
	}
	s.cfg.Streams.StreamsChanged()
	return &loamv1pb.UpdateStreamResponse{Stream: streamPB(st, nil)}, nil
}

// DeleteStream implements loamv1pb.StreamServiceServer.
func (s *Server) DeleteStream(ctx context.Context, req *loamv1pb.DeleteStreamRequest) (*loamv1pb.DeleteStreamResponse, error) {
	if err := required("namespace", req.GetNamespace(), "name", req.GetName()); err != nil {
		return nil, err
	}
	st, err := s.cfg.Streams.Stream(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Meta.DeleteStream(ctx, req.GetNamespace(), req.GetName()); err != nil {
		return nil, err
	}
	s.cfg.Streams.StreamsChanged()
	s.cfg.Reader.Forget(st.ID)
	return &loamv1pb.DeleteStreamResponse{}, nil
}

// ListNamespaces implements loamv1pb.StreamServiceServer.
func (s *Server) ListNamespaces(ctx context.Context, _ *loamv1pb.ListNamespacesRequest) (*loamv1pb.ListNamespacesResponse, error) {
	ns, err := s.cfg.Meta.ListNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(ns)
	return &loamv1pb.ListNamespacesResponse{Namespaces: ns}, nil
}

func streamPB(st meta.Stream, parts []meta.PartitionState) *loamv1pb.Stream {
	out := &loamv1pb.Stream{Namespace: st.Namespace, Name: st.Name, Id: st.ID, Partitions: st.Partitions, Class: st.Class,
		Encoding: st.Encoding, RetentionMs: st.RetentionMs, RetentionBytes: st.RetentionBytes, CleanupPolicy: st.CleanupPolicy,
		KeyAttribute: st.KeyAttribute, LeaderZone: st.LeaderZone, CreatedAtMs: st.CreatedAtMs}
	for _, p := range parts {
		out.PartitionInfo = append(out.PartitionInfo, &loamv1pb.PartitionInfo{Partition: p.Partition, LogStart: p.LogStart, HighWatermark: p.HighWatermark})
	}
	return out
}
