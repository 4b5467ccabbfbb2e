package grpcapi

// Idempotent producers over gRPC: ProducerService.InitProducer, and Produce with a Producer
// (records) or with batches whose headers carry one. Both commit as one writer request per
// partition carrying the producer, which the sequencer checks: a retry is answered with the
// first attempt's offsets, an out-of-order sequence, a fenced epoch or an unknown producer
// answers FAILED_PRECONDITION naming it, and nothing of that partition is written.

import (
	"context"
	"errors"
	"math"

	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// InitProducer implements loamv1pb.ProducerServiceServer.
func (s *Server) InitProducer(ctx context.Context, req *loamv1pb.InitProducerRequest) (*loamv1pb.InitProducerResponse, error) {
	if err := required("namespace", req.GetNamespace()); err != nil {
		return nil, err
	}
	id, epoch := int64(meta.NoProducer), int16(-1)
	switch {
	case req.ProducerId != nil && req.Epoch == nil:
		return nil, badInput(streamapi.CodeInvalidArgument, "producer_id needs its epoch")
	case req.ProducerId == nil && req.Epoch != nil:
		return nil, badInput(streamapi.CodeInvalidArgument, "epoch needs its producer_id")
	case req.ProducerId != nil:
		if req.GetProducerId() <= 0 {
			return nil, badInput(streamapi.CodeInvalidArgument, "producer_id %d: want a producer id above 0", req.GetProducerId())
		}
		if req.GetEpoch() < 0 || req.GetEpoch() > math.MaxInt16 {
			return nil, badInput(streamapi.CodeInvalidArgument, "epoch %d: want 0..%d", req.GetEpoch(), math.MaxInt16)
		}
		id, epoch = req.GetProducerId(), int16(req.GetEpoch())
	}
	if len(req.GetName()) > meta.MaxNameLength {
		return nil, badInput(streamapi.CodeInvalidArgument, "name of %d bytes: want at most %d", len(req.GetName()), meta.MaxNameLength)
	}
	p, err := s.cfg.Meta.InitProducer(ctx, req.GetNamespace(), req.GetName(), id, epoch)
	if err != nil {
		return nil, err
	}
	return &loamv1pb.InitProducerResponse{ProducerId: p.ID, Epoch: int32(p.Epoch)}, nil
}

// withProducer sets the producer of each writer request of a checked produce: the request's
// Producer for records (its batch header rewritten to carry it), or what the batches'
// headers carry. reqs are p.parts' requests, in order.
func withProducer(req *loamv1pb.ProduceRequest, p plan, reqs []writer.Request) error {
	if pr := req.GetProducer(); pr != nil {
		if len(req.GetBatches()) > 0 {
			return badInput(streamapi.CodeInvalidArgument, "producer is for records: batches carry their producer in their headers")
		}
		return recordsProducer(req, pr, p, reqs)
	}
	for i := range reqs {
		var pc streamapi.ProducerCheck
		for rest := reqs[i].Batches; len(rest) > 0; {
			b, tail, err := recordbatch.Parse(rest)
			if err != nil {
				return badInput(streamapi.CodeInvalidRecord, "partition %d: %v", reqs[i].Partition, err) // checked before: not reached
			}
			if err := pc.Add(&b); err != nil {
				return badInput(streamapi.CodeInvalidRecord, "partition %d: batch at byte %d: %v", reqs[i].Partition, len(reqs[i].Batches)-len(rest), err)
			}
			rest = tail
		}
		if bp := pc.Producer(); bp.Has() {
			reqs[i].Producer = meta.ChunkProducer{ID: bp.ID, Epoch: bp.Epoch, BaseSequence: bp.BaseSequence}
		}
	}
	return nil
}

func recordsProducer(req *loamv1pb.ProduceRequest, pr *loamv1pb.Producer, p plan, reqs []writer.Request) error {
	switch {
	case pr.GetProducerId() <= 0:
		return badInput(streamapi.CodeInvalidArgument, "producer.producer_id %d: want a producer id above 0 (InitProducer allocates one)", pr.GetProducerId())
	case pr.GetEpoch() < 0 || pr.GetEpoch() > math.MaxInt16:
		return badInput(streamapi.CodeInvalidArgument, "producer.epoch %d: want 0..%d", pr.GetEpoch(), math.MaxInt16)
	case len(pr.GetSequences()) == 0:
		return badInput(streamapi.CodeInvalidArgument, "producer needs sequences: the base sequence of each partition the records go to")
	}
	for i, r := range req.GetRecords() {
		if r.Partition == nil {
			return badInput(streamapi.CodeInvalidArgument, "records[%d]: an idempotent produce names each record's partition, so a retry lands where the first attempt did", i)
		}
	}
	for q, seq := range pr.GetSequences() {
		if seq < 0 {
			return badInput(streamapi.CodeInvalidArgument, "producer.sequences: partition %d: base sequence %d is negative", q, seq)
		}
	}
	if len(pr.GetSequences()) != len(reqs) {
		for q := range pr.GetSequences() {
			found := false
			for _, pt := range p.parts {
				found = found || pt.partition == q
			}
			if !found {
				return badInput(streamapi.CodeInvalidArgument, "producer.sequences names partition %d, which no record goes to", q)
			}
		}
	}
	for i := range reqs {
		seq, ok := pr.GetSequences()[reqs[i].Partition]
		if !ok {
			return badInput(streamapi.CodeInvalidArgument, "producer.sequences has no base sequence for partition %d, which records go to", reqs[i].Partition)
		}
		reqs[i].Producer = meta.ChunkProducer{ID: pr.GetProducerId(), Epoch: int16(pr.GetEpoch()), BaseSequence: seq}
		if err := setBatchProducer(reqs[i].Batches, reqs[i].Producer); err != nil {
			return err
		}
	}
	return nil
}

// setBatchProducer writes the producer into the header of the one batch in b.
func setBatchProducer(b []byte, p meta.ChunkProducer) error {
	return recordbatch.SetProducer(b, p.ID, p.Epoch, p.BaseSequence)
}

// producerRefusal maps the sequencer's refusals of an idempotent produce: definite, so
// may_have_happened=false, and not retriable as sent.
func producerRefusal(err error) (answer, bool) {
	var reason string
	switch {
	case errors.Is(err, meta.ErrOutOfOrderSequence):
		reason = streamapi.CodeOutOfOrderSequence
	case errors.Is(err, meta.ErrProducerFenced):
		reason = streamapi.CodeProducerFenced
	case errors.Is(err, meta.ErrUnknownProducer):
		reason = streamapi.CodeUnknownProducer
	case errors.Is(err, writer.ErrInvalidRequest):
		return answer{code: codes.InvalidArgument, reason: streamapi.CodeInvalidArgument, mayHaveHappened: no}, true
	default:
		return answer{}, false
	}
	return answer{code: codes.FailedPrecondition, reason: reason, mayHaveHappened: no}, true
}
