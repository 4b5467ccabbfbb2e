package httpapi

// The binary fast path: produce and fetch in Kafka RecordBatch v2 bytes as stored
// (streamapi.MediaRecordBatch), so neither side encodes or decodes JSON.
//
// Produce: POST …/records with Content-Type application/vnd.loam.recordbatch; the body is
// one or more batches, concatenated, all for one partition: the partition query parameter,
// or, without it, one partition picked round-robin (the keyless rule of the JSON path).
// The body is checked whole (streamapi.CheckBatches) before anything is written, and its
// batches are written as sent, in one request to the writer; only their baseOffset fields
// change. The answer is the JSON ProduceResponse with one offset per batch: its partition
// and base offset.
//
// Idempotent produce: batches may carry a producer in their headers (producerId,
// producerEpoch, baseSequence, as a Kafka idempotent producer sets them): all the body's
// batches then carry the same producer and epoch and consecutive sequences, and the body
// names its partition. It commits as one request of that producer: a retry of the body is
// answered with the first attempt's offsets; an out-of-order sequence, a fenced epoch or an
// unknown producer is 409 with code out_of_order_sequence, producer_fenced or
// unknown_producer, and nothing of it is written.
//
// Fetch: GET …/partitions/{p}/records with an Accept naming the type answers 200 with the
// stored batches concatenated (baseOffset set, records never decoded), Content-Type
// application/vnd.loam.recordbatch, and the offsets in Loam-Next-Offset,
// Loam-High-Watermark and Loam-Log-Start. The first batch may start before the requested
// offset; readers skip the records below it. Nothing to answer (at the high watermark,
// after the wait) is 200 with an empty body. Errors are JSON, as on every route.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

// produceBatches serves a binary produce to stream st through wr.
func (s *Server) produceBatches(w http.ResponseWriter, r *http.Request, st meta.Stream, wr writer.Writer) error {
	p, err := s.batchPartition(r, st)
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
	batches, err := streamapi.CheckBatches(body, s.batchLimits())
	if err != nil {
		var be *streamapi.BatchError
		if !errors.As(err, &be) {
			return badInput(400, streamapi.CodeInvalidRecord, "%v", err)
		}
		return badInput(be.Status(), be.Code, "%s", be.Msg)
	}
	var (
		records int64
		maxTS   int64
	)
	for _, b := range batches {
		records += int64(b.Batch.NumRecords)
		maxTS = max(maxTS, b.Batch.MaxTimestamp)
	}
	wctx, cancel := context.WithTimeout(r.Context(), s.cfg.Limits.ProduceWait)
	defer cancel()
	req := writer.Request{StreamID: st.ID, Partition: p, Batches: body, Records: records, MaxTimestamp: maxTS,
		Checksum: batchesChecksum(batches), Checksummed: true}
	if bp := streamapi.ProducerOf(batches); bp.Has() {
		// The batches are one producer's, with consecutive sequences (CheckBatches): they
		// commit as one request of it, and a retry of the body answers the first offsets.
		if r.URL.Query().Get("partition") == "" {
			return badInput(400, streamapi.CodeInvalidArgument, "an idempotent produce (batches with producerId %d) names its partition, so a retry lands where the first attempt did", bp.ID)
		}
		req.Producer = meta.ChunkProducer{ID: bp.ID, Epoch: bp.Epoch, BaseSequence: bp.BaseSequence}
	}
	res, err := wr.Write(wctx, []writer.Request{req})
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("binary produce: the writer answered %d results for one request", len(res))
	}
	if err == nil && res[0].Err != nil {
		err = res[0].Err
	}
	if err != nil {
		return &writeFailure{err}
	}
	out := streamapi.ProduceResponse{Offsets: make([]streamapi.RecordOffset, len(batches)), Token: FormatToken(res[0].Token)}
	off := res[0].BaseOffset
	for i, b := range batches {
		out.Offsets[i] = streamapi.RecordOffset{Partition: p, Offset: off}
		off += b.Batch.OffsetCount()
	}
	s.m.records.Add(float64(records))
	s.m.bytes.Add(float64(len(body)))
	writeJSON(w, http.StatusOK, out)
	return nil
}

// batchPartition reads the partition of a binary produce: the partition query parameter,
// else the next of the round-robin. It refuses any other query parameter.
func (s *Server) batchPartition(r *http.Request, st meta.Stream) (int32, error) {
	q := r.URL.Query()
	if err := onlyParams(q, "a binary produce takes", "partition"); err != nil {
		return 0, err
	}
	v := q.Get("partition")
	if v == "" {
		return int32(s.sticky.Add(1) % uint32(st.Partitions)), nil
	}
	p, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, badInput(400, streamapi.CodeBadRequest, "query parameter partition=%q is not an integer", v)
	}
	if p < 0 || p >= int64(st.Partitions) {
		return 0, badInput(400, streamapi.CodePartitionNotFound, "partition %d does not exist: the stream has partitions 0..%d", p, st.Partitions-1)
	}
	return int32(p), nil
}

// batchLimits are the node's limits as CheckBatches applies them. One batch's records may
// decompress to at most MaxRequestBytes, so checking a body holds at most that much
// decompressed data besides the body.
func (s *Server) batchLimits() streamapi.BatchLimits {
	l := s.cfg.Limits
	return streamapi.BatchLimits{MaxRecordBytes: l.MaxRecordBytes, MaxRecords: l.MaxRecords, MaxDecompressed: l.MaxRequestBytes}
}

// setOffsetHeaders sets the Loam-* offset headers of a fetch answer.
func setOffsetHeaders(h http.Header, res reader.Result) {
	h.Set(streamapi.HeaderNextOffset, strconv.FormatInt(res.NextOffset, 10))
	h.Set(streamapi.HeaderHighWatermark, strconv.FormatInt(res.HighWatermark, 10))
	h.Set(streamapi.HeaderLogStart, strconv.FormatInt(res.LogStart, 10))
}

// writeBatches answers a binary fetch: the stored batches as the reader returns them.
func (s *Server) writeBatches(w http.ResponseWriter, res reader.Result) error {
	h := w.Header()
	h.Set("Content-Type", streamapi.MediaRecordBatch)
	h.Set("Content-Length", strconv.Itoa(sizeOf(res.Batches)))
	w.WriteHeader(http.StatusOK)
	n := 0
	for _, b := range res.Batches {
		if len(b) >= recordbatch.HeaderSize {
			n += int(int32(binary.BigEndian.Uint32(b[recordbatch.HeaderSize-4:]))) // numRecords
		}
		if _, err := w.Write(b); err != nil {
			return nil // the client went away; the status is written
		}
	}
	s.m.fetched.Add(float64(n))
	return nil
}

// batchesChecksum is the CRC-32C of the body the checked batches make up (CheckBatches
// parsed all of it), from their CRCs.
func batchesChecksum(batches []streamapi.ProducedBatch) uint32 {
	var sum uint32
	for _, b := range batches {
		sum = recordbatch.ChecksumAfter(sum, b.Batch)
	}
	return sum
}
