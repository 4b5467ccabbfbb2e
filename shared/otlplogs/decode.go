package otlplogs

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

// ErrMalformed is the error of a request that cannot be decoded; the wrapping error says
// what is wrong.
var ErrMalformed = errors.New("otlplogs: malformed request")

// DecodeProto decodes a protobuf ExportLogsServiceRequest.
func DecodeProto(body []byte) (*collogspb.ExportLogsServiceRequest, error) {
	req := &collogspb.ExportLogsServiceRequest{}
	if err := proto.Unmarshal(body, req); err != nil {
		return nil, fmt.Errorf("%w: not an OTLP ExportLogsServiceRequest in protobuf: %v", ErrMalformed, err)
	}
	return req, nil
}

// DecodeJSON decodes an OTLP/JSON ExportLogsServiceRequest (see the package comment for
// where OTLP/JSON differs from protojson).
func DecodeJSON(body []byte) (*collogspb.ExportLogsServiceRequest, error) {
	var in jsonRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&in); err != nil {
		return nil, jsonErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: invalid OTLP/JSON: unexpected data after the request object", ErrMalformed)
	}
	return in.proto(), nil
}

func jsonErr(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		fe  *fieldError
	)
	switch {
	case errors.As(err, &fe):
		return fmt.Errorf("%w: invalid OTLP/JSON: %s", ErrMalformed, fe.msg)
	case errors.As(err, &syn):
		return fmt.Errorf("%w: invalid JSON at byte %d: %v", ErrMalformed, syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the request"
		}
		return fmt.Errorf("%w: invalid OTLP/JSON: %s: got a JSON %s, want %s", ErrMalformed, field, typ.Value, jsonKind(typ.Type.String()))
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the request body is empty", ErrMalformed)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: invalid JSON: the body ends early", ErrMalformed)
	}
	return fmt.Errorf("%w: invalid OTLP/JSON: %v", ErrMalformed, err)
}

func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "string" || goType == "*string":
		return "a string"
	case goType == "bool" || goType == "*bool":
		return "a boolean"
	}
	return "an object"
}

// fieldError is a value a field cannot take.
type fieldError struct{ msg string }

func (e *fieldError) Error() string { return e.msg }

func badField(format string, args ...any) error {
	return &fieldError{msg: fmt.Sprintf(format, args...)}
}

type jsonRequest struct {
	ResourceLogs []*jsonResourceLogs `json:"resourceLogs"`
}

type jsonResourceLogs struct {
	Resource  *jsonResource    `json:"resource"`
	ScopeLogs []*jsonScopeLogs `json:"scopeLogs"`
	SchemaURL string           `json:"schemaUrl"`
}

type jsonResource struct {
	Attributes             []*jsonKeyValue  `json:"attributes"`
	DroppedAttributesCount u32Field         `json:"droppedAttributesCount"`
	EntityRefs             []*jsonEntityRef `json:"entityRefs"`
}

type jsonEntityRef struct {
	SchemaURL       string   `json:"schemaUrl"`
	Type            string   `json:"type"`
	IDKeys          []string `json:"idKeys"`
	DescriptionKeys []string `json:"descriptionKeys"`
}

type jsonScopeLogs struct {
	Scope      *jsonScope       `json:"scope"`
	LogRecords []*jsonLogRecord `json:"logRecords"`
	SchemaURL  string           `json:"schemaUrl"`
}

type jsonScope struct {
	Name                   string          `json:"name"`
	Version                string          `json:"version"`
	Attributes             []*jsonKeyValue `json:"attributes"`
	DroppedAttributesCount u32Field        `json:"droppedAttributesCount"`
}

type jsonLogRecord struct {
	TimeUnixNano           uintField       `json:"timeUnixNano"`
	ObservedTimeUnixNano   uintField       `json:"observedTimeUnixNano"`
	SeverityNumber         severityField   `json:"severityNumber"`
	SeverityText           string          `json:"severityText"`
	Body                   *jsonAnyValue   `json:"body"`
	Attributes             []*jsonKeyValue `json:"attributes"`
	DroppedAttributesCount u32Field        `json:"droppedAttributesCount"`
	Flags                  u32Field        `json:"flags"`
	TraceID                hexField        `json:"traceId"`
	SpanID                 hexField        `json:"spanId"`
	EventName              string          `json:"eventName"`
}

type jsonKeyValue struct {
	Key         string        `json:"key"`
	Value       *jsonAnyValue `json:"value"`
	KeyStrindex intField      `json:"keyStrindex"`
}

type jsonAnyValue struct {
	StringValue         *string      `json:"stringValue"`
	BoolValue           *bool        `json:"boolValue"`
	IntValue            *intField    `json:"intValue"`
	DoubleValue         *doubleField `json:"doubleValue"`
	ArrayValue          *jsonValues  `json:"arrayValue"`
	KvlistValue         *jsonKVList  `json:"kvlistValue"`
	BytesValue          *[]byte      `json:"bytesValue"`
	StringValueStrindex *intField    `json:"stringValueStrindex"`
}

type jsonValues struct {
	Values []*jsonAnyValue `json:"values"`
}

type jsonKVList struct {
	Values []*jsonKeyValue `json:"values"`
}

// uintField is an unsigned integer given as a JSON number or a decimal string.
type uintField struct{ v uint64 }

func (f *uintField) UnmarshalJSON(b []byte) error {
	s, ok := numberText(b)
	if !ok {
		return nil // null
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		if fv, ferr := strconv.ParseFloat(s, 64); ferr == nil && fv >= 0 && fv == math.Trunc(fv) && fv < 1<<64 {
			f.v = uint64(fv) // 1e9 and the like: an integer in exponent form
			return nil
		}
		return badField("%s is not an unsigned integer", b)
	}
	f.v = v
	return nil
}

// u32Field is an unsigned 32-bit integer given as a JSON number or a decimal string.
type u32Field struct{ v uint32 }

func (f *u32Field) UnmarshalJSON(b []byte) error {
	var u uintField
	if err := u.UnmarshalJSON(b); err != nil {
		return err
	}
	if u.v > math.MaxUint32 {
		return badField("%s is over the 32-bit limit of %d", b, uint32(math.MaxUint32))
	}
	f.v = uint32(u.v)
	return nil
}

// intField is a signed integer given as a JSON number or a decimal string.
type intField struct{ v int64 }

func (f *intField) UnmarshalJSON(b []byte) error {
	s, ok := numberText(b)
	if !ok {
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if fv, ferr := strconv.ParseFloat(s, 64); ferr == nil && fv == math.Trunc(fv) && fv >= -(1<<63) && fv < 1<<63 {
			f.v = int64(fv)
			return nil
		}
		return badField("%s is not an integer", b)
	}
	f.v = v
	return nil
}

// doubleField is a number, a numeric string, or "NaN", "Infinity", "-Infinity".
type doubleField struct{ v float64 }

func (f *doubleField) UnmarshalJSON(b []byte) error {
	s, ok := numberText(b)
	if !ok {
		return nil
	}
	switch s {
	case "NaN":
		f.v = math.NaN()
		return nil
	case "Infinity":
		f.v = math.Inf(1)
		return nil
	case "-Infinity":
		f.v = math.Inf(-1)
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return badField("doubleValue %s is not a number", b)
	}
	f.v = v
	return nil
}

// severityField is a SeverityNumber: an integer (OTLP/JSON), or leniently its name.
type severityField struct{ v int32 }

func (f *severityField) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return badField("severityNumber %s is not an integer", b)
		}
		if v, ok := logspb.SeverityNumber_value[name]; ok {
			f.v = v
			return nil
		}
		if v, err := strconv.ParseInt(name, 10, 32); err == nil {
			f.v = int32(v)
			return nil
		}
		return badField("severityNumber %s is neither an integer nor a SeverityNumber name", b)
	}
	if string(b) == "null" {
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil {
		return badField("severityNumber %s is not a 32-bit integer", b)
	}
	f.v = int32(v)
	return nil
}

// hexField is a trace or span id: a hex string (case-insensitive); "" is none.
type hexField struct{ v []byte }

func (f *hexField) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return badField("id %s is not a hex string", b)
	}
	if s == "" {
		return nil
	}
	v, err := hex.DecodeString(s)
	if err != nil {
		return badField("id %q is not hex (OTLP/JSON writes traceId and spanId in hex, not base64)", s)
	}
	f.v = v
	return nil
}

// numberText is the text of a JSON number or of a JSON string holding one; false for null.
func numberText(b []byte) (string, bool) {
	if string(b) == "null" {
		return "", false
	}
	if len(b) >= 2 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err == nil {
			return s, true
		}
	}
	return string(b), true
}

func (r *jsonRequest) proto() *collogspb.ExportLogsServiceRequest {
	out := &collogspb.ExportLogsServiceRequest{ResourceLogs: make([]*logspb.ResourceLogs, 0, len(r.ResourceLogs))}
	for _, rl := range r.ResourceLogs {
		if rl == nil {
			rl = &jsonResourceLogs{}
		}
		prl := &logspb.ResourceLogs{SchemaUrl: rl.SchemaURL}
		if res := rl.Resource; res != nil {
			prl.Resource = &resourcepb.Resource{Attributes: kvsProto(res.Attributes), DroppedAttributesCount: res.DroppedAttributesCount.v}
			for _, e := range res.EntityRefs {
				if e == nil {
					e = &jsonEntityRef{}
				}
				prl.Resource.EntityRefs = append(prl.Resource.EntityRefs, &commonpb.EntityRef{SchemaUrl: e.SchemaURL, Type: e.Type, IdKeys: e.IDKeys, DescriptionKeys: e.DescriptionKeys})
			}
		}
		for _, sl := range rl.ScopeLogs {
			if sl == nil {
				sl = &jsonScopeLogs{}
			}
			psl := &logspb.ScopeLogs{SchemaUrl: sl.SchemaURL}
			if sc := sl.Scope; sc != nil {
				psl.Scope = &commonpb.InstrumentationScope{Name: sc.Name, Version: sc.Version, Attributes: kvsProto(sc.Attributes),
					DroppedAttributesCount: sc.DroppedAttributesCount.v}
			}
			psl.LogRecords = make([]*logspb.LogRecord, 0, len(sl.LogRecords))
			for _, lr := range sl.LogRecords {
				if lr == nil {
					lr = &jsonLogRecord{}
				}
				psl.LogRecords = append(psl.LogRecords, &logspb.LogRecord{
					TimeUnixNano: lr.TimeUnixNano.v, ObservedTimeUnixNano: lr.ObservedTimeUnixNano.v,
					SeverityNumber: logspb.SeverityNumber(lr.SeverityNumber.v), SeverityText: lr.SeverityText,
					Body: anyProto(lr.Body), Attributes: kvsProto(lr.Attributes), DroppedAttributesCount: lr.DroppedAttributesCount.v,
					Flags: lr.Flags.v, TraceId: lr.TraceID.v, SpanId: lr.SpanID.v, EventName: lr.EventName,
				})
			}
			prl.ScopeLogs = append(prl.ScopeLogs, psl)
		}
		out.ResourceLogs = append(out.ResourceLogs, prl)
	}
	return out
}

func kvsProto(in []*jsonKeyValue) []*commonpb.KeyValue {
	if len(in) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(in))
	for _, kv := range in {
		if kv == nil {
			kv = &jsonKeyValue{}
		}
		out = append(out, &commonpb.KeyValue{Key: kv.Key, Value: anyProto(kv.Value), KeyStrindex: int32(kv.KeyStrindex.v)})
	}
	return out
}

// anyProto converts an AnyValue; with several values set, the first in proto field order
// wins (protojson refuses such input; OTLP receivers must be lenient).
func anyProto(v *jsonAnyValue) *commonpb.AnyValue {
	if v == nil {
		return nil
	}
	out := &commonpb.AnyValue{}
	switch {
	case v.StringValue != nil:
		out.Value = &commonpb.AnyValue_StringValue{StringValue: *v.StringValue}
	case v.BoolValue != nil:
		out.Value = &commonpb.AnyValue_BoolValue{BoolValue: *v.BoolValue}
	case v.IntValue != nil:
		out.Value = &commonpb.AnyValue_IntValue{IntValue: v.IntValue.v}
	case v.DoubleValue != nil:
		out.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: v.DoubleValue.v}
	case v.ArrayValue != nil:
		arr := &commonpb.ArrayValue{}
		for _, e := range v.ArrayValue.Values {
			if e == nil {
				e = &jsonAnyValue{}
			}
			arr.Values = append(arr.Values, anyProto(e))
		}
		out.Value = &commonpb.AnyValue_ArrayValue{ArrayValue: arr}
	case v.KvlistValue != nil:
		out.Value = &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvsProto(v.KvlistValue.Values)}}
	case v.BytesValue != nil:
		out.Value = &commonpb.AnyValue_BytesValue{BytesValue: *v.BytesValue}
	case v.StringValueStrindex != nil:
		out.Value = &commonpb.AnyValue_StringValueStrindex{StringValueStrindex: int32(v.StringValueStrindex.v)}
	}
	return out
}
