package streamapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// GRPCClient is the Go client of the native gRPC API (loam.v1, docs/grpc-api.md), the
// counterpart of Client over HTTP: the same methods, types and errors. Records travel as
// RecordBatch v2 bytes both ways (Produce sends one RecordBatches entry per partition;
// Fetch and Subscribe ask for FETCH_FORMAT_RECORD_BATCHES and decode them here). Failures
// are *APIError as over HTTP: Detail.Code is the status's ErrorInfo reason, Status the
// HTTP status the HTTP API answers for it, Retriable what the server said; a call that got
// no answer wraps ErrNetwork. Safe for concurrent use.
type GRPCClient struct {
	conn      *grpc.ClientConn // nil when built on a caller's connection
	streams   loamv1pb.StreamServiceClient
	records   loamv1pb.RecordServiceClient
	producers loamv1pb.ProducerServiceClient
	nskeys    loamv1pb.NamespaceKeyServiceClient // nskey_grpc.go
	codec     recordbatch.Compression
	parts     partitionCache
	sticky    atomic.Uint32
	now       func() time.Time
}

// GRPCOption configures a GRPCClient.
type GRPCOption func(*GRPCClient)

// WithGRPCCompression compresses produced batches with codec (default none).
func WithGRPCCompression(codec recordbatch.Compression) GRPCOption {
	return func(c *GRPCClient) { c.codec = codec }
}

// maxGRPCMessage is the receive limit the client dials with: a 64 MiB fetch answer fits.
const maxGRPCMessage = 64<<20 + 1<<20

// DialGRPC connects to a log node's gRPC address (host:port). Without dial options the
// connection is plaintext (loam dev); opts replace that default and are passed to
// grpc.NewClient. Close releases the connection.
func DialGRPC(addr string, opts []grpc.DialOption, copts ...GRPCOption) (*GRPCClient, error) {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	opts = append([]grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxGRPCMessage))}, opts...)
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("streamapi: dial %s: %w", addr, err)
	}
	c := NewGRPCClient(conn, copts...)
	c.conn = conn
	return c, nil
}

// NewGRPCClient is a client on a connection the caller owns (Close leaves it open).
func NewGRPCClient(conn grpc.ClientConnInterface, opts ...GRPCOption) *GRPCClient {
	c := &GRPCClient{streams: loamv1pb.NewStreamServiceClient(conn), records: loamv1pb.NewRecordServiceClient(conn),
		producers: loamv1pb.NewProducerServiceClient(conn), nskeys: loamv1pb.NewNamespaceKeyServiceClient(conn), now: time.Now}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Close closes the connection DialGRPC opened.
func (c *GRPCClient) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// grpcError turns a failed call's error into the client's errors: *APIError for a status
// the server answered (ErrorInfo present), ErrNetwork for a call that got no answer, the
// context's error when the caller's context ended.
func grpcError(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("streamapi: %s: %w", op, ctx.Err())
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("streamapi: %s: %w: %v", op, ErrNetwork, err)
	}
	ae := &APIError{Status: httpStatusOf(st.Code()), Detail: ErrorDetail{Message: st.Message()}}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			info = ei
		}
	}
	if info == nil {
		// No ErrorInfo: gRPC's own status (the connection, a message over the limit).
		if st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded {
			return fmt.Errorf("streamapi: %s: %w: %s", op, ErrNetwork, st.Message())
		}
		ae.Detail.Code = CodeBadRequest
		if st.Code() == codes.ResourceExhausted {
			ae.Detail.Code = CodeRequestTooLarge
		}
		return ae
	}
	ae.Detail.Code = info.GetReason()
	ae.Detail.Retriable = info.GetMetadata()["retriable"] == "true"
	if v, err := strconv.ParseInt(info.GetMetadata()["log_start"], 10, 64); err == nil {
		ae.Detail.LogStart = &v
	}
	if v, err := strconv.ParseInt(info.GetMetadata()["high_watermark"], 10, 64); err == nil {
		ae.Detail.HighWater = &v
	}
	return ae
}

// httpStatusOf is the HTTP status the HTTP API answers for what a gRPC code says.
func httpStatusOf(c codes.Code) int {
	switch c {
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.FailedPrecondition, codes.Aborted:
		return http.StatusConflict
	case codes.OutOfRange:
		return http.StatusRequestedRangeNotSatisfiable
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

func streamOf(s *loamv1pb.Stream) Stream {
	out := Stream{Namespace: s.GetNamespace(), Name: s.GetName(), ID: s.GetId(), Partitions: s.GetPartitions(), Class: s.GetClass(),
		Encoding: s.GetEncoding(), RetentionMs: s.GetRetentionMs(), RetentionBytes: s.GetRetentionBytes(), CleanupPolicy: s.GetCleanupPolicy(),
		KeyAttribute: s.GetKeyAttribute(), LeaderZone: s.GetLeaderZone(), CreatedAtMs: s.GetCreatedAtMs()}
	for _, pi := range s.GetPartitionInfo() {
		out.PartitionInfo = append(out.PartitionInfo, PartitionInfo{Partition: pi.GetPartition(), LogStart: pi.GetLogStart(), HighWatermark: pi.GetHighWatermark()})
	}
	return out
}

// CreateStream creates a stream (StreamService.CreateStream).
func (c *GRPCClient) CreateStream(ctx context.Context, ns string, req CreateStreamRequest) (Stream, error) {
	res, err := c.streams.CreateStream(ctx, &loamv1pb.CreateStreamRequest{Namespace: ns, Name: req.Name, Partitions: req.Partitions,
		Class: req.Class, Encoding: req.Encoding, RetentionMs: req.RetentionMs, RetentionBytes: req.RetentionBytes, CleanupPolicy: req.CleanupPolicy,
		KeyAttribute: req.KeyAttribute, LeaderZone: req.LeaderZone})
	if err != nil {
		return Stream{}, grpcError(ctx, "create stream "+ns+"/"+req.Name, err)
	}
	return streamOf(res.GetStream()), nil
}

// ListStreams lists a namespace's streams.
func (c *GRPCClient) ListStreams(ctx context.Context, ns string) ([]Stream, error) {
	res, err := c.streams.ListStreams(ctx, &loamv1pb.ListStreamsRequest{Namespace: ns})
	if err != nil {
		return nil, grpcError(ctx, "list streams "+ns, err)
	}
	out := make([]Stream, len(res.GetStreams()))
	for i, s := range res.GetStreams() {
		out[i] = streamOf(s)
	}
	return out, nil
}

// GetStream describes a stream, with its partitions' offsets.
func (c *GRPCClient) GetStream(ctx context.Context, ns, stream string) (Stream, error) {
	res, err := c.streams.GetStream(ctx, &loamv1pb.GetStreamRequest{Namespace: ns, Name: stream})
	if err != nil {
		return Stream{}, grpcError(ctx, "get stream "+ns+"/"+stream, err)
	}
	return streamOf(res.GetStream()), nil
}

// PatchStream changes a stream's settings (StreamService.UpdateStream).
func (c *GRPCClient) PatchStream(ctx context.Context, ns, stream string, req PatchStreamRequest) (Stream, error) {
	res, err := c.streams.UpdateStream(ctx, &loamv1pb.UpdateStreamRequest{Namespace: ns, Name: stream, Partitions: req.Partitions,
		RetentionMs: req.RetentionMs, RetentionBytes: req.RetentionBytes, CleanupPolicy: req.CleanupPolicy, KeyAttribute: req.KeyAttribute,
		LeaderZone: req.LeaderZone})
	if err != nil {
		return Stream{}, grpcError(ctx, "update stream "+ns+"/"+stream, err)
	}
	c.forget(ns, stream)
	return streamOf(res.GetStream()), nil
}

// DeleteStream deletes a stream.
func (c *GRPCClient) DeleteStream(ctx context.Context, ns, stream string) error {
	_, err := c.streams.DeleteStream(ctx, &loamv1pb.DeleteStreamRequest{Namespace: ns, Name: stream})
	c.forget(ns, stream)
	return grpcError(ctx, "delete stream "+ns+"/"+stream, err)
}

// Partitions is the partition count of ns/stream, cached for PartitionCacheTTL.
func (c *GRPCClient) Partitions(ctx context.Context, ns, stream string) (int32, error) {
	k := ns + "/" + stream
	now := c.now()
	c.parts.mu.Lock()
	e, ok := c.parts.m[k]
	c.parts.mu.Unlock()
	if ok && now.Sub(e.at) < PartitionCacheTTL {
		return e.n, nil
	}
	st, err := c.GetStream(ctx, ns, stream)
	if err != nil {
		return 0, err
	}
	if st.Partitions < 1 {
		return 0, fmt.Errorf("streamapi: %s: %w: stream has %d partitions", k, ErrBadResponse, st.Partitions)
	}
	c.parts.mu.Lock()
	if c.parts.m == nil || len(c.parts.m) >= maxCachedStreams {
		c.parts.m = make(map[string]cachedCount)
	}
	c.parts.m[k] = cachedCount{n: st.Partitions, at: now}
	c.parts.mu.Unlock()
	return st.Partitions, nil
}

func (c *GRPCClient) forget(ns, stream string) {
	c.parts.mu.Lock()
	delete(c.parts.m, ns+"/"+stream)
	c.parts.mu.Unlock()
}

// Produce appends records and answers each one's partition and offset in request order,
// once committed. A record without Partition goes to murmur2 of its key modulo the
// partition count (learnt with GetStream, cached), or, keyless, with the call's other
// keyless records to one partition picked round-robin. The records of each partition
// travel as one RecordBatch v2 batch, all in one call. When some partitions commit and
// others are refused, the answer carries each record's outcome and the error wraps
// ErrPartialCommit.
func (c *GRPCClient) Produce(ctx context.Context, ns, stream string, records []Record) (ProduceResponse, error) {
	var res ProduceResponse
	fail := func(err error) (ProduceResponse, error) {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w", ns, stream, err)
	}
	if err := checkNames("produce", ns, stream); err != nil {
		return res, err
	}
	if len(records) == 0 {
		return fail(fmt.Errorf("%w: no records", ErrInvalidArgument))
	}
	var (
		groups []produceGroup
		at     = map[int32]int{}
		n      int32
		nowMs  = c.now().UnixMilli()
		rs     = make([]recordbatch.Record, len(records))
		rr     = int32(-1)
	)
	for i, r := range records {
		if r.Offset != nil {
			return fail(fmt.Errorf("record %d: an offset is assigned by the log and cannot be produced: %w", i, ErrInvalidRecord))
		}
		if (r.Value != nil && r.ValueBase64 != nil) || (r.Key != nil && r.KeyBase64 != nil) {
			return fail(fmt.Errorf("record %d: both text and base64 forms: %w", i, ErrInvalidRecord))
		}
		br, err := batchRecord(r, nowMs)
		if err != nil {
			return fail(fmt.Errorf("record %d: %w", i, err))
		}
		rs[i] = br
		var p int32
		switch {
		case r.Partition != nil:
			if p = *r.Partition; p < 0 {
				return fail(fmt.Errorf("record %d: partition %d: %w", i, p, ErrInvalidArgument))
			}
		default:
			if n == 0 {
				if n, err = c.Partitions(ctx, ns, stream); err != nil {
					return res, err
				}
			}
			if k, _ := r.KeyBytes(); k != nil {
				p = KeyPartition(k, n)
			} else {
				if rr < 0 {
					rr = int32(c.sticky.Add(1) % uint32(n))
				}
				p = rr
			}
		}
		g, ok := at[p]
		if !ok {
			g = len(groups)
			at[p] = g
			groups = append(groups, produceGroup{partition: p})
		}
		groups[g].index = append(groups[g].index, i)
	}
	opt := recordbatch.DefaultBuildOptions()
	opt.Compression = c.codec
	req := &loamv1pb.ProduceRequest{Namespace: ns, Stream: stream, Batches: make([]*loamv1pb.RecordBatches, len(groups))}
	for gi, g := range groups {
		sub := make([]recordbatch.Record, len(g.index))
		for j, i := range g.index {
			sub[j] = rs[i]
		}
		b, err := recordbatch.Append(nil, sub, opt)
		if err != nil {
			return fail(fmt.Errorf("build the batch of partition %d: %w", g.partition, err))
		}
		req.Batches[gi] = &loamv1pb.RecordBatches{Partition: g.partition, Batches: b}
	}
	out, err := c.records.Produce(ctx, req)
	if err != nil {
		if ErrorCode(grpcError(ctx, "", err)) == CodePartitionNotFound {
			c.forget(ns, stream)
		}
		return res, grpcError(ctx, "produce "+ns+"/"+stream, err)
	}
	if len(out.GetOffsets()) != len(groups) {
		return fail(fmt.Errorf("%w: %d offsets for %d batches", ErrBadResponse, len(out.GetOffsets()), len(groups)))
	}
	res.Token = out.GetToken()
	res.Offsets = make([]RecordOffset, len(records))
	refused := 0
	for gi, g := range groups {
		o := out.GetOffsets()[gi]
		for j, i := range g.index {
			if e := o.GetError(); e != nil {
				res.Offsets[i] = RecordOffset{Partition: o.GetPartition(), Offset: -1, Error: &ErrorDetail{Code: e.GetCode(), Message: e.GetMessage(), Retriable: e.GetRetriable()}}
				refused++
				continue
			}
			res.Offsets[i] = RecordOffset{Partition: o.GetPartition(), Offset: o.GetOffset() + int64(j)}
		}
	}
	if refused > 0 {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w (%d of %d records refused)", ns, stream, ErrPartialCommit, refused, len(records))
	}
	return res, nil
}

// ProduceBatches appends RecordBatch v2 bytes (one or more whole batches) to one
// partition, as sent; the answer has one offset per batch. Batches carrying a producer in
// their headers make it an idempotent produce (IdempotentProducer sends these).
func (c *GRPCClient) ProduceBatches(ctx context.Context, ns, stream string, partition int32, batches []byte) (ProduceResponse, error) {
	var res ProduceResponse
	if err := checkNames("produce", ns, stream); err != nil {
		return res, err
	}
	out, err := c.records.Produce(ctx, &loamv1pb.ProduceRequest{Namespace: ns, Stream: stream,
		Batches: []*loamv1pb.RecordBatches{{Partition: partition, Batches: batches}}})
	if err != nil {
		return res, grpcError(ctx, "produce "+ns+"/"+stream, err)
	}
	if len(out.GetOffsets()) != 1 || out.GetOffsets()[0].GetError() != nil {
		return res, fmt.Errorf("streamapi: produce %s/%s: %w: %d offsets for one batches entry", ns, stream, ErrBadResponse, len(out.GetOffsets()))
	}
	res.Token = out.GetToken()
	// One offset per batch of the body, as the HTTP binary path answers.
	off := out.GetOffsets()[0].GetOffset()
	for rest := batches; len(rest) > 0; {
		b, tail, err := recordbatch.Parse(rest)
		if err != nil {
			return res, fmt.Errorf("streamapi: produce %s/%s: %w", ns, stream, err)
		}
		res.Offsets = append(res.Offsets, RecordOffset{Partition: partition, Offset: off})
		off += b.OffsetCount()
		rest = tail
	}
	return res, nil
}

// Fetch reads records of one partition from offset on, as Client.Fetch does: maxBytes <= 0
// leaves the size to the server; maxWait is the long-poll (0: answer at once; < 0: the
// server's default of 0).
func (c *GRPCClient) Fetch(ctx context.Context, ns, stream string, partition int32, offset int64, maxBytes int32, maxWait time.Duration) (FetchResponse, error) {
	var res FetchResponse
	if err := checkNames("fetch", ns, stream); err != nil {
		return res, err
	}
	if partition < 0 || offset < 0 {
		return res, fmt.Errorf("streamapi: fetch %s/%s/%d@%d: %w: negative partition or offset", ns, stream, partition, offset, ErrInvalidArgument)
	}
	out, err := c.records.Fetch(ctx, &loamv1pb.FetchRequest{Namespace: ns, Stream: stream, Partition: partition, Offset: offset,
		MaxBytes: max(maxBytes, 0), MaxWaitMs: max(maxWait.Milliseconds(), 0), Format: loamv1pb.FetchFormat_FETCH_FORMAT_RECORD_BATCHES})
	if err != nil {
		return res, grpcError(ctx, fmt.Sprintf("fetch %s/%s/%d@%d", ns, stream, partition, offset), err)
	}
	return fetched(out.GetRecordBatches(), partition, offset, out.GetNextOffset(), out.GetHighWatermark(), out.GetLogStart())
}

func fetched(batches []byte, partition int32, from, next, hw, logStart int64) (FetchResponse, error) {
	recs, err := DecodeBatches(batches, from)
	if err != nil {
		return FetchResponse{}, fmt.Errorf("streamapi: fetch: %w: %v", ErrBadResponse, err)
	}
	for i := range recs {
		p := partition
		recs[i].Partition = &p
	}
	return FetchResponse{Records: recs, NextOffset: next, HighWatermark: hw, LogStart: logStart}, nil
}

// Subscribe reads one partition from offset on and keeps reading as records are committed
// (RecordService.Subscribe), calling fn with each message's records in order, until fn
// returns an error (returned), ctx ends (its error) or the stream breaks (the error; resume
// from the last message's NextOffset). maxBytes <= 0 leaves the message size to the server.
func (c *GRPCClient) Subscribe(ctx context.Context, ns, stream string, partition int32, offset int64, maxBytes int32, fn func(FetchResponse) error) error {
	if err := checkNames("subscribe", ns, stream); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	op := fmt.Sprintf("subscribe %s/%s/%d", ns, stream, partition)
	sub, err := c.records.Subscribe(ctx, &loamv1pb.SubscribeRequest{Namespace: ns, Stream: stream, Partition: partition, Offset: offset,
		MaxBytes: max(maxBytes, 0), Format: loamv1pb.FetchFormat_FETCH_FORMAT_RECORD_BATCHES})
	if err != nil {
		return grpcError(ctx, op, err)
	}
	from := offset
	for {
		m, err := sub.Recv()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("streamapi: %s: %w: the server ended the subscription", op, ErrNetwork)
		}
		if err != nil {
			return grpcError(ctx, op, err)
		}
		res, err := fetched(m.GetRecordBatches(), partition, from, m.GetNextOffset(), m.GetHighWatermark(), m.GetLogStart())
		if err != nil {
			return err
		}
		from = m.GetNextOffset()
		if err := fn(res); err != nil {
			return err
		}
	}
}

// InitProducer allocates or bumps a producer (ProducerService.InitProducer).
func (c *GRPCClient) InitProducer(ctx context.Context, ns string, req InitProducerRequest) (ProducerID, error) {
	out, err := c.producers.InitProducer(ctx, &loamv1pb.InitProducerRequest{Namespace: ns, Name: req.Name, ProducerId: req.ProducerID, Epoch: req.Epoch})
	if err != nil {
		return ProducerID{}, grpcError(ctx, "init producer", err)
	}
	return ProducerID{ProducerID: out.GetProducerId(), Epoch: int16(out.GetEpoch())}, nil
}
