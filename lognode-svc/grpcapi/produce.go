package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// Produce: records (built into one RecordBatch per partition, as the HTTP JSON path does)
// or RecordBatch v2 bytes (validated as Kafka's broker does and stored as sent), with the
// HTTP API's limits. The request is checked whole before anything is written.

// part is one partition's share of a produce.
type part struct {
	partition int32
	batches   []byte
	records   int64
	maxTS     int64
}

// plan is a checked produce: its parts and where each answer entry lands.
type plan struct {
	parts []part
	// entries holds, per answer entry (record or RecordBatches entry), its part and the
	// offset delta of its first record within the part.
	entries []entry
	records int64
}

type entry struct {
	part  int
	delta int64
}

// Produce implements loamv1pb.RecordServiceServer.
func (s *Server) Produce(ctx context.Context, req *loamv1pb.ProduceRequest) (*loamv1pb.ProduceResponse, error) {
	if err := required("namespace", req.GetNamespace(), "stream", req.GetStream()); err != nil {
		return nil, err
	}
	st, err := s.cfg.Streams.Stream(ctx, req.GetNamespace(), req.GetStream())
	if err != nil {
		return nil, err
	}
	wr, ok := s.cfg.Writers[st.Class]
	if !ok {
		return nil, badInput(streamapi.CodeUnsupportedClass, "stream %q has class %q, which this node does not serve", st.Name, st.Class)
	}
	if err := s.admitIngest(ctx, st.Namespace, req); err != nil {
		return nil, err
	}
	if st.Encoding == meta.EncodingArrow {
		return s.produceArrow(ctx, req, st, wr) // arrow.go
	}
	if len(req.GetArrowIpc()) > 0 || req.ArrowPartition != nil {
		return nil, badInput(streamapi.CodeInvalidArgument, "stream %q has encoding %s: arrow_ipc is for arrow streams", st.Name, st.Encoding)
	}
	p, err := planProduce(req, st.Partitions, s.cfg.Limits, s.sticky.Add(1), s.cfg.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	reqs := make([]writer.Request, len(p.parts))
	for i, pt := range p.parts {
		reqs[i] = writer.Request{StreamID: st.ID, Partition: pt.partition, Batches: pt.batches, Records: pt.records, MaxTimestamp: pt.maxTS}
	}
	if err := withProducer(req, p, reqs); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.Limits.ProduceWait)
	defer cancel()
	res, err := wr.Write(wctx, reqs)
	partial := errors.Is(err, writer.ErrPartialCommit) && len(res) == len(reqs)
	if err != nil && !partial {
		return nil, &writeFailure{err}
	}
	// A partial commit (some partitions' chunks committed, others refused) answers each
	// entry's own outcome: a committed one its offset, a refused one its error.
	out := &loamv1pb.ProduceResponse{Offsets: make([]*loamv1pb.RecordOffset, len(p.entries)), Partial: partial}
	var token uint64
	for i, e := range p.entries {
		pt := p.parts[e.part]
		rs := res[e.part]
		if rs.Err != nil {
			a := writeOutcome(rs.Err)
			a.msg = rs.Err.Error()
			out.Offsets[i] = &loamv1pb.RecordOffset{Partition: pt.partition, Offset: -1, Error: errorOf(a)}
			continue
		}
		out.Offsets[i] = &loamv1pb.RecordOffset{Partition: pt.partition, Offset: rs.BaseOffset + e.delta}
		token = max(token, rs.Token)
	}
	for i, rs := range res {
		if rs.Err == nil && !rs.Duplicate {
			s.m.records.Add(float64(p.parts[i].records))
			s.m.bytes.Add(float64(len(p.parts[i].batches)))
		}
	}
	out.Token = httpapi.FormatToken(token)
	return out, nil
}

// planProduce checks a produce request for a stream of the given partition count and
// builds its parts. Records without a partition get one: murmur2 of the key modulo the
// partition count (Kafka's default partitioner), or sticky modulo the partition count when
// keyless. nowMs stamps records without a timestamp.
func planProduce(req *loamv1pb.ProduceRequest, partitions int32, lim Limits, sticky uint32, nowMs int64) (plan, error) {
	switch {
	case len(req.GetRecords()) > 0 && len(req.GetBatches()) > 0:
		return plan{}, badInput(streamapi.CodeInvalidRecord, "the request has both records and batches: send one kind per request")
	case len(req.GetRecords()) > 0:
		return planRecords(req.GetRecords(), partitions, lim, sticky, nowMs)
	case len(req.GetBatches()) > 0:
		return planBatches(req.GetBatches(), partitions, lim, nowMs)
	}
	return plan{}, badInput(streamapi.CodeInvalidRecord, "the request has no records and no batches")
}

// checkPartition refuses a produce to a partition the stream does not have: a mistake in
// the request (INVALID_ARGUMENT, as the HTTP API answers 400), where a fetch of one
// answers NOT_FOUND.
func checkPartition(what string, p, partitions int32) error {
	if p < 0 || p >= partitions {
		return badInput(streamapi.CodePartitionNotFound, "%s: partition %d does not exist: the stream has partitions 0..%d", what, p, partitions-1)
	}
	return nil
}

func planRecords(in []*loamv1pb.Record, partitions int32, lim Limits, sticky uint32, nowMs int64) (plan, error) {
	if len(in) > lim.MaxRecords {
		return plan{}, badInput(streamapi.CodeRequestTooLarge, "the request has %d records, more than the limit of %d", len(in), lim.MaxRecords)
	}
	var (
		p      = plan{entries: make([]entry, len(in)), records: int64(len(in))}
		at     = make(map[int32]int)
		groups [][]recordbatch.Record
	)
	for i, r := range in {
		if r.Offset != nil {
			return plan{}, badInput(streamapi.CodeInvalidRecord, "records[%d]: offset is assigned by the sequencer and cannot be produced", i)
		}
		rec := recordbatch.Record{Key: r.Key, Value: r.Value, Timestamp: nowMs}
		size := len(rec.Key) + len(rec.Value)
		if len(r.GetHeaders()) > 0 {
			rec.Headers = make([]recordbatch.Header, len(r.GetHeaders()))
			for j, h := range r.GetHeaders() {
				if h.GetKey() == "" {
					return plan{}, badInput(streamapi.CodeInvalidRecord, "records[%d].headers[%d]: the header has an empty key", i, j)
				}
				rec.Headers[j] = recordbatch.Header{Key: h.GetKey(), Value: h.Value}
				size += len(h.GetKey()) + len(h.Value)
			}
		}
		if size > lim.MaxRecordBytes {
			return plan{}, badInput(streamapi.CodeRecordTooLarge, "records[%d]: %d bytes of key, value and headers, more than the limit of %d", i, size, lim.MaxRecordBytes)
		}
		if r.TimestampMs != nil {
			if r.GetTimestampMs() < 0 {
				return plan{}, badInput(streamapi.CodeInvalidRecord, "records[%d]: timestamp_ms %d is negative", i, r.GetTimestampMs())
			}
			rec.Timestamp = r.GetTimestampMs()
		}
		var pn int32
		switch {
		case r.Partition != nil:
			pn = r.GetPartition()
			if err := checkPartition(fmt.Sprintf("records[%d]", i), pn, partitions); err != nil {
				return plan{}, err
			}
		case rec.Key != nil:
			pn = httpapi.KeyPartition(rec.Key, partitions)
		default:
			pn = int32(sticky % uint32(partitions)) // unsigned: the counter wraps without going negative
		}
		g, seen := at[pn]
		if !seen {
			g = len(groups)
			at[pn] = g
			groups = append(groups, nil)
			p.parts = append(p.parts, part{partition: pn})
		}
		rec.OffsetDelta = int32(len(groups[g]))
		p.entries[i] = entry{part: g, delta: int64(len(groups[g]))}
		groups[g] = append(groups[g], rec)
		p.parts[g].maxTS = max(p.parts[g].maxTS, rec.Timestamp)
	}
	for g, recs := range groups {
		b, err := recordbatch.Append(nil, recs, recordbatch.DefaultBuildOptions())
		if err != nil {
			return plan{}, badInput(streamapi.CodeInvalidRecord, "partition %d: %v", p.parts[g].partition, err)
		}
		p.parts[g].batches = b
		p.parts[g].records = int64(len(recs))
	}
	return p, nil
}

func planBatches(in []*loamv1pb.RecordBatches, partitions int32, lim Limits, nowMs int64) (plan, error) {
	p := plan{entries: make([]entry, len(in))}
	at := make(map[int32]int)
	for i, rb := range in {
		if err := checkPartition(fmt.Sprintf("batches[%d]", i), rb.GetPartition(), partitions); err != nil {
			return plan{}, err
		}
		bs, err := recordbatch.Validate(rb.GetBatches())
		if err != nil {
			return plan{}, badInput(streamapi.CodeInvalidRecord, "batches[%d]: %v", i, err)
		}
		var records, maxTS int64
		for j, b := range bs {
			switch {
			case len(b.Raw) > lim.MaxRecordBytes:
				return plan{}, badInput(streamapi.CodeRecordTooLarge, "batches[%d]: batch %d is %d bytes, more than the limit of %d", i, j, len(b.Raw), lim.MaxRecordBytes)
			case b.Control():
				return plan{}, badInput(streamapi.CodeInvalidRecord, "batches[%d]: batch %d is a control batch: only data batches can be produced", i, j)
			case b.Transactional():
				return plan{}, badInput(streamapi.CodeInvalidRecord, "batches[%d]: batch %d is transactional: transactions are not served", i, j)
			}
			records += b.OffsetCount()
			maxTS = max(maxTS, b.MaxTimestamp)
		}
		if p.records += records; p.records > int64(lim.MaxRecords) {
			return plan{}, badInput(streamapi.CodeRequestTooLarge, "the request has more than the limit of %d records", lim.MaxRecords)
		}
		if maxTS <= 0 {
			maxTS = nowMs // the batch carries no timestamps: retention counts from now
		}
		g, seen := at[rb.GetPartition()]
		if !seen {
			g = len(p.parts)
			at[rb.GetPartition()] = g
			p.parts = append(p.parts, part{partition: rb.GetPartition()})
		}
		pt := &p.parts[g]
		p.entries[i] = entry{part: g, delta: pt.records}
		if pt.batches == nil {
			pt.batches = rb.GetBatches() // the request's own bytes: stored as sent
		} else {
			pt.batches = slices.Concat(pt.batches, rb.GetBatches())
		}
		pt.records += records
		pt.maxTS = max(pt.maxTS, maxTS)
	}
	return p, nil
}
