package cloudevents

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/loamhq/loam/shared/jsonenc"
)

var b64 = base64.StdEncoding

// DecodeJSON decodes one event in structured JSON (application/cloudevents+json) and
// validates it.
func DecodeJSON(b []byte) (*Event, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	e, err := decodeObject(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Index: -1, Msg: "unexpected data after the event object"}
	}
	return e, nil
}

// DecodeBatchJSON decodes a JSON array of structured events
// (application/cloudevents-batch+json), all valid or none: the error names the index.
func DecodeBatchJSON(b []byte) ([]*Event, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return nil, syntaxErr(-1, err)
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return nil, &Error{Index: -1, Msg: "a batch is a JSON array of events"}
	}
	var out []*Event
	for dec.More() {
		e, err := decodeObject(dec)
		if err != nil {
			return nil, atIndex(err, len(out))
		}
		out = append(out, e)
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntaxErr(-1, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Index: -1, Msg: "unexpected data after the batch array"}
	}
	return out, nil
}

func syntaxErr(i int, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return &Error{Index: i, Msg: "invalid JSON: " + err.Error()}
}

// decodeObject reads one JSON object from dec as an event and validates it.
func decodeObject(dec *json.Decoder) (*Event, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, syntaxErr(-1, err)
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, &Error{Index: -1, Msg: "an event is a JSON object"}
	}
	e := &Event{}
	var data, data64 json.RawMessage
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, syntaxErr(-1, err)
		}
		name := t.(string) // object keys are strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, syntaxErr(-1, err)
		}
		if seen[name] {
			return nil, attrErr(name, "appears twice")
		}
		seen[name] = true
		switch name {
		case "data":
			data = raw
			continue
		case "data_base64":
			data64 = raw
			continue
		}
		if !ValidName(name) {
			return nil, attrErr(name, "the name is not 1 or more lowercase ASCII letters and digits")
		}
		if string(raw) == "null" {
			continue // a null attribute is an absent one
		}
		a := Attr{Name: name}
		switch raw[0] {
		case '"':
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, attrErr(name, "invalid JSON string: %v", err)
			}
			a.Value = s
		case 't', 'f':
			if IsContext(name) {
				return nil, attrErr(name, "got a JSON boolean, want a string")
			}
			a.Value, a.Type = string(raw), Boolean
		case '{', '[':
			if IsContext(name) {
				return nil, attrErr(name, "got a JSON %s, want a string", jsonKind(raw[0]))
			}
			return nil, attrErr(name, "got a JSON %s: an extension is a string, number or boolean", jsonKind(raw[0]))
		default: // a number
			if IsContext(name) {
				return nil, attrErr(name, "got a JSON number, want a string")
			}
			f, err := strconv.ParseFloat(string(raw), 64)
			if err != nil || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
				return nil, attrErr(name, "the JSON number %s is not a CloudEvents Integer (a whole number in the 32-bit range)", raw)
			}
			a.Value, a.Type = strconv.FormatInt(int64(f), 10), Integer
		}
		e.Attrs = append(e.Attrs, a)
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, syntaxErr(-1, err)
	}
	if data != nil && data64 != nil {
		return nil, attrErr("data_base64", "an event cannot have both data and data_base64")
	}
	switch {
	case data64 != nil && string(data64) != "null":
		var s string
		if err := json.Unmarshal(data64, &s); err != nil {
			return nil, attrErr("data_base64", "got a JSON %s, want a base64 string", jsonKind(data64[0]))
		}
		d, err := b64.DecodeString(s)
		if err != nil {
			return nil, attrErr("data_base64", "not base64: %v", err)
		}
		e.Data, e.HasData = d, true
	case data != nil && string(data) != "null":
		ct, hasCT := e.Get(AttrDataContentType)
		e.HasData = true
		if hasCT && !IsJSONMedia(ct) && data[0] == '"' {
			var s string
			if err := json.Unmarshal(data, &s); err != nil {
				return nil, attrErr("data", "invalid JSON string: %v", err)
			}
			e.Data = []byte(s)
		} else {
			e.Data = bytes.Clone(data)
		}
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e, nil
}

func jsonKind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// AppendJSON appends e in structured JSON: its attributes in order (typed extensions as
// JSON numbers and booleans, everything else as strings), then its data: the JSON text
// itself when the content type is JSON or absent and the data is valid JSON, a string
// when the content type is text and the data is UTF-8, else data_base64.
func AppendJSON(dst []byte, e *Event) []byte {
	dst = append(dst, '{')
	for i, a := range e.Attrs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, a.Name)
		dst = append(dst, ':')
		switch a.Type {
		case Integer, Boolean:
			dst = append(dst, a.Value...)
		default:
			dst = appendJSONString(dst, a.Value)
		}
	}
	if e.HasData {
		if len(e.Attrs) > 0 {
			dst = append(dst, ',')
		}
		ct, hasCT := e.Get(AttrDataContentType)
		switch {
		case (!hasCT || IsJSONMedia(ct)) && len(e.Data) > 0 && json.Valid(e.Data):
			dst = append(dst, `"data":`...)
			dst = append(dst, e.Data...) // valid JSON text, kept byte for byte
		case hasCT && isTextMedia(ct) && utf8.Valid(e.Data):
			dst = append(dst, `"data":`...)
			dst = appendJSONString(dst, string(e.Data))
		default:
			dst = append(dst, `"data_base64":"`...)
			dst = b64.AppendEncode(dst, e.Data)
			dst = append(dst, '"')
		}
	}
	return append(dst, '}')
}

// AppendBatchJSON appends events as a batch: a JSON array of structured events.
func AppendBatchJSON(dst []byte, events []*Event) []byte {
	dst = append(dst, '[')
	for i, e := range events {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSON(dst, e)
	}
	return append(dst, ']')
}

// appendJSONString appends s as a JSON string (jsonenc.AppendString).
func appendJSONString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s) }
