package otlplogs

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/recordbatch"
)

// Record headers Map sets.
const (
	HeaderTraceID        = "otel.trace_id"
	HeaderSpanID         = "otel.span_id"
	HeaderSeverityNumber = "otel.severity_number"
)

// Options tune Map.
type Options struct {
	// KeyAttribute names the attribute whose value is each record's key (for example
	// service.name); empty: records have no key.
	KeyAttribute string
	// MaxRecordBytes bounds a mapped record's key, value and headers together; a larger
	// record is rejected. 0: no bound.
	MaxRecordBytes int
	// ArrivalMs is the timestamp of records with neither time_unix_nano nor
	// observed_time_unix_nano.
	ArrivalMs int64
}

// Record is one mapped LogRecord.
type Record struct {
	Key       []byte // nil: no key
	Value     []byte
	Timestamp int64 // milliseconds since the epoch
	Headers   []recordbatch.Header
}

// Result is what Map made of a request.
type Result struct {
	Records  []Record // in request order
	Rejected int64    // LogRecords that were not mapped
	// Message says why the first rejected record was rejected, and how many were; empty
	// when none was.
	Message string
}

// Count is the number of LogRecords in req.
func Count(req *collogspb.ExportLogsServiceRequest) int {
	n := 0
	for _, rl := range req.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			n += len(sl.GetLogRecords())
		}
	}
	return n
}

// Map maps every LogRecord of req to a record (see the package comment).
func Map(req *collogspb.ExportLogsServiceRequest, opts Options) Result {
	var (
		res   Result
		first string
		buf   []byte // every value, back to back; records slice it at the end
		ends  []int
		rbuf  []byte
		sbuf  []byte
	)
	total := Count(req)
	res.Records = make([]Record, 0, total)
	for i, rl := range req.GetResourceLogs() {
		rbuf = AppendResource(rbuf[:0], rl.GetResource(), rl.GetSchemaUrl())
		for j, sl := range rl.GetScopeLogs() {
			sbuf = AppendScope(sbuf[:0], sl.GetScope(), sl.GetSchemaUrl())
			// Room for the scope's values at once: about their protobuf size (ids and bytes
			// grow in hex and base64; the rest stays near it), plus the members every value
			// repeats, so the buffer is not copied as it grows.
			buf = slices.Grow(buf, proto.Size(sl)*9/8+len(sl.GetLogRecords())*(len(rbuf)+len(sbuf)+128))
			for k, lr := range sl.GetLogRecords() {
				reject := func(format string, args ...any) {
					res.Rejected++
					if first == "" {
						first = fmt.Sprintf("resourceLogs[%d].scopeLogs[%d].logRecords[%d]: ", i, j, k) + fmt.Sprintf(format, args...)
					}
				}
				if n := len(lr.GetTraceId()); n != 0 && n != 16 {
					reject("traceId is %d bytes, want 16 (or none)", n)
					continue
				}
				if n := len(lr.GetSpanId()); n != 0 && n != 8 {
					reject("spanId is %d bytes, want 8 (or none)", n)
					continue
				}
				start := len(buf)
				buf = AppendLogRecord(buf, lr, rbuf, sbuf)
				rec := Record{Timestamp: timestampMs(lr, opts.ArrivalMs), Headers: headers(lr)}
				if opts.KeyAttribute != "" {
					rec.Key = keyOf(opts.KeyAttribute, lr.GetAttributes(), sl.GetScope().GetAttributes(), rl.GetResource().GetAttributes())
				}
				if opts.MaxRecordBytes > 0 {
					size := len(buf) - start + len(rec.Key)
					for _, h := range rec.Headers {
						size += len(h.Key) + len(h.Value)
					}
					if size > opts.MaxRecordBytes {
						buf = buf[:start]
						reject("the record maps to %d bytes of key, value and headers, over the record limit of %d", size, opts.MaxRecordBytes)
						continue
					}
				}
				res.Records = append(res.Records, rec)
				ends = append(ends, len(buf))
			}
		}
	}
	start := 0
	for i, end := range ends {
		res.Records[i].Value = buf[start:end:end]
		start = end
	}
	if res.Rejected > 0 {
		res.Message = first
		if res.Rejected > 1 {
			res.Message += fmt.Sprintf(" (and %d more rejected)", res.Rejected-1)
		}
	}
	return res
}

func timestampMs(lr *logspb.LogRecord, arrivalMs int64) int64 {
	switch {
	case lr.GetTimeUnixNano() != 0:
		return int64(lr.GetTimeUnixNano() / 1e6)
	case lr.GetObservedTimeUnixNano() != 0:
		return int64(lr.GetObservedTimeUnixNano() / 1e6)
	}
	return arrivalMs
}

func headers(lr *logspb.LogRecord) []recordbatch.Header {
	var hs []recordbatch.Header
	if id := lr.GetTraceId(); len(id) > 0 {
		hs = append(hs, recordbatch.Header{Key: HeaderTraceID, Value: hex.AppendEncode(nil, id)})
	}
	if id := lr.GetSpanId(); len(id) > 0 {
		hs = append(hs, recordbatch.Header{Key: HeaderSpanID, Value: hex.AppendEncode(nil, id)})
	}
	if n := lr.GetSeverityNumber(); n != 0 {
		hs = append(hs, recordbatch.Header{Key: HeaderSeverityNumber, Value: strconv.AppendInt(nil, int64(n), 10)})
	}
	return hs
}

// keyOf is the value of attribute name in the first list that has it: a string value as
// is, any other value as its OTLP/JSON AnyValue; nil when no list has it.
func keyOf(name string, lists ...[]*commonpb.KeyValue) []byte {
	for _, l := range lists {
		for _, kv := range l {
			if kv.GetKey() != name {
				continue
			}
			if s, ok := kv.GetValue().GetValue().(*commonpb.AnyValue_StringValue); ok {
				return []byte(s.StringValue)
			}
			return AppendAnyValue(nil, kv.GetValue())
		}
	}
	return nil
}
