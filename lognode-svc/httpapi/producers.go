package httpapi

// Idempotent producers over HTTP.
//
//	POST /v1/namespaces/{ns}/producers   {} | {"name": "n"} | {"producer_id": 7, "epoch": 2}
//	                                     -> {"producer_id": 7, "epoch": 3}
//
// A produce body may carry "producer_id", "epoch" and "sequences" (partition -> the base
// sequence of the request's first record there). Each record then names its partition; the
// partition's records, in request order, take the sequences from its base on, and become
// one writer request carrying the producer (the stored batch's header carries it too, as
// Kafka's does). A retry of the whole request is answered with the first attempt's offsets.

import (
	"bytes"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

// initProducer serves POST /v1/namespaces/{ns}/producers.
func (s *Server) initProducer(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req streamapi.InitProducerRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			return err
		}
	}
	id, epoch := int64(meta.NoProducer), int16(-1)
	switch {
	case req.ProducerID != nil && req.Epoch == nil:
		return badInput(400, streamapi.CodeInvalidArgument, `"producer_id" needs its "epoch"`)
	case req.ProducerID == nil && req.Epoch != nil:
		return badInput(400, streamapi.CodeInvalidArgument, `"epoch" needs its "producer_id"`)
	case req.ProducerID != nil:
		if *req.ProducerID <= 0 {
			return badInput(400, streamapi.CodeInvalidArgument, `"producer_id" %d: want a producer id above 0`, *req.ProducerID)
		}
		if *req.Epoch < 0 || *req.Epoch > math.MaxInt16 {
			return badInput(400, streamapi.CodeInvalidArgument, `"epoch" %d: want 0..%d`, *req.Epoch, math.MaxInt16)
		}
		id, epoch = *req.ProducerID, int16(*req.Epoch)
	}
	if len(req.Name) > meta.MaxNameLength {
		return badInput(400, streamapi.CodeInvalidArgument, `"name" of %d bytes: want at most %d`, len(req.Name), meta.MaxNameLength)
	}
	p, err := s.cfg.Meta.InitProducer(r.Context(), r.PathValue("ns"), req.Name, id, epoch)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, streamapi.ProducerID{ProducerID: p.ID, Epoch: p.Epoch})
	return nil
}

// withProducer checks the producer fields of a produce body (decoded with its records by
// decodeProduce), if any, and sets them in reqs (one per partition, as the produce handler
// built them: each holding one batch) and in their batches' headers. A body without
// "producer_id" changes nothing.
func withProducer(pf streamapi.ProducerFields, recs []record, reqs []writer.Request) error {
	if pf.ProducerID == nil {
		if pf.Epoch != nil || pf.Sequences != nil {
			return badInput(400, streamapi.CodeInvalidArgument, `"epoch" and "sequences" need a "producer_id"`)
		}
		return nil
	}
	switch {
	case *pf.ProducerID <= 0:
		return badInput(400, streamapi.CodeInvalidArgument, `"producer_id" %d: want a producer id above 0 (POST /v1/namespaces/{ns}/producers allocates one)`, *pf.ProducerID)
	case pf.Epoch == nil:
		return badInput(400, streamapi.CodeInvalidArgument, `"producer_id" needs its "epoch"`)
	case *pf.Epoch < 0 || *pf.Epoch > math.MaxInt16:
		return badInput(400, streamapi.CodeInvalidArgument, `"epoch" %d: want 0..%d`, *pf.Epoch, math.MaxInt16)
	case len(pf.Sequences) == 0:
		return badInput(400, streamapi.CodeInvalidArgument, `"producer_id" needs "sequences": the base sequence of each partition the records go to`)
	}
	for i, rec := range recs {
		if !rec.named {
			return badInput(400, streamapi.CodeInvalidArgument, `records[%d]: an idempotent produce names each record's "partition", so a retry lands where the first attempt did`, i)
		}
	}
	seqs := make(map[int32]int32, len(pf.Sequences))
	for k, v := range pf.Sequences {
		p, err := strconv.ParseInt(k, 10, 32)
		if err != nil || p < 0 || strconv.FormatInt(p, 10) != k {
			return badInput(400, streamapi.CodeInvalidArgument, `"sequences": key %q is not a partition number`, k)
		}
		if v < 0 {
			return badInput(400, streamapi.CodeInvalidArgument, `"sequences": partition %s: base sequence %d is negative`, k, v)
		}
		seqs[int32(p)] = v
	}
	for _, rq := range reqs {
		if _, ok := seqs[rq.Partition]; !ok {
			return badInput(400, streamapi.CodeInvalidArgument, `"sequences" has no base sequence for partition %d, which records go to`, rq.Partition)
		}
	}
	if len(seqs) != len(reqs) {
		for p := range seqs {
			found := false
			for _, rq := range reqs {
				found = found || rq.Partition == p
			}
			if !found {
				return badInput(400, streamapi.CodeInvalidArgument, `"sequences" names partition %d, which no record goes to`, p)
			}
		}
	}
	for i := range reqs {
		rq := &reqs[i]
		rq.Producer = meta.ChunkProducer{ID: *pf.ProducerID, Epoch: int16(*pf.Epoch), BaseSequence: seqs[rq.Partition]}
		if err := setBatchProducer(rq.Batches, rq.Producer); err != nil {
			return err
		}
	}
	return nil
}

// setBatchProducer writes the producer into the header of the one batch in b.
func setBatchProducer(b []byte, p meta.ChunkProducer) error {
	return recordbatch.SetProducer(b, p.ID, p.Epoch, p.BaseSequence)
}

// producerAnswer maps the refusals of idempotent producers.
func producerAnswer(err error) (answer, bool) {
	switch {
	case errors.Is(err, meta.ErrOutOfOrderSequence):
		return definite(http.StatusConflict, streamapi.CodeOutOfOrderSequence), true
	case errors.Is(err, meta.ErrProducerFenced):
		return definite(http.StatusConflict, streamapi.CodeProducerFenced), true
	case errors.Is(err, meta.ErrUnknownProducer):
		return definite(http.StatusConflict, streamapi.CodeUnknownProducer), true
	case errors.Is(err, writer.ErrInvalidRequest):
		return definite(http.StatusBadRequest, streamapi.CodeInvalidArgument), true
	}
	return answer{}, false
}
