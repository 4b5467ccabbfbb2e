package streamapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrInvalidRecord reports a record that carries a field both as text and as base64.
var ErrInvalidRecord = errors.New("streamapi: invalid record")

// JSONValue returns a record whose value is v marshalled to JSON (without HTML escaping).
func JSONValue(v any) (Record, error) {
	b, err := marshalJSON(v)
	if err != nil {
		return Record{}, fmt.Errorf("streamapi: json value: %w", err)
	}
	return Record{Value: json.RawMessage(b)}, nil
}

// BytesValue returns a record whose value is b, sent as value_base64 whatever b holds. A
// nil b is an empty value, not a tombstone (a tombstone is a Record with no value field).
func BytesValue(b []byte) Record {
	v := make([]byte, len(b))
	copy(v, b)
	return Record{ValueBase64: v}
}

// AutoValue returns a record whose value is b: sent as value when b is valid UTF-8 JSON,
// else as value_base64. This is the rule fetch applies to stored bytes. Produce sends the
// JSON text verbatim, so it is stored byte for byte, except that whitespace around it is
// dropped; b = "null" is a tombstone (see the package Caveats).
func AutoValue(b []byte) Record {
	if isJSONText(b) {
		v := make([]byte, len(b))
		copy(v, b)
		return Record{Value: json.RawMessage(v)}
	}
	return BytesValue(b)
}

// SetKey sets the record's key to k: as key when k is valid UTF-8, else as key_base64. A
// nil k clears the key (a null key); an empty non-nil k is the empty key.
func (r *Record) SetKey(k []byte) {
	r.Key, r.KeyBase64 = nil, nil
	switch {
	case k == nil:
	case utf8.Valid(k):
		s := string(k)
		r.Key = &s
	default:
		r.KeyBase64 = bytes.Clone(k)
	}
}

// Bytes returns the record's value bytes: the JSON text of value, or the decoded
// value_base64. A tombstone (neither field, or "value": null) returns nil, nil; an empty
// value returns an empty, non-nil slice. A record with both fails with ErrInvalidRecord.
func (r Record) Bytes() ([]byte, error) {
	switch {
	case r.Value != nil && r.ValueBase64 != nil:
		return nil, fmt.Errorf("streamapi: record value: both value and value_base64: %w", ErrInvalidRecord)
	case r.ValueBase64 != nil:
		return r.ValueBase64, nil
	case r.Value != nil && !isNull(r.Value):
		return []byte(r.Value), nil
	}
	return nil, nil
}

// KeyBytes returns the record's key bytes: key as UTF-8, or the decoded key_base64. A
// record with neither (a null key) returns nil, nil. A record with both fails with
// ErrInvalidRecord.
func (r Record) KeyBytes() ([]byte, error) {
	switch {
	case r.Key != nil && r.KeyBase64 != nil:
		return nil, fmt.Errorf("streamapi: record key: both key and key_base64: %w", ErrInvalidRecord)
	case r.KeyBase64 != nil:
		return r.KeyBase64, nil
	case r.Key != nil:
		return []byte(*r.Key), nil
	}
	return nil, nil
}

// IsTombstone reports whether the record has a null value: no value field, or
// "value": null.
func (r Record) IsTombstone() bool {
	return r.ValueBase64 == nil && (r.Value == nil || isNull(r.Value))
}

// isNull reports whether v is the JSON literal null.
func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// isJSONText reports whether b is one valid JSON text in valid UTF-8.
func isJSONText(b []byte) bool { return utf8.Valid(b) && json.Valid(b) }

// FetchAsJSON reports whether a fetch answers stored value bytes b in "value" (else in
// "value_base64"): b is one JSON text in valid UTF-8, without whitespace around it, and not
// the literal null. Those are the bytes a JSON decoder hands back unchanged from "value",
// so either way the answer is valid JSON and carries b exactly. json.Valid alone is not
// enough: it accepts invalid UTF-8 inside strings.
func FetchAsJSON(b []byte) bool {
	if len(b) == 0 || isSpace(b[0]) || isSpace(b[len(b)-1]) || string(b) == "null" {
		return false
	}
	return isJSONText(b)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// marshalJSON is json.Marshal without HTML escaping and without the trailing newline.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// AppendRecordJSON appends r as one JSON object, its value's JSON text verbatim (without
// the whitespace around it): encoding/json would compact the text and escape HTML in it,
// while the server stores and returns the text byte for byte. Other fields are encoded as
// encoding/json does, without HTML escaping. A Value that is not valid JSON fails with
// ErrInvalidRecord.
func AppendRecordJSON(dst []byte, r Record) ([]byte, error) {
	v := r.Value
	r.Value = nil
	b, err := marshalJSON(r)
	if err != nil {
		return dst, err
	}
	if v == nil {
		return append(dst, b...), nil
	}
	if !json.Valid(v) {
		return dst, fmt.Errorf("streamapi: record value is not valid JSON: %w", ErrInvalidRecord)
	}
	dst = append(dst, b[:len(b)-1]...) // without its closing brace
	if len(b) > 2 {
		dst = append(dst, ',')
	}
	dst = append(dst, `"value":`...)
	dst = append(dst, bytes.TrimSpace(v)...)
	return append(dst, '}'), nil
}

// appendProduceBody appends the produce request {"records": [...]} for recs, each value's
// JSON text verbatim (AppendRecordJSON).
func appendProduceBody(dst []byte, recs []Record) ([]byte, error) {
	dst = append(dst, `{"records":[`...)
	for i, r := range recs {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = AppendRecordJSON(dst, r); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	return append(dst, "]}"...), nil
}
