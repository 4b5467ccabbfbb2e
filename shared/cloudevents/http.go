package cloudevents

import (
	"net/http"
	"sort"
	"strings"
	"unicode/utf8"
)

// HTTP binary mode: every attribute but datacontenttype is a header ce-<name>, its value
// percent-encoded (space, '"', '%' and every byte outside printable ASCII); datacontenttype
// is Content-Type; the body is the data.

// HasBinaryHeaders reports whether h carries a ce-specversion header (binary mode).
func HasBinaryHeaders(h http.Header) bool { return len(h.Values("Ce-Specversion")) > 0 }

// DecodeBinary builds the event of a binary-mode HTTP message and validates it. Headers
// carry no order, so the attributes take the canonical order: the context attributes in
// the order CloudEvents lists them, then the extensions by name. Every extension is a
// string (binary mode has no types).
func DecodeBinary(h http.Header, body []byte) (*Event, error) {
	e := &Event{}
	var exts []Attr
	for k, vs := range h {
		if len(k) < 3 || !strings.EqualFold(k[:3], "ce-") {
			continue
		}
		name := strings.ToLower(k[3:])
		if !ValidName(name) {
			return nil, attrErr(name, "the name is not 1 or more lowercase ASCII letters and digits (header %s)", k)
		}
		if len(vs) != 1 {
			return nil, attrErr(name, "header %s appears %d times", k, len(vs))
		}
		v, ok := percentDecode(vs[0])
		if !ok {
			return nil, attrErr(name, "header %s is not UTF-8 once percent-decoded", k)
		}
		if name == AttrDataContentType {
			continue // Content-Type carries it
		}
		exts = append(exts, Attr{Name: name, Value: v})
	}
	if ct := h.Get("Content-Type"); ct != "" {
		exts = append(exts, Attr{Name: AttrDataContentType, Value: ct})
	} else if v := h.Get("Ce-Datacontenttype"); v != "" {
		if d, ok := percentDecode(v); ok {
			exts = append(exts, Attr{Name: AttrDataContentType, Value: d})
		}
	}
	rank := func(n string) int {
		for i, c := range contextAttrs {
			if c == n {
				return i
			}
		}
		return len(contextAttrs)
	}
	sort.Slice(exts, func(i, j int) bool {
		ri, rj := rank(exts[i].Name), rank(exts[j].Name)
		if ri != rj {
			return ri < rj
		}
		return exts[i].Name < exts[j].Name
	})
	e.Attrs = exts
	if len(body) > 0 {
		e.Data, e.HasData = body, true
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e, nil
}

// SetBinary writes e's attributes into h as binary-mode headers (Content-Type from
// datacontenttype; none is set, and Go's sniffing is turned off, when it is absent) and
// returns the body: the data.
func SetBinary(h http.Header, e *Event) []byte {
	ct := false
	for _, a := range e.Attrs {
		if a.Name == AttrDataContentType {
			h.Set("Content-Type", a.Value)
			ct = true
			continue
		}
		h.Set("Ce-"+a.Name, percentEncode(a.Value))
	}
	if !ct {
		h["Content-Type"] = nil // no sniffing: the event has no content type
	}
	return e.Data
}

func percentEncode(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mustEscape(c) {
			b.WriteByte('%')
			b.WriteByte("0123456789ABCDEF"[c>>4])
			b.WriteByte("0123456789ABCDEF"[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func mustEscape(c byte) bool { return c <= 0x20 || c >= 0x7f || c == '"' || c == '%' }

// percentDecode decodes %XX sequences (a '%' not followed by two hex digits stays as it
// is) and reports whether the result is UTF-8.
func percentDecode(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		return s, utf8.ValidString(s)
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && unhex(s[i+1]) >= 0 && unhex(s[i+2]) >= 0 {
			b.WriteByte(byte(unhex(s[i+1])<<4 | unhex(s[i+2])))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	out := b.String()
	return out, utf8.ValidString(out)
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
