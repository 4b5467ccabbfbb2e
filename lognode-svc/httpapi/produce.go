package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

// inputError is a client mistake; it carries the HTTP status and error code to answer.
type inputError struct {
	status int
	code   string
	msg    string
}

func (e *inputError) Error() string { return e.msg }

func badInput(status int, code, format string, args ...any) *inputError {
	return &inputError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// record is one decoded produce record.
type record struct {
	partition int32
	named     bool // the record named its partition
	rec       recordbatch.Record
}

// decodeProduce parses and validates a produce body for a stream of the given partition
// count, in one pass over the JSON: the records and the producer fields (checked by
// withProducer). Records without a partition get one: murmur2 of the key modulo the
// partition count (Kafka's default partitioner), or sticky modulo the partition count when
// keyless. nowMs stamps records without a timestamp.
func decodeProduce(body []byte, partitions int32, lim Limits, sticky uint32, nowMs int64) ([]record, streamapi.ProducerFields, error) {
	var req streamapi.ProduceRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, req.ProducerFields, err
	}
	recs, err := checkRecords(req.Records, partitions, lim, sticky, nowMs)
	return recs, req.ProducerFields, err
}

// checkRecords validates decoded produce records and places them (see decodeProduce).
func checkRecords(records []streamapi.Record, partitions int32, lim Limits, sticky uint32, nowMs int64) ([]record, error) {
	if records == nil {
		return nil, badInput(400, streamapi.CodeInvalidRecord, `the request has no "records" array`)
	}
	if len(records) == 0 {
		return nil, badInput(400, streamapi.CodeInvalidRecord, `"records" is empty`)
	}
	if len(records) > lim.MaxRecords {
		return nil, badInput(413, streamapi.CodeRequestTooLarge, "the request has %d records, more than the limit of %d", len(records), lim.MaxRecords)
	}
	out := make([]record, len(records))
	for i, r := range records {
		var rec recordbatch.Record
		switch {
		case r.Offset != nil:
			return nil, badInput(400, streamapi.CodeInvalidRecord, `records[%d]: "offset" is assigned by the sequencer and cannot be produced`, i)
		case r.Key != nil && r.KeyBase64 != nil:
			return nil, badInput(400, streamapi.CodeInvalidRecord, `records[%d]: has both "key" and "key_base64"`, i)
		case r.Value != nil && r.ValueBase64 != nil:
			return nil, badInput(400, streamapi.CodeInvalidRecord, `records[%d]: has both "value" and "value_base64"`, i)
		}
		switch {
		case r.Key != nil:
			rec.Key = []byte(*r.Key)
		case r.KeyBase64 != nil:
			rec.Key = r.KeyBase64
		}
		switch {
		case r.Value != nil && !bytes.Equal(r.Value, []byte("null")):
			rec.Value = []byte(r.Value)
		case r.ValueBase64 != nil:
			rec.Value = r.ValueBase64
		}
		size := len(rec.Key) + len(rec.Value)
		if len(r.Headers) > 0 {
			rec.Headers = make([]recordbatch.Header, len(r.Headers))
			for j, h := range r.Headers {
				rec.Headers[j] = recordbatch.Header{Key: h.Key, Value: h.Value}
				size += len(h.Key) + len(h.Value)
			}
		}
		if size > lim.MaxRecordBytes {
			return nil, badInput(413, streamapi.CodeRecordTooLarge, "records[%d]: %d bytes of key, value and headers, more than the limit of %d", i, size, lim.MaxRecordBytes)
		}
		rec.Timestamp = nowMs
		if r.Timestamp != nil {
			if *r.Timestamp < 0 {
				return nil, badInput(400, streamapi.CodeInvalidRecord, `records[%d]: "timestamp" %d is negative`, i, *r.Timestamp)
			}
			rec.Timestamp = *r.Timestamp
		}
		var p int32
		switch {
		case r.Partition != nil:
			p = *r.Partition
			if p < 0 || p >= partitions {
				return nil, badInput(400, streamapi.CodePartitionNotFound, `records[%d]: partition %d does not exist: the stream has partitions 0..%d`, i, p, partitions-1)
			}
		case rec.Key != nil:
			p = KeyPartition(rec.Key, partitions)
		default:
			p = int32(sticky % uint32(partitions)) // unsigned: the counter wraps without going negative
		}
		rec.OffsetDelta = 0
		out[i] = record{partition: p, named: r.Partition != nil, rec: rec}
	}
	return out, nil
}

// jsonError turns an encoding/json error into an answer that names the problem.
func jsonError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return badInput(400, streamapi.CodeInvalidJSON, "invalid JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the request"
		}
		want := typ.Type.String()
		switch want {
		case "[]uint8":
			want = "a base64 string"
		case "*string", "string":
			want = "a string"
		case "*int32", "*int64", "int32", "int64":
			want = "an integer"
		case "streamapi.Headers", "[]streamapi.Header":
			want = `a list of {"key", "value"} objects`
		case "[]streamapi.Record":
			want = "an array of records"
		}
		return badInput(400, streamapi.CodeInvalidJSON, "%s: got a JSON %s, want %s", field, typ.Value, want)
	case errors.Is(err, io.EOF):
		return badInput(400, streamapi.CodeInvalidJSON, "the request body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badInput(400, streamapi.CodeInvalidJSON, "invalid JSON: the body ends early")
	default:
		return badInput(400, streamapi.CodeInvalidJSON, "invalid JSON: %v", err)
	}
}

// appendRecordJSON appends one fetched record as JSON. The value is written verbatim when
// streamapi.FetchAsJSON says so (its bytes then round-trip exactly), else as value_base64;
// the key goes as key when it is valid UTF-8, else as key_base64.
func appendRecordJSON(dst []byte, offset int64, r recordbatch.Record) []byte {
	dst = append(dst, `{"offset":`...)
	dst = appendInt(dst, offset)
	dst = append(dst, `,"timestamp":`...)
	dst = appendInt(dst, r.Timestamp)
	if r.Key != nil {
		if utf8.Valid(r.Key) {
			dst = append(dst, `,"key":`...)
			dst = appendString(dst, string(r.Key))
		} else {
			dst = append(dst, `,"key_base64":"`...)
			dst = appendBase64(dst, r.Key)
			dst = append(dst, '"')
		}
	}
	switch {
	case r.Value == nil:
		dst = append(dst, `,"value":null`...)
	case streamapi.FetchAsJSON(r.Value):
		dst = append(dst, `,"value":`...)
		dst = append(dst, r.Value...)
	default:
		dst = append(dst, `,"value_base64":"`...)
		dst = appendBase64(dst, r.Value)
		dst = append(dst, '"')
	}
	if len(r.Headers) > 0 {
		dst = append(dst, `,"headers":[`...)
		for i, h := range r.Headers {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendHeaderJSON(dst, h)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// appendHeaderJSON appends one header in the list form: the key as "key" when it is
// valid UTF-8, else "key_base64"; the value as "value" when it is valid UTF-8, else
// "value_base64"; a null value as "value": null. Every header round-trips exactly.
func appendHeaderJSON(dst []byte, h recordbatch.Header) []byte {
	if utf8.ValidString(h.Key) {
		dst = append(dst, `{"key":`...)
		dst = appendString(dst, h.Key)
	} else {
		dst = append(dst, `{"key_base64":"`...)
		dst = appendBase64(dst, []byte(h.Key))
		dst = append(dst, '"')
	}
	switch {
	case h.Value == nil:
		dst = append(dst, `,"value":null`...)
	case utf8.Valid(h.Value):
		dst = append(dst, `,"value":`...)
		dst = appendString(dst, string(h.Value))
	default:
		dst = append(dst, `,"value_base64":"`...)
		dst = appendBase64(dst, h.Value)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}
