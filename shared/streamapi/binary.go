package streamapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/loamhq/loam/shared/recordbatch"
)

// MediaRecordBatch is the media type of the binary fast path: a body of one or more
// Kafka RecordBatch v2 batches, concatenated, each framed by its own batchLength field.
// Produce sends it as Content-Type; fetch answers it to an Accept that names it.
const MediaRecordBatch = "application/vnd.loam.recordbatch"

// Response headers of a binary fetch (a JSON fetch sends them too).
const (
	HeaderNextOffset    = "Loam-Next-Offset"
	HeaderHighWatermark = "Loam-High-Watermark"
	HeaderLogStart      = "Loam-Log-Start"
)

// IsMediaRecordBatch reports whether a Content-Type value names MediaRecordBatch
// (parameters are ignored).
func IsMediaRecordBatch(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == MediaRecordBatch
}

// AcceptsRecordBatch reports whether an Accept header value names MediaRecordBatch.
func AcceptsRecordBatch(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(mt), MediaRecordBatch) {
			return true
		}
	}
	return false
}

// BatchLimits bound a binary produce body; zero fields are not checked.
type BatchLimits struct {
	MaxRecordBytes  int // key + value + header keys and values of one record
	MaxRecords      int // records of the whole body
	MaxDecompressed int // what one batch's records may decompress to (<= 0: recordbatch.DefaultMaxDecompressed)
}

// BatchError refuses a binary produce body: Batch is the index of the batch at fault
// (counted from 0 in body order; -1 for the body as a whole) and Code the API error code
// (CodeInvalidRecord, CodeRecordTooLarge or CodeRequestTooLarge).
type BatchError struct {
	Batch int
	Code  string
	Msg   string
}

func (e *BatchError) Error() string { return e.Msg }

// Status is the HTTP status that answers e: 413 for the size codes, else 400.
func (e *BatchError) Status() int {
	if e.Code == CodeRecordTooLarge || e.Code == CodeRequestTooLarge {
		return 413
	}
	return 400
}

// ProducedBatch is one accepted batch of a binary produce body. Its records are not kept
// (Batch.Records decodes them again), so checking a body holds at most one batch's
// decompressed records at a time.
type ProducedBatch struct {
	Batch recordbatch.Batch // Raw aliases the body
}

// BatchProducer is the idempotent producer a RecordBatch v2 header carries: its id, epoch
// and the base sequence of the batch's first record. ID -1 (with epoch and sequence -1)
// is a batch without a producer.
type BatchProducer struct {
	ID           int64
	Epoch        int16
	BaseSequence int32
}

// Has reports whether p names a producer.
func (p BatchProducer) Has() bool { return p.ID > 0 }

// ProducerCheck checks the producer fields of one partition's batches, fed in order with
// Add: either no batch carries a producer (id, epoch and base sequence all -1), or every
// batch carries the same id (> 0) and epoch (>= 0) and base sequences that follow each
// other without a gap (each batch's is the previous one's plus its record count, wrapping
// after 2147483647 to 0, as Kafka numbers them). Such batches commit as one request of
// their producer, from the first batch's base sequence on. The zero value is ready.
type ProducerCheck struct {
	first BatchProducer
	next  int32
	n     int
}

// Add checks the next batch; the error says what is wrong with it.
func (c *ProducerCheck) Add(b *recordbatch.Batch) error {
	p := BatchProducer{ID: b.ProducerID, Epoch: b.ProducerEpoch, BaseSequence: b.BaseSequence}
	switch {
	case p.ID == -1 && (p.Epoch != -1 || p.BaseSequence != -1):
		return fmt.Errorf("producerId -1 with producerEpoch %d and baseSequence %d: a batch without a producer has all three -1", p.Epoch, p.BaseSequence)
	case p.ID == 0 || p.ID < -1:
		return fmt.Errorf("producerId %d: want -1 (no producer) or a producer id above 0", p.ID)
	case p.ID > 0 && p.Epoch < 0:
		return fmt.Errorf("producerId %d with producerEpoch %d: an idempotent batch has an epoch >= 0", p.ID, p.Epoch)
	case p.ID > 0 && p.BaseSequence < 0:
		return fmt.Errorf("producerId %d with baseSequence %d: an idempotent batch has a base sequence >= 0", p.ID, p.BaseSequence)
	}
	defer func() { c.n++ }()
	if c.n == 0 {
		c.first = p
		c.next = nextSequence(p.BaseSequence, b.OffsetCount())
		return nil
	}
	switch {
	case p.ID != c.first.ID || p.Epoch != c.first.Epoch:
		return fmt.Errorf("producerId %d, producerEpoch %d, but the first batch has producerId %d, producerEpoch %d: a body's batches of one partition are one producer's (or none's)", p.ID, p.Epoch, c.first.ID, c.first.Epoch)
	case p.Has() && p.BaseSequence != c.next:
		return fmt.Errorf("baseSequence %d, but the previous batch ends before sequence %d: a body's batches carry consecutive sequences", p.BaseSequence, c.next)
	}
	if p.Has() {
		c.next = nextSequence(p.BaseSequence, b.OffsetCount())
	}
	return nil
}

// Producer is the producer of the batches added, from the first one's base sequence on
// (ID -1 when they carry none, or none were added).
func (c *ProducerCheck) Producer() BatchProducer {
	if c.n == 0 {
		return BatchProducer{ID: -1, Epoch: -1, BaseSequence: -1}
	}
	return c.first
}

// ProducerOf is the producer of batches CheckBatches accepted (ID -1: none).
func ProducerOf(bs []ProducedBatch) BatchProducer {
	if len(bs) == 0 {
		return BatchProducer{ID: -1, Epoch: -1, BaseSequence: -1}
	}
	b := bs[0].Batch
	return BatchProducer{ID: b.ProducerID, Epoch: b.ProducerEpoch, BaseSequence: b.BaseSequence}
}

// CheckBatches decodes and validates a binary produce body as the log node does before
// writing anything: every batch parses (length, magic 2, CRC32C), its codec is one of
// Kafka's (none, gzip, snappy, lz4, zstd), numRecords > 0 and equals lastOffsetDelta+1,
// each record's framing holds and offset deltas are 0..lastOffsetDelta, every timestamp
// is >= 0 and maxTimestamp is the largest of them, the batch is neither transactional,
// nor a control batch, nor log-append-time, and the producer fields of the batches agree
// (ProducerCheck: none carries a producer, or all carry one producer with consecutive
// sequences; ProducerOf names it); sizes are within lim. No bytes may follow the last
// batch. The first problem is a *BatchError naming the batch and what is wrong.
func CheckBatches(body []byte, lim BatchLimits) ([]ProducedBatch, error) {
	if len(body) == 0 {
		return nil, &BatchError{Batch: -1, Code: CodeInvalidRecord, Msg: "the body holds no batch: send one or more RecordBatch v2 batches"}
	}
	var (
		out   []ProducedBatch
		total int
		at    int
		pc    ProducerCheck
	)
	for rest := body; len(rest) > 0; {
		i := len(out)
		bad := func(code, format string, args ...any) error {
			return &BatchError{Batch: i, Code: code, Msg: fmt.Sprintf("batch %d at byte %d: ", i, at) + fmt.Sprintf(format, args...)}
		}
		b, tail, err := recordbatch.Parse(rest)
		if err != nil {
			if errors.Is(err, recordbatch.ErrTruncated) {
				return nil, bad(CodeInvalidRecord, "%v (%d bytes follow the previous batch)", err, len(rest))
			}
			return nil, bad(CodeInvalidRecord, "%v", err)
		}
		switch {
		case b.Compression() > recordbatch.Zstd || b.Compression() < recordbatch.None:
			return nil, bad(CodeInvalidRecord, "attributes 0x%04x: compression codec %d is not one of none, gzip, snappy, lz4, zstd (0-4)", uint16(b.Attributes), int8(b.Compression()))
		case b.Control():
			return nil, bad(CodeInvalidRecord, "attributes 0x%04x: a control batch (transaction marker) cannot be produced", uint16(b.Attributes))
		case b.Transactional():
			return nil, bad(CodeInvalidRecord, "attributes 0x%04x: transactional batches are not served", uint16(b.Attributes))
		case b.LogAppendTime():
			return nil, bad(CodeInvalidRecord, "attributes 0x%04x: the log-append-time bit is set: producers send create time", uint16(b.Attributes))
		case b.NumRecords <= 0:
			return nil, bad(CodeInvalidRecord, "numRecords %d: a batch must hold at least one record", b.NumRecords)
		case int64(b.NumRecords) != b.OffsetCount():
			return nil, bad(CodeInvalidRecord, "numRecords %d != lastOffsetDelta %d + 1", b.NumRecords, b.LastOffsetDelta)
		}
		if err := pc.Add(&b); err != nil {
			return nil, bad(CodeInvalidRecord, "%v", err)
		}
		total += int(b.NumRecords)
		if lim.MaxRecords > 0 && total > lim.MaxRecords {
			return nil, bad(CodeRequestTooLarge, "the body holds more than the limit of %d records", lim.MaxRecords)
		}
		var maxTS int64 = -1
		err = b.Scan(lim.MaxDecompressed, func(j int, ts int64, size int) error {
			if ts < 0 {
				return bad(CodeInvalidRecord, "record %d: timestamp %d is negative", j, ts)
			}
			maxTS = max(maxTS, ts)
			if lim.MaxRecordBytes > 0 && size > lim.MaxRecordBytes {
				return bad(CodeRecordTooLarge, "record %d: %d bytes of key, value and headers, more than the limit of %d", j, size, lim.MaxRecordBytes)
			}
			return nil
		})
		var be *BatchError
		switch {
		case errors.As(err, &be):
			return nil, err
		case errors.Is(err, recordbatch.ErrTooLarge):
			return nil, bad(CodeRequestTooLarge, "%v", err)
		case err != nil:
			return nil, bad(CodeInvalidRecord, "%v", err)
		}
		if b.MaxTimestamp != maxTS {
			return nil, bad(CodeInvalidRecord, "maxTimestamp %d, but the records' largest timestamp is %d", b.MaxTimestamp, maxTS)
		}
		out = append(out, ProducedBatch{Batch: b})
		at += len(b.Raw)
		rest = tail
	}
	return out, nil
}

// recordSize is what the record limit counts: key, value and every header key and value.
func recordSize(r *recordbatch.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// batchRecord turns an API record into a batch record: key and value bytes (a tombstone
// is a nil value; a JSON value without the whitespace around it, as the JSON path stores
// it), headers in order, and the timestamp (nowMs when the record has none).
func batchRecord(r Record, nowMs int64) (recordbatch.Record, error) {
	var out recordbatch.Record
	k, err := r.KeyBytes()
	if err != nil {
		return out, err
	}
	v, err := r.Bytes()
	if err != nil {
		return out, err
	}
	if r.ValueBase64 == nil && v != nil {
		v = bytes.TrimSpace(v)
		if !json.Valid(v) {
			return out, fmt.Errorf("streamapi: record value is not valid JSON: %w", ErrInvalidRecord)
		}
		if isNull(v) {
			v = nil
		}
	}
	out.Key, out.Value, out.Timestamp = k, v, nowMs
	if r.Timestamp != nil {
		if *r.Timestamp < 0 {
			return out, fmt.Errorf("streamapi: record timestamp %d is negative: %w", *r.Timestamp, ErrInvalidRecord)
		}
		out.Timestamp = *r.Timestamp
	}
	if len(r.Headers) > 0 {
		out.Headers = make([]recordbatch.Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = recordbatch.Header{Key: h.Key, Value: h.Value}
		}
	}
	return out, nil
}

// AppendBatch appends one RecordBatch v2 batch of recs (compressed with c) to dst, as the
// client sends it on the binary path: records without a timestamp get nowMs, offsets and
// producer fields are left to the log (base offset 0, producer id, epoch and sequence
// -1). Records that carry an offset or both forms of a field fail with ErrInvalidRecord.
func AppendBatch(dst []byte, recs []Record, c recordbatch.Compression, nowMs int64) ([]byte, error) {
	rs := make([]recordbatch.Record, len(recs))
	for i, r := range recs {
		if r.Offset != nil {
			return dst, fmt.Errorf("streamapi: record %d: an offset is assigned by the log and cannot be produced: %w", i, ErrInvalidRecord)
		}
		br, err := batchRecord(r, nowMs)
		if err != nil {
			return dst, fmt.Errorf("record %d: %w", i, err)
		}
		rs[i] = br
	}
	opt := recordbatch.DefaultBuildOptions()
	opt.Compression = c
	out, err := recordbatch.Append(dst, rs, opt)
	if err != nil {
		return dst, fmt.Errorf("streamapi: build batch: %w", err)
	}
	return out, nil
}

// FetchedRecord is a stored record as a fetch answers it: offset, timestamp, key (key or
// key_base64), value (value when FetchAsJSON, else value_base64; a tombstone is
// "value": null) and headers, which alias r.
func FetchedRecord(offset int64, r recordbatch.Record) Record {
	ts := r.Timestamp
	out := Record{Offset: &offset, Timestamp: &ts}
	out.SetKey(r.Key)
	switch {
	case r.Value == nil:
		out.Value = json.RawMessage("null")
	case FetchAsJSON(r.Value):
		out.Value = json.RawMessage(r.Value)
	default:
		out.ValueBase64 = r.Value
	}
	if len(r.Headers) > 0 {
		out.Headers = make(Headers, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	return out
}

// DecodeBatches turns a binary fetch answer (whole batches, baseOffset set) into records
// from offset from on, leaving out the records below it (the first batch may start before
// it). A truncated or corrupt answer fails.
func DecodeBatches(body []byte, from int64) ([]Record, error) {
	out := []Record{}
	for rest := body; len(rest) > 0; {
		b, tail, err := recordbatch.Parse(rest)
		if err != nil {
			return nil, fmt.Errorf("batch at byte %d: %w", len(body)-len(rest), err)
		}
		recs, err := b.Records()
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if off := b.BaseOffset + int64(r.OffsetDelta); off >= from {
				out = append(out, FetchedRecord(off, r))
			}
		}
		rest = tail
	}
	return out, nil
}
