package cloudevents

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loamhq/loam/shared/recordbatch"
)

// Record lays e out as a record (the package doc): headers ce_<name> in attribute order,
// content-type for datacontenttype, loam_ce_types last when an extension is typed; the
// partitionkey as the key; the data as the value (nil when the event has none). The
// timestamp is left to the caller.
func Record(e *Event) recordbatch.Record {
	var r recordbatch.Record
	r.Headers = make([]recordbatch.Header, 0, len(e.Attrs)+1)
	var types []byte
	for _, a := range e.Attrs {
		if a.Name == AttrDataContentType {
			r.Headers = append(r.Headers, recordbatch.Header{Key: HeaderCT, Value: []byte(a.Value)})
			continue
		}
		r.Headers = append(r.Headers, recordbatch.Header{Key: HeaderPrefix + a.Name, Value: []byte(a.Value)})
		if a.Name == AttrPartitionKey {
			r.Key = []byte(a.Value)
		}
		if a.Type != String {
			if len(types) > 0 {
				types = append(types, ',')
			}
			types = append(types, a.Name...)
			types = append(types, '=')
			types = append(types, a.Type.String()...)
		}
	}
	if len(types) > 0 {
		r.Headers = append(r.Headers, recordbatch.Header{Key: HeaderTypes, Value: types})
	}
	if e.HasData {
		r.Value = e.Data
		if r.Value == nil {
			r.Value = []byte{}
		}
	}
	return r
}

// Size is the bytes of key, value and headers of e's record.
func Size(e *Event) int {
	r := Record(e)
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// Form says how FromRecord read a record back.
type Form uint8

const (
	FormHeaders    Form = 1 // ingested as an event, or produced with valid ce_ headers
	FormStructured Form = 2 // a Kafka structured-mode value, passed through
	FormEnvelope   Form = 3 // any other record, in a synthesized envelope
)

// Origin names the record FromRecord reads, for the synthesized envelope.
type Origin struct {
	StreamID  uint64
	Namespace string
	Stream    string
	Partition int32
	Offset    int64
}

// Stored is a record read back as an event. Raw is set for FormStructured: the value as
// it was stored, written unchanged by structured JSON output; Event is always set.
type Stored struct {
	Event *Event
	Raw   []byte
	Form  Form
}

// FromRecord reads r back as an event in the first form that applies (the package doc).
func FromRecord(r recordbatch.Record, o Origin) Stored {
	if e, ok := fromHeaders(r); ok {
		return Stored{Event: e, Form: FormHeaders}
	}
	for _, h := range r.Headers {
		if strings.HasPrefix(h.Key, HeaderPrefix) {
			return Stored{Event: envelope(r, o), Form: FormEnvelope} // partial or invalid ce_ headers
		}
	}
	if ct, ok := header(r, HeaderCT); ok && mediaType(string(ct)) == MediaJSON && r.Value != nil {
		if e, err := DecodeJSON(r.Value); err == nil {
			return Stored{Event: e, Raw: r.Value, Form: FormStructured}
		}
	}
	return Stored{Event: envelope(r, o), Form: FormEnvelope}
}

func header(r recordbatch.Record, key string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// fromHeaders rebuilds an event from ce_ headers, content-type and loam_ce_types; false
// when there are none or they do not validate.
func fromHeaders(r recordbatch.Record) (*Event, bool) {
	e := &Event{}
	any := false
	var types map[string]Type
	for _, h := range r.Headers {
		switch {
		case strings.HasPrefix(h.Key, HeaderPrefix):
			any = true
			if h.Value == nil || !utf8.Valid(h.Value) {
				return nil, false
			}
			e.Attrs = append(e.Attrs, Attr{Name: h.Key[len(HeaderPrefix):], Value: string(h.Value)})
		case h.Key == HeaderCT:
			if h.Value == nil || !utf8.Valid(h.Value) {
				return nil, false
			}
			e.Attrs = append(e.Attrs, Attr{Name: AttrDataContentType, Value: string(h.Value)})
		case h.Key == HeaderTypes:
			types = parseTypes(string(h.Value))
		}
	}
	if !any {
		return nil, false
	}
	for i, a := range e.Attrs {
		if t, ok := types[a.Name]; ok && !IsContext(a.Name) {
			if checkValue(Attr{Name: a.Name, Value: a.Value, Type: t}) == nil {
				e.Attrs[i].Type = t
			}
		}
	}
	if _, ok := e.Get(AttrPartitionKey); !ok && r.Key != nil && utf8.Valid(r.Key) {
		e.Attrs = append(e.Attrs, Attr{Name: AttrPartitionKey, Value: string(r.Key)})
	}
	if r.Value != nil {
		e.Data, e.HasData = r.Value, true
	}
	if e.Validate() != nil {
		return nil, false
	}
	return e, true
}

// parseTypes parses loam_ce_types (name=type,...), skipping entries it does not know.
func parseTypes(s string) map[string]Type {
	m := map[string]Type{}
	for _, kv := range strings.Split(s, ",") {
		name, typ, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if t, ok := parseType(typ); ok {
			m[name] = t
		}
	}
	return m
}

// SourceOf is the source of a synthesized envelope.
func SourceOf(ns, stream string, partition int32) string {
	return "/namespaces/" + ns + "/streams/" + stream + "/partitions/" + strconv.Itoa(int(partition))
}

// EnvelopeType is the type of a synthesized envelope.
const EnvelopeType = "dev.loam.stream.record"

// envelope synthesizes an event around any record.
func envelope(r recordbatch.Record, o Origin) *Event {
	e := &Event{Attrs: []Attr{
		{Name: AttrSpecVersion, Value: SpecVersion},
		{Name: AttrID, Value: strconv.FormatUint(o.StreamID, 10) + "-" + strconv.FormatInt(o.Offset, 10)},
		{Name: AttrSource, Value: SourceOf(o.Namespace, o.Stream, o.Partition)},
		{Name: AttrType, Value: EnvelopeType},
		{Name: AttrTime, Value: time.UnixMilli(r.Timestamp).UTC().Format("2006-01-02T15:04:05.000Z07:00")},
	}}
	if r.Key != nil && utf8.Valid(r.Key) {
		e.Attrs = append(e.Attrs, Attr{Name: AttrPartitionKey, Value: string(r.Key)})
	}
	ct, hasCT := header(r, HeaderCT)
	switch {
	case hasCT && ct != nil && utf8.Valid(ct):
		e.Attrs = append(e.Attrs, Attr{Name: AttrDataContentType, Value: string(ct)})
	case r.Value != nil && len(r.Value) > 0 && json.Valid(r.Value):
		e.Attrs = append(e.Attrs, Attr{Name: AttrDataContentType, Value: "application/json"})
	default:
		e.Attrs = append(e.Attrs, Attr{Name: AttrDataContentType, Value: "application/octet-stream"})
	}
	if r.Value != nil {
		e.Data, e.HasData = r.Value, true
	}
	return e
}

// AppendStoredJSON appends a stored event in structured JSON: a structured-mode value
// verbatim, else AppendJSON.
func AppendStoredJSON(dst []byte, s Stored) []byte {
	if s.Raw != nil {
		return append(dst, s.Raw...)
	}
	return AppendJSON(dst, s.Event)
}
