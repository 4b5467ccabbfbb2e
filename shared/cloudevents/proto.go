package cloudevents

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The protobuf format (CloudEvents' cloudevents.proto, package io.cloudevents.v1),
// hand-coded on the wire:
//
//	message CloudEvent {
//	  string id = 1; string source = 2; string spec_version = 3; string type = 4;
//	  map<string, CloudEventAttributeValue> attributes = 5;
//	  oneof data { bytes binary_data = 6; string text_data = 7; google.protobuf.Any proto_data = 8; }
//	}
//	message CloudEventAttributeValue { oneof attr {
//	  bool ce_boolean = 1; int32 ce_integer = 2; string ce_string = 3; bytes ce_bytes = 4;
//	  string ce_uri = 5; string ce_uri_ref = 6; google.protobuf.Timestamp ce_timestamp = 7; } }
//	message CloudEventBatch { repeated CloudEvent events = 1; }
//
// Fields are written in the event's attribute order (protobuf allows any order) and read
// in wire order, so order round-trips. time is ce_timestamp and dataschema ce_uri; the
// other optional context attributes are ce_string.

const (
	fID, fSource, fSpec, fType, fAttrs, fBinary, fText, fProtoData = 1, 2, 3, 4, 5, 6, 7, 8
)

// attribute value cases
const (
	vBool, vInt, vString, vBytes, vURI, vURIRef, vTime = 1, 2, 3, 4, 5, 6, 7
)

// DecodeProto decodes one event in the protobuf format and validates it.
func DecodeProto(b []byte) (*Event, error) {
	e, err := decodeProto(b)
	if err != nil {
		return nil, err
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e, nil
}

// DecodeBatchProto decodes a CloudEventBatch, all valid or none: the error names the index.
func DecodeBatchProto(b []byte) ([]*Event, error) {
	var out []*Event
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protoErr(-1, "batch", protowire.ParseError(n))
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, protoErr(len(out), "event", protowire.ParseError(n))
			}
			b = b[n:]
			e, err := DecodeProto(v)
			if err != nil {
				return nil, atIndex(err, len(out))
			}
			out = append(out, e)
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, protoErr(-1, "batch", protowire.ParseError(n))
		}
		b = b[n:]
	}
	return out, nil
}

func protoErr(i int, what string, err error) error {
	return &Error{Index: i, Msg: fmt.Sprintf("invalid protobuf %s: %v", what, err)}
}

func decodeProto(b []byte) (*Event, error) {
	e := &Event{}
	seen := map[string]bool{}
	add := func(a Attr) error {
		if seen[a.Name] {
			return attrErr(a.Name, "appears twice")
		}
		seen[a.Name] = true
		e.Attrs = append(e.Attrs, a)
		return nil
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protoErr(-1, "event", protowire.ParseError(n))
		}
		b = b[n:]
		if num >= fID && num <= fProtoData && typ != protowire.BytesType {
			return nil, &Error{Index: -1, Msg: fmt.Sprintf("invalid protobuf event: field %d has wire type %d, want bytes", num, typ)}
		}
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, protoErr(-1, "event", protowire.ParseError(n))
		}
		b = b[n:]
		var err error
		switch num {
		case fID, fSource, fSpec, fType:
			name := [...]string{fID: AttrID, fSource: AttrSource, fSpec: AttrSpecVersion, fType: AttrType}[num]
			if !utf8.Valid(v) {
				return nil, attrErr(name, "is not UTF-8")
			}
			err = add(Attr{Name: name, Value: string(v)})
		case fAttrs:
			var a Attr
			if a, err = decodeProtoAttr(v); err == nil {
				err = add(a)
			}
		case fBinary, fText:
			if e.HasData {
				return nil, attrErr("data", "the event has two data fields")
			}
			e.Data, e.HasData = append([]byte{}, v...), true
		case fProtoData:
			return nil, attrErr("data", "proto_data (google.protobuf.Any) is not supported: send binary_data or text_data")
		}
		if err != nil {
			return nil, err
		}
	}
	return e, nil
}

// decodeProtoAttr decodes one map entry of attributes.
func decodeProtoAttr(b []byte) (Attr, error) {
	var name string
	var val []byte
	hasVal := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Attr{}, protoErr(-1, "attribute", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return Attr{}, protoErr(-1, "attribute", protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return Attr{}, protoErr(-1, "attribute", protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case 1:
			name = string(v)
		case 2:
			val, hasVal = v, true
		}
	}
	if !utf8.ValidString(name) || !ValidName(name) {
		return Attr{}, attrErr(name, "the name is not 1 or more lowercase ASCII letters and digits")
	}
	switch name {
	case AttrID, AttrSource, AttrSpecVersion, AttrType:
		return Attr{}, attrErr(name, "must be its own field, not an entry of attributes")
	}
	if !hasVal {
		return Attr{}, attrErr(name, "has no value")
	}
	a := Attr{Name: name}
	var kind protowire.Number
	for len(val) > 0 {
		num, typ, n := protowire.ConsumeTag(val)
		if n < 0 {
			return Attr{}, protoErr(-1, "attribute value", protowire.ParseError(n))
		}
		val = val[n:]
		kind = num
		switch {
		case (num == vBool || num == vInt) && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(val)
			if n < 0 {
				return Attr{}, protoErr(-1, "attribute value", protowire.ParseError(n))
			}
			val = val[n:]
			if num == vBool {
				a.Value, a.Type = strconv.FormatBool(x != 0), Boolean
			} else {
				a.Value, a.Type = strconv.FormatInt(int64(int32(x)), 10), Integer
			}
		case num >= vString && num <= vTime && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(val)
			if n < 0 {
				return Attr{}, protoErr(-1, "attribute value", protowire.ParseError(n))
			}
			val = val[n:]
			switch num {
			case vBytes:
				a.Value, a.Type = b64.EncodeToString(v), Binary
			case vTime:
				ts, err := decodeTimestamp(v)
				if err != nil {
					return Attr{}, attrErr(name, "%v", err)
				}
				a.Value, a.Type = ts, Timestamp
			default:
				if !utf8.Valid(v) {
					return Attr{}, attrErr(name, "is not UTF-8")
				}
				a.Value = string(v)
				a.Type = map[protowire.Number]Type{vString: String, vURI: URI, vURIRef: URIRef}[num]
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, val)
			if n < 0 {
				return Attr{}, protoErr(-1, "attribute value", protowire.ParseError(n))
			}
			val = val[n:]
			kind = 0
		}
	}
	if kind == 0 {
		return Attr{}, attrErr(name, "has no value")
	}
	if IsContext(name) {
		// time is ce_timestamp, dataschema ce_uri; a ce_string is taken for either (and
		// checked as every value is); the other context attributes are ce_string.
		want := map[string]Type{AttrTime: Timestamp, AttrDataSchema: URI}[name]
		if a.Type != String && a.Type != want {
			return Attr{}, attrErr(name, "has the wrong protobuf type %s, want %s", a.Type, want)
		}
		a.Type = String // context attributes are plain strings in an Event
	}
	return a, nil
}

func decodeTimestamp(b []byte) (string, error) {
	var secs, nanos int64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", fmt.Errorf("invalid protobuf timestamp: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.VarintType && (num == 1 || num == 2) {
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return "", fmt.Errorf("invalid protobuf timestamp: %v", protowire.ParseError(n))
			}
			b = b[n:]
			if num == 1 {
				secs = int64(x)
			} else {
				nanos = int64(int32(x))
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return "", fmt.Errorf("invalid protobuf timestamp: %v", protowire.ParseError(n))
		}
		b = b[n:]
	}
	// google.protobuf.Timestamp's range: 0001-01-01 to 9999-12-31.
	if secs < -62135596800 || secs > 253402300799 || nanos < 0 || nanos > 999999999 {
		return "", fmt.Errorf("timestamp %d s %d ns is out of range", secs, nanos)
	}
	return time.Unix(secs, nanos).UTC().Format(time.RFC3339Nano), nil
}

// AppendProto appends e in the protobuf format. Data goes as text_data when the content
// type is text or JSON (or absent and the data JSON) and the data UTF-8, else binary_data.
func AppendProto(dst []byte, e *Event) []byte {
	for _, a := range e.Attrs {
		switch a.Name {
		case AttrID, AttrSource, AttrSpecVersion, AttrType:
			num := map[string]protowire.Number{AttrID: fID, AttrSource: fSource, AttrSpecVersion: fSpec, AttrType: fType}[a.Name]
			dst = protowire.AppendTag(dst, num, protowire.BytesType)
			dst = protowire.AppendString(dst, a.Value)
			continue
		}
		t := a.Type
		switch a.Name {
		case AttrTime:
			t = Timestamp
		case AttrDataSchema:
			t = URI
		}
		v := appendProtoValue(nil, a.Value, t)
		entry := protowire.AppendTag(nil, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, a.Name)
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendBytes(entry, v)
		dst = protowire.AppendTag(dst, fAttrs, protowire.BytesType)
		dst = protowire.AppendBytes(dst, entry)
	}
	if e.HasData {
		ct, hasCT := e.Get(AttrDataContentType)
		text := utf8.Valid(e.Data) && (hasCT && (isTextMedia(ct) || IsJSONMedia(ct)) || !hasCT && len(e.Data) > 0 && json.Valid(e.Data))
		num := protowire.Number(fBinary)
		if text {
			num = fText
		}
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		dst = protowire.AppendBytes(dst, e.Data)
	}
	return dst
}

// appendProtoValue appends a CloudEventAttributeValue of value v (canonical form of t).
func appendProtoValue(dst []byte, v string, t Type) []byte {
	switch t {
	case Boolean:
		dst = protowire.AppendTag(dst, vBool, protowire.VarintType)
		return protowire.AppendVarint(dst, protowire.EncodeBool(v == "true"))
	case Integer:
		x, _ := strconv.ParseInt(v, 10, 32)
		dst = protowire.AppendTag(dst, vInt, protowire.VarintType)
		return protowire.AppendVarint(dst, uint64(x))
	case Binary:
		b, _ := b64.DecodeString(v)
		dst = protowire.AppendTag(dst, vBytes, protowire.BytesType)
		return protowire.AppendBytes(dst, b)
	case URI, URIRef:
		dst = protowire.AppendTag(dst, map[Type]protowire.Number{URI: vURI, URIRef: vURIRef}[t], protowire.BytesType)
		return protowire.AppendString(dst, v)
	case Timestamp:
		ts, err := time.Parse(time.RFC3339Nano, normalizeTime(v))
		if err != nil {
			break // not representable: sent as a string
		}
		var m []byte
		if s := ts.Unix(); s != 0 {
			m = protowire.AppendTag(m, 1, protowire.VarintType)
			m = protowire.AppendVarint(m, uint64(s))
		}
		if n := ts.Nanosecond(); n != 0 {
			m = protowire.AppendTag(m, 2, protowire.VarintType)
			m = protowire.AppendVarint(m, uint64(n))
		}
		dst = protowire.AppendTag(dst, vTime, protowire.BytesType)
		return protowire.AppendBytes(dst, m)
	}
	dst = protowire.AppendTag(dst, vString, protowire.BytesType)
	return protowire.AppendString(dst, v)
}

// normalizeTime uppercases the T and Z of an RFC 3339 string for time.Parse.
func normalizeTime(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == 't' || c == 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// AppendBatchProto appends events as a CloudEventBatch.
func AppendBatchProto(dst []byte, events []*Event) []byte {
	for _, e := range events {
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendBytes(dst, AppendProto(nil, e))
	}
	return dst
}
