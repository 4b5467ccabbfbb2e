package streamapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Header is one record header as Kafka has it: a key (any bytes, usually UTF-8) and a
// value that may be null (nil) or empty (non-nil, zero length).
//
// Its JSON form is {"key": "k", "value": "v"}: the key as "key" when it is valid UTF-8,
// else as "key_base64"; the value as "value" when it is valid UTF-8, else as
// "value_base64"; a null value as "value": null (or no value field on input).
type Header struct {
	Key   string // raw key bytes
	Value []byte // nil: a null value
}

// Headers are a record's headers in order; a key may repeat. On input the JSON list form
// is read, and so is the older object form {"k": "v", …} (in the order written); output is
// always the list form.
type Headers []Header

// StringHeader returns the header key = value.
func StringHeader(key, value string) Header { return Header{Key: key, Value: []byte(value)} }

// Get returns the value of the first header named key as a string ("" when there is none
// or its value is null).
func (hs Headers) Get(key string) string {
	v, _ := hs.Lookup(key)
	return string(v)
}

// Lookup returns the value of the first header named key, and whether there is one.
func (hs Headers) Lookup(key string) ([]byte, bool) {
	for _, h := range hs {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// Equal reports whether hs and o hold the same headers in the same order, null values
// distinct from empty ones.
func (hs Headers) Equal(o Headers) bool {
	if len(hs) != len(o) {
		return false
	}
	for i := range hs {
		if hs[i].Key != o[i].Key || !bytes.Equal(hs[i].Value, o[i].Value) || (hs[i].Value == nil) != (o[i].Value == nil) {
			return false
		}
	}
	return true
}

// headerJSON is the wire form of one header.
type headerJSON struct {
	Key         *string         `json:"key,omitempty"`
	KeyBase64   []byte          `json:"key_base64,omitzero"`
	Value       json.RawMessage `json:"value,omitempty"`
	ValueBase64 []byte          `json:"value_base64,omitzero"`
}

// MarshalJSON encodes h in its list-item form.
func (h Header) MarshalJSON() ([]byte, error) {
	var w headerJSON
	if utf8.ValidString(h.Key) {
		k := h.Key
		w.Key = &k
	} else {
		w.KeyBase64 = []byte(h.Key)
	}
	switch {
	case h.Value == nil:
		w.Value = json.RawMessage("null")
	case utf8.Valid(h.Value):
		b, err := marshalJSON(string(h.Value))
		if err != nil {
			return nil, err
		}
		w.Value = b
	default:
		w.ValueBase64 = h.Value
	}
	return marshalJSON(w)
}

// UnmarshalJSON decodes one list item, refusing unknown fields, a missing key and a key or
// value given in both forms.
func (h *Header) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var w headerJSON
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("header %.40s: %w", b, err)
	}
	switch {
	case w.Key != nil && w.KeyBase64 != nil:
		return fmt.Errorf(`header: has both "key" and "key_base64": %w`, ErrInvalidRecord)
	case w.Key == nil && w.KeyBase64 == nil:
		return fmt.Errorf(`header: has no "key" (or "key_base64"): %w`, ErrInvalidRecord)
	case w.Value != nil && w.ValueBase64 != nil:
		return fmt.Errorf(`header %q: has both "value" and "value_base64": %w`, keyOf(w), ErrInvalidRecord)
	}
	*h = Header{}
	if w.Key != nil {
		h.Key = *w.Key
	} else {
		h.Key = string(w.KeyBase64)
	}
	switch {
	case w.ValueBase64 != nil:
		h.Value = w.ValueBase64
	case w.Value != nil && !isNull(w.Value):
		var s string
		if err := json.Unmarshal(w.Value, &s); err != nil {
			return fmt.Errorf(`header %q: "value" is %s, want a string or null: %w`, h.Key, w.Value, ErrInvalidRecord)
		}
		h.Value = []byte(s)
	}
	return nil
}

func keyOf(w headerJSON) string {
	if w.Key != nil {
		return *w.Key
	}
	return string(w.KeyBase64)
}

// UnmarshalJSON reads the list form, the object form (in the order written; a null
// value is a null header value) or null (no headers).
func (hs *Headers) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0:
		return fmt.Errorf(`"headers": empty: %w`, ErrInvalidRecord)
	case b[0] == '[':
		var list []Header
		if err := json.Unmarshal(b, &list); err != nil {
			return fmt.Errorf(`"headers": %w`, err)
		}
		*hs = list
		return nil
	case b[0] == '{':
		return hs.unmarshalObject(b)
	case isNull(b):
		*hs = nil
		return nil
	}
	return fmt.Errorf(`"headers" is %.20s, want a list of {"key", "value"} objects: %w`, b, ErrInvalidRecord)
}

// unmarshalObject reads {"k": "v", …} token by token, so order and repeated names stay.
func (hs *Headers) unmarshalObject(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // '{'
		return fmt.Errorf(`"headers": %w`, err)
	}
	var out Headers
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf(`"headers": %w`, err)
		}
		k, _ := t.(string) // object keys are strings
		var v *string
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf(`"headers": header %q: want a string or null value: %w`, k, ErrInvalidRecord)
		}
		h := Header{Key: k}
		if v != nil {
			h.Value = []byte(*v)
		}
		out = append(out, h)
	}
	*hs = out
	return nil
}
