// Package otlplogs maps OTLP logs onto Loam records and decodes OTLP/JSON export requests.
//
// # Basics
//
// Map turns an ExportLogsServiceRequest (go.opentelemetry.io/proto/otlp) into one record
// per LogRecord:
//
//   - Value: one self-contained JSON object, the LogRecord in OTLP/JSON as the OTLP
//     specification defines it (lowerCamelCase field names; traceId and spanId as
//     lowercase hex, not base64; 64-bit integers as decimal strings; enums as integers;
//     fields at their default value left out), with two more members: "resource", the
//     record's Resource in OTLP/JSON (plus "schemaUrl" of its ResourceLogs when set), and
//     "scope", its InstrumentationScope (plus "schemaUrl" of its ScopeLogs when set). Each
//     is left out when empty. Members come in a fixed order, so equal records map to
//     equal bytes.
//   - Timestamp (milliseconds): time_unix_nano, else observed_time_unix_nano, else the
//     arrival time the caller passes.
//   - Key: empty (nil: the log node spreads keyless records round-robin) unless
//     Options.KeyAttribute names an attribute; then the value of that attribute, looked
//     up in the record's attributes, then the scope's, then the resource's. A string
//     value is the key as is; any other value is its OTLP/JSON AnyValue.
//   - Headers: otel.trace_id and otel.span_id (lowercase hex) when the record carries
//     them, otel.severity_number (decimal) when it is not 0, in that order.
//
// A record is rejected, and counted in Result.Rejected with a message naming it, when its
// trace id is neither empty nor 16 bytes, its span id neither empty nor 8 bytes, or its
// mapped key, value and headers together exceed Options.MaxRecordBytes. The others map
// as usual; the log node reports the rejected ones in partial_success.
//
// DecodeJSON decodes an OTLP/JSON ExportLogsServiceRequest by the same rules, which is
// where it differs from protojson: ids are hex (case-insensitive), 64-bit integers are
// accepted as strings or numbers, enums as integers (or, leniently, their names), unknown
// fields are ignored as the OTLP specification requires. DecodeProto is proto.Unmarshal
// with errors that say what was wrong.
//
// # Caveats
//
// Field names are matched as encoding/json matches them: case-insensitively, so
// "TimeUnixNano" is read as "timeUnixNano"; snake_case names ("time_unix_nano") are not
// OTLP/JSON and are ignored as unknown fields. The dictionary-index fields that only OTLP
// profiles use (string_value_strindex, key_strindex) are carried through as they are.
package otlplogs
