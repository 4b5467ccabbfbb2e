package otlplogs

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"

	"github.com/loamhq/loam/shared/jsonenc"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
)

// OTLP/JSON appenders. Each writes the message in OTLP/JSON, fields in proto field order
// (except where noted), default values left out.

// AppendLogRecord appends lr in OTLP/JSON, with resource and scope (already OTLP/JSON
// objects, or empty to leave them out) as its last members.
func AppendLogRecord(dst []byte, lr *logspb.LogRecord, resource, scope []byte) []byte {
	dst = append(dst, '{')
	n := 0
	field := func(name string) {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, `":`...)
	}
	if v := lr.GetTimeUnixNano(); v != 0 {
		field("timeUnixNano")
		dst = appendQuotedUint(dst, v)
	}
	if v := lr.GetObservedTimeUnixNano(); v != 0 {
		field("observedTimeUnixNano")
		dst = appendQuotedUint(dst, v)
	}
	if v := lr.GetSeverityNumber(); v != 0 {
		field("severityNumber")
		dst = strconv.AppendInt(dst, int64(v), 10)
	}
	if v := lr.GetSeverityText(); v != "" {
		field("severityText")
		dst = appendString(dst, v)
	}
	if lr.GetBody() != nil {
		field("body")
		dst = AppendAnyValue(dst, lr.GetBody())
	}
	if len(lr.GetAttributes()) > 0 {
		field("attributes")
		dst = appendKeyValues(dst, lr.GetAttributes())
	}
	if v := lr.GetDroppedAttributesCount(); v != 0 {
		field("droppedAttributesCount")
		dst = strconv.AppendUint(dst, uint64(v), 10)
	}
	if v := lr.GetFlags(); v != 0 {
		field("flags")
		dst = strconv.AppendUint(dst, uint64(v), 10)
	}
	if v := lr.GetTraceId(); len(v) > 0 {
		field("traceId")
		dst = appendHex(dst, v)
	}
	if v := lr.GetSpanId(); len(v) > 0 {
		field("spanId")
		dst = appendHex(dst, v)
	}
	if v := lr.GetEventName(); v != "" {
		field("eventName")
		dst = appendString(dst, v)
	}
	if len(resource) > 0 {
		field("resource")
		dst = append(dst, resource...)
	}
	if len(scope) > 0 {
		field("scope")
		dst = append(dst, scope...)
	}
	return append(dst, '}')
}

// AppendResource appends r in OTLP/JSON with schemaURL (the ResourceLogs' schema_url) as a
// "schemaUrl" member when set. It appends nothing when all of them are empty.
func AppendResource(dst []byte, r *resourcepb.Resource, schemaURL string) []byte {
	if len(r.GetAttributes()) == 0 && r.GetDroppedAttributesCount() == 0 && len(r.GetEntityRefs()) == 0 && schemaURL == "" {
		return dst
	}
	dst = append(dst, '{')
	sep := false
	if len(r.GetAttributes()) > 0 {
		dst = append(dst, `"attributes":`...)
		dst = appendKeyValues(dst, r.GetAttributes())
		sep = true
	}
	if v := r.GetDroppedAttributesCount(); v != 0 {
		dst = comma(dst, sep)
		dst = append(dst, `"droppedAttributesCount":`...)
		dst = strconv.AppendUint(dst, uint64(v), 10)
		sep = true
	}
	if refs := r.GetEntityRefs(); len(refs) > 0 {
		dst = comma(dst, sep)
		dst = append(dst, `"entityRefs":[`...)
		for i, e := range refs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendEntityRef(dst, e)
		}
		dst = append(dst, ']')
		sep = true
	}
	if schemaURL != "" {
		dst = comma(dst, sep)
		dst = append(dst, `"schemaUrl":`...)
		dst = appendString(dst, schemaURL)
	}
	return append(dst, '}')
}

func appendEntityRef(dst []byte, e *commonpb.EntityRef) []byte {
	dst = append(dst, '{')
	sep := false
	str := func(name, v string) {
		if v == "" {
			return
		}
		dst = comma(dst, sep)
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, `":`...)
		dst = appendString(dst, v)
		sep = true
	}
	list := func(name string, vs []string) {
		if len(vs) == 0 {
			return
		}
		dst = comma(dst, sep)
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, `":[`...)
		for i, v := range vs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, v)
		}
		dst = append(dst, ']')
		sep = true
	}
	str("schemaUrl", e.GetSchemaUrl())
	str("type", e.GetType())
	list("idKeys", e.GetIdKeys())
	list("descriptionKeys", e.GetDescriptionKeys())
	return append(dst, '}')
}

// AppendScope appends s in OTLP/JSON with schemaURL (the ScopeLogs' schema_url) as a
// "schemaUrl" member when set. It appends nothing when all of them are empty.
func AppendScope(dst []byte, s *commonpb.InstrumentationScope, schemaURL string) []byte {
	if s.GetName() == "" && s.GetVersion() == "" && len(s.GetAttributes()) == 0 && s.GetDroppedAttributesCount() == 0 && schemaURL == "" {
		return dst
	}
	dst = append(dst, '{')
	sep := false
	if v := s.GetName(); v != "" {
		dst = append(dst, `"name":`...)
		dst = appendString(dst, v)
		sep = true
	}
	if v := s.GetVersion(); v != "" {
		dst = comma(dst, sep)
		dst = append(dst, `"version":`...)
		dst = appendString(dst, v)
		sep = true
	}
	if len(s.GetAttributes()) > 0 {
		dst = comma(dst, sep)
		dst = append(dst, `"attributes":`...)
		dst = appendKeyValues(dst, s.GetAttributes())
		sep = true
	}
	if v := s.GetDroppedAttributesCount(); v != 0 {
		dst = comma(dst, sep)
		dst = append(dst, `"droppedAttributesCount":`...)
		dst = strconv.AppendUint(dst, uint64(v), 10)
		sep = true
	}
	if schemaURL != "" {
		dst = comma(dst, sep)
		dst = append(dst, `"schemaUrl":`...)
		dst = appendString(dst, schemaURL)
	}
	return append(dst, '}')
}

// AppendAnyValue appends v in OTLP/JSON: {"stringValue": "…"}, {"intValue": "42"}, …;
// an AnyValue with no value set is {}.
func AppendAnyValue(dst []byte, v *commonpb.AnyValue) []byte {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		dst = append(dst, `{"stringValue":`...)
		dst = appendString(dst, x.StringValue)
	case *commonpb.AnyValue_BoolValue:
		dst = append(dst, `{"boolValue":`...)
		dst = strconv.AppendBool(dst, x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		dst = append(dst, `{"intValue":"`...)
		dst = strconv.AppendInt(dst, x.IntValue, 10)
		dst = append(dst, '"')
	case *commonpb.AnyValue_DoubleValue:
		dst = append(dst, `{"doubleValue":`...)
		dst = appendDouble(dst, x.DoubleValue)
	case *commonpb.AnyValue_ArrayValue:
		dst = append(dst, `{"arrayValue":{`...)
		if vs := x.ArrayValue.GetValues(); len(vs) > 0 {
			dst = append(dst, `"values":[`...)
			for i, e := range vs {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = AppendAnyValue(dst, e)
			}
			dst = append(dst, ']')
		}
		dst = append(dst, '}')
	case *commonpb.AnyValue_KvlistValue:
		dst = append(dst, `{"kvlistValue":{`...)
		if kvs := x.KvlistValue.GetValues(); len(kvs) > 0 {
			dst = append(dst, `"values":`...)
			dst = appendKeyValues(dst, kvs)
		}
		dst = append(dst, '}')
	case *commonpb.AnyValue_BytesValue:
		dst = append(dst, `{"bytesValue":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, x.BytesValue)
		dst = append(dst, '"')
	case *commonpb.AnyValue_StringValueStrindex:
		dst = append(dst, `{"stringValueStrindex":`...)
		dst = strconv.AppendInt(dst, int64(x.StringValueStrindex), 10)
	default:
		dst = append(dst, '{')
	}
	return append(dst, '}')
}

func appendKeyValues(dst []byte, kvs []*commonpb.KeyValue) []byte {
	dst = append(dst, '[')
	for i, kv := range kvs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		sep := false
		if kv.GetKey() != "" {
			dst = append(dst, `"key":`...)
			dst = appendString(dst, kv.GetKey())
			sep = true
		}
		if kv.GetValue() != nil {
			dst = comma(dst, sep)
			dst = append(dst, `"value":`...)
			dst = AppendAnyValue(dst, kv.GetValue())
			sep = true
		}
		if kv.GetKeyStrindex() != 0 {
			dst = comma(dst, sep)
			dst = append(dst, `"keyStrindex":`...)
			dst = strconv.AppendInt(dst, int64(kv.GetKeyStrindex()), 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func comma(dst []byte, sep bool) []byte {
	if sep {
		return append(dst, ',')
	}
	return dst
}

func appendQuotedUint(dst []byte, v uint64) []byte {
	dst = append(dst, '"')
	dst = strconv.AppendUint(dst, v, 10)
	return append(dst, '"')
}

func appendHex(dst []byte, b []byte) []byte {
	dst = append(dst, '"')
	dst = hex.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendDouble writes a double as the proto3 JSON mapping does: a number, or the strings
// "NaN", "Infinity" and "-Infinity".
func appendDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

// appendString appends s as a JSON string (jsonenc.AppendString).
func appendString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s) }
