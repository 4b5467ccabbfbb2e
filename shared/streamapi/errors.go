package streamapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Client-side sentinel errors. Server answers outside 2xx are *APIError instead.
var (
	// ErrNetwork: the request got no complete answer (refused, reset, timed out). A write
	// that failed with it may or may not have happened.
	ErrNetwork = errors.New("streamapi: network error")
	// ErrBadResponse: the server answered 2xx with a body this client cannot decode.
	ErrBadResponse = errors.New("streamapi: bad response")
	// ErrInvalidArgument: the call was refused before anything was sent.
	ErrInvalidArgument = errors.New("streamapi: invalid argument")
	// ErrPartialCommit: a produce was answered 207: some records committed, the others
	// (those whose RecordOffset.Error is set) were refused. Retry only those.
	ErrPartialCommit = errors.New("streamapi: some records committed, others were refused")
)

// APIError is an answer outside 2xx. Detail is the server's {"error": {...}}; an answer
// whose body is not that JSON (a proxy's HTML page, say) has an empty Code and the
// body's first line, or the status text, as Message.
type APIError struct {
	Status int
	Detail ErrorDetail
}

func (e *APIError) Error() string {
	code := e.Detail.Code
	if code == "" {
		code = "http_" + fmt.Sprint(e.Status)
	}
	if e.Detail.Message == "" {
		return fmt.Sprintf("%s (HTTP %d)", code, e.Status)
	}
	return fmt.Sprintf("%s: %s (HTTP %d)", code, e.Detail.Message, e.Status)
}

// Retriable reports whether a retry may succeed: the server said so, or the status is one
// that proxies and overloaded servers answer (429, 502, 503, 504).
func (e *APIError) Retriable() bool {
	if e.Detail.Retriable {
		return true
	}
	switch e.Status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// IsRetriable reports whether the call that returned err may succeed if repeated: a
// network error, or an *APIError whose Retriable is true. It is false for nil, for the
// caller's context ending and for every other error. For writes, see the package Caveats.
func IsRetriable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNetwork) {
		return true
	}
	var ae *APIError
	return errors.As(err, &ae) && ae.Retriable()
}

// ErrorCode returns the server's error code carried by err ("stream_not_found", …), or ""
// when err is not an *APIError.
func ErrorCode(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Detail.Code
	}
	return ""
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// parseAPIError builds the APIError of an answer with the given status and body. It never
// fails: a body that is not the error JSON becomes the message.
func parseAPIError(status int, body []byte) *APIError {
	e := &APIError{Status: status}
	var eb ErrorBody
	if err := json.Unmarshal(body, &eb); err == nil && (eb.Error.Code != "" || eb.Error.Message != "") {
		e.Detail = eb.Error
		return e
	}
	e.Detail.Message = firstLine(body)
	if e.Detail.Message == "" {
		e.Detail.Message = http.StatusText(status)
	}
	return e
}

// firstLine returns the first non-empty line of b as valid UTF-8 (invalid bytes become
// U+FFFD), cut to at most 200 bytes at a rune boundary.
func firstLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = bytes.TrimSpace(b[:i])
	}
	s := strings.ToValidUTF8(string(b), string(utf8.RuneError))
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}
