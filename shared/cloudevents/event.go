package cloudevents

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"mime"
	"strconv"
	"strings"
)

// Media types of the CloudEvents formats.
const (
	MediaJSON       = "application/cloudevents+json"
	MediaBatchJSON  = "application/cloudevents-batch+json"
	MediaProto      = "application/cloudevents+protobuf"
	MediaBatchProto = "application/cloudevents-batch+protobuf"
)

// SpecVersion is the only specversion accepted.
const SpecVersion = "1.0"

// Header names of the record layout.
const (
	HeaderPrefix = "ce_"           // ce_<attribute>
	HeaderTypes  = "loam_ce_types" // typed extensions: name=type,...
	HeaderCT     = "content-type"  // datacontenttype
)

// Context attribute names.
const (
	AttrSpecVersion     = "specversion"
	AttrID              = "id"
	AttrSource          = "source"
	AttrType            = "type"
	AttrDataContentType = "datacontenttype"
	AttrDataSchema      = "dataschema"
	AttrSubject         = "subject"
	AttrTime            = "time"
	AttrPartitionKey    = "partitionkey" // the Kafka binding's key extension
)

// contextAttrs are the attributes CloudEvents 1.0 defines, in canonical order; every
// other name is an extension.
var contextAttrs = []string{AttrSpecVersion, AttrID, AttrSource, AttrType, AttrDataContentType, AttrDataSchema, AttrSubject, AttrTime}

// IsContext reports whether name is a context attribute (not an extension).
func IsContext(name string) bool {
	for _, n := range contextAttrs {
		if n == name {
			return true
		}
	}
	return false
}

// Type is an attribute's type in the CloudEvents type system. Context attributes are
// always String here (their formats are fixed by name); extensions may have any type.
type Type uint8

const (
	String Type = iota
	Integer
	Boolean
	URI
	URIRef
	Timestamp
	Binary
)

var typeNames = [...]string{"string", "integer", "boolean", "uri", "urireference", "timestamp", "binary"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

func parseType(s string) (Type, bool) {
	for i, n := range typeNames {
		if n == s {
			return Type(i), true
		}
	}
	return String, false
}

// Attr is one attribute: its name, its value in canonical string form and its type.
type Attr struct {
	Name  string
	Value string
	Type  Type
}

// Event is one CloudEvent. Attrs keep their order; Data is the event's data as the
// record stores it (HasData false: the event has none).
type Event struct {
	Attrs   []Attr
	Data    []byte
	HasData bool
}

// Get returns the value of attribute name and whether it is present.
func (e *Event) Get(name string) (string, bool) {
	for _, a := range e.Attrs {
		if a.Name == name {
			return a.Value, true
		}
	}
	return "", false
}

// ID, Source and Type return the required attributes.
func (e *Event) ID() string     { v, _ := e.Get(AttrID); return v }
func (e *Event) Source() string { v, _ := e.Get(AttrSource); return v }
func (e *Event) Type() string   { v, _ := e.Get(AttrType); return v }

// Key is the deduplication key of the event: SHA-256(source ‖ 0x00 ‖ id).
func (e *Event) Key() [32]byte { return KeyOf(e.Source(), e.ID()) }

// KeyOf is SHA-256(source ‖ 0x00 ‖ id).
func KeyOf(source, id string) [32]byte {
	h := sha256.New()
	h.Write([]byte(source))
	h.Write([]byte{0})
	h.Write([]byte(id))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// ErrInvalid is wrapped by every refusal of an event.
var ErrInvalid = errors.New("cloudevents: invalid event")

// Error is an invalid event: the batch index (-1 outside a batch), the attribute at
// fault (empty when the event as a whole is malformed) and what is wrong.
type Error struct {
	Index int
	Attr  string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		fmt.Fprintf(&b, "event %d: ", e.Index)
	}
	if e.Attr != "" {
		fmt.Fprintf(&b, "attribute %q: ", e.Attr)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *Error) Unwrap() error { return ErrInvalid }

func attrErr(attr, format string, args ...any) *Error {
	return &Error{Index: -1, Attr: attr, Msg: fmt.Sprintf(format, args...)}
}

// atIndex sets the batch index of err when it is an *Error.
func atIndex(err error, i int) error {
	var e *Error
	if errors.As(err, &e) {
		c := *e
		c.Index = i
		return &c
	}
	return err
}

// ValidName reports whether name is one or more lowercase ASCII letters and digits.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Validate checks e as the package doc says: names, specversion 1.0, id, source and type
// present and not empty, time in RFC 3339, each name once, typed values in their form.
func (e *Event) Validate() error {
	seen := make(map[string]bool, len(e.Attrs))
	for _, a := range e.Attrs {
		if !ValidName(a.Name) {
			return attrErr(a.Name, "the name is not 1 or more lowercase ASCII letters and digits")
		}
		if seen[a.Name] {
			return attrErr(a.Name, "appears twice")
		}
		seen[a.Name] = true
		if err := checkValue(a); err != nil {
			return err
		}
	}
	v, ok := e.Get(AttrSpecVersion)
	if !ok {
		return attrErr(AttrSpecVersion, "is missing")
	}
	if v != SpecVersion {
		return attrErr(AttrSpecVersion, "%q is not supported: only 1.0 is", v)
	}
	for _, n := range []string{AttrID, AttrSource, AttrType} {
		v, ok := e.Get(n)
		if !ok {
			return attrErr(n, "is missing")
		}
		if v == "" {
			return attrErr(n, "is empty")
		}
	}
	if v, ok := e.Get(AttrTime); ok && !ValidTime(v) {
		return attrErr(AttrTime, "%q is not an RFC 3339 timestamp", v)
	}
	return nil
}

// checkValue checks a typed extension's value is in its type's canonical form.
func checkValue(a Attr) error {
	switch a.Type {
	case String, URI, URIRef:
	case Integer:
		if _, err := strconv.ParseInt(a.Value, 10, 32); err != nil {
			return attrErr(a.Name, "%q is not a 32-bit integer", a.Value)
		}
	case Boolean:
		if a.Value != "true" && a.Value != "false" {
			return attrErr(a.Name, "%q is not a boolean", a.Value)
		}
	case Timestamp:
		if !ValidTime(a.Value) {
			return attrErr(a.Name, "%q is not an RFC 3339 timestamp", a.Value)
		}
	case Binary:
		if _, err := b64.DecodeString(a.Value); err != nil {
			return attrErr(a.Name, "%q is not base64", a.Value)
		}
	default:
		return attrErr(a.Name, "unknown type %d", a.Type)
	}
	if IsContext(a.Name) && a.Type != String {
		return attrErr(a.Name, "a context attribute cannot be typed %s", a.Type)
	}
	return nil
}

// ValidTime reports whether s is an RFC 3339 date-time: YYYY-MM-DDTHH:MM:SS[.frac] then Z
// or ±HH:MM (T and Z in either case), fields in range (a leap second 60 allowed).
func ValidTime(s string) bool {
	num := func(i, n int, lo, hi int) bool {
		if i+n > len(s) {
			return false
		}
		v := 0
		for j := i; j < i+n; j++ {
			c := s[j]
			if c < '0' || c > '9' {
				return false
			}
			v = v*10 + int(c-'0')
		}
		return v >= lo && v <= hi
	}
	at := func(i int, c byte) bool { return i < len(s) && s[i] == c }
	if !num(0, 4, 0, 9999) || !at(4, '-') || !num(5, 2, 1, 12) || !at(7, '-') || !num(8, 2, 1, 31) {
		return false
	}
	if len(s) < 11 || (s[10] != 'T' && s[10] != 't') {
		return false
	}
	if !num(11, 2, 0, 23) || !at(13, ':') || !num(14, 2, 0, 59) || !at(16, ':') || !num(17, 2, 0, 60) {
		return false
	}
	y, _ := strconv.Atoi(s[0:4])
	m, _ := strconv.Atoi(s[5:7])
	d, _ := strconv.Atoi(s[8:10])
	if d > daysIn(y, m) {
		return false
	}
	i := 19
	if at(i, '.') {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 {
			return false
		}
		i = j
	}
	switch {
	case at(i, 'Z') || at(i, 'z'):
		return i+1 == len(s)
	case at(i, '+') || at(i, '-'):
		return num(i+1, 2, 0, 23) && at(i+3, ':') && num(i+4, 2, 0, 59) && i+6 == len(s)
	}
	return false
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// IsJSONMedia reports whether a content type is JSON: application/json, text/json or a
// +json suffix (parameters ignored).
func IsJSONMedia(ct string) bool {
	mt := mediaType(ct)
	return mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
}

// isTextMedia reports whether data of this content type is text: text/*, XML, or a
// charset parameter.
func isTextMedia(ct string) bool {
	mt := mediaType(ct)
	if strings.HasPrefix(mt, "text/") || mt == "application/xml" || strings.HasSuffix(mt, "+xml") {
		return true
	}
	_, params, err := mime.ParseMediaType(ct)
	return err == nil && params["charset"] != ""
}

// mediaType is ct's media type, lowercase, without parameters.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// MediaType is ct's media type, lowercase, without parameters.
func MediaType(ct string) string { return mediaType(ct) }
