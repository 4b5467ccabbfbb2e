package httpapi

import (
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// Limits bound what one request and the node as a whole take in. Memory held for request
// bodies is bounded by MaxInflightBodyBytes, not by load; zero fields take the defaults.
type Limits struct {
	MaxRecordBytes  int // key + value + headers of one record (default 1 MiB, Kafka's message.max.bytes)
	MaxRequestBytes int // request body (default 8 MiB); a larger Content-Length is refused before reading
	MaxRecords      int // records per request (default 100,000)
	// ProduceWait bounds how long a produce waits for its commit (default 10 s); past it
	// the answer is 503 commit_unknown: the write may still happen.
	ProduceWait time.Duration

	// MaxInflightBodyBytes is the node-wide budget of request-body bytes being read or
	// decoded (default 256 MiB). A request reserves its Content-Length (MaxRequestBytes when
	// the length is not announced) before its body is read; one that does not fit is
	// answered 429 overloaded with Retry-After.
	MaxInflightBodyBytes int64
	// MaxConcurrent bounds the API requests served at once, long-polls included (default
	// 4096); past it requests are answered 429 overloaded with Retry-After. /healthz and
	// /metrics are not counted.
	MaxConcurrent int

	// HTTP server timeouts (node.Start applies them).
	ReadHeaderTimeout time.Duration // default 10 s
	ReadTimeout       time.Duration // whole request, body included (default 30 s)
	// WriteTimeout bounds writing the answer of every route but a long-poll fetch, counted
	// from the end of the request headers (default 30 s; more than ProduceWait). A fetch
	// that waits gets its wait plus PollWriteMargin instead.
	WriteTimeout    time.Duration
	PollWriteMargin time.Duration // default 10 s
	IdleTimeout     time.Duration // keep-alive connections between requests (default 120 s)
}

// Default limits.
const (
	DefaultMaxRecordBytes       = 1 << 20
	DefaultMaxRequestBytes      = 8 << 20
	DefaultMaxRecords           = 100_000
	DefaultProduceWait          = 10 * time.Second
	DefaultMaxInflightBodyBytes = 256 << 20
	DefaultMaxConcurrent        = 4096
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultReadTimeout          = 30 * time.Second
	DefaultWriteTimeout         = 30 * time.Second
	DefaultPollWriteMargin      = 10 * time.Second
	DefaultIdleTimeout          = 120 * time.Second
)

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	l.defaults()
	return l
}

func (l *Limits) defaults() {
	setDefault(&l.MaxRecordBytes, DefaultMaxRecordBytes)
	setDefault(&l.MaxRequestBytes, DefaultMaxRequestBytes)
	setDefault(&l.MaxRecords, DefaultMaxRecords)
	setDefault(&l.ProduceWait, DefaultProduceWait)
	setDefault(&l.MaxInflightBodyBytes, DefaultMaxInflightBodyBytes)
	setDefault(&l.MaxConcurrent, DefaultMaxConcurrent)
	setDefault(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDefault(&l.ReadTimeout, DefaultReadTimeout)
	setDefault(&l.WriteTimeout, DefaultWriteTimeout)
	setDefault(&l.PollWriteMargin, DefaultPollWriteMargin)
	setDefault(&l.IdleTimeout, DefaultIdleTimeout)
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Validate reports limits that cannot work together (after defaults).
func (l Limits) Validate() error {
	l.defaults()
	switch {
	case int64(l.MaxRequestBytes) > l.MaxInflightBodyBytes:
		return fmt.Errorf("httpapi: MaxRequestBytes %d is over MaxInflightBodyBytes %d: no request of the largest size could be admitted", l.MaxRequestBytes, l.MaxInflightBodyBytes)
	case l.MaxRecordBytes > l.MaxRequestBytes:
		return fmt.Errorf("httpapi: MaxRecordBytes %d is over MaxRequestBytes %d", l.MaxRecordBytes, l.MaxRequestBytes)
	case l.WriteTimeout <= l.ProduceWait:
		return fmt.Errorf("httpapi: WriteTimeout %v must be more than ProduceWait %v, or produce answers are cut off", l.WriteTimeout, l.ProduceWait)
	}
	return nil
}

// admission admits HTTP requests against the node's counters (Admission, shared with the
// gRPC API).
type admission struct {
	lim Limits
	*Admission
}

// admit admits r or says why not. On success the caller must call the returned release
// once the request is done.
func (a *admission) admit(r *http.Request) (release func(), err error) {
	if !a.Enter() {
		return nil, &overloadError{fmt.Sprintf("the node is serving its limit of %d concurrent requests and calls (max concurrent requests, HTTP and gRPC together): retry later", a.Limits().MaxConcurrent)}
	}
	var reserve int64
	if hasBody(r) {
		if r.ContentLength > int64(a.lim.MaxRequestBytes) {
			a.Leave()
			return nil, badInput(http.StatusRequestEntityTooLarge, streamapi.CodeRequestTooLarge, "the request body of %d bytes is over the limit of %d bytes", r.ContentLength, a.lim.MaxRequestBytes)
		}
		reserve = r.ContentLength
		if reserve < 0 {
			reserve = int64(a.lim.MaxRequestBytes) // length not announced: reserve the most it may be
		}
		if held, ok := a.Hold(reserve); !ok {
			a.Leave()
			return nil, &overloadError{fmt.Sprintf("the node holds %d bytes of request bodies and produce messages; %d more would pass its in-flight body budget of %d bytes: retry later", held, reserve, a.Limits().MaxInflightBodyBytes)}
		}
	}
	return func() {
		if reserve > 0 {
			a.Drop(reserve)
		}
		a.Leave()
	}, nil
}

// hasBody reports whether r may carry a body the handler reads.
func hasBody(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return r.ContentLength != 0
	}
	return false
}

// RegisterFlags registers flags for the limits operators tune most, writing into l
// (lognode-svc and loam dev share them). Unset flags leave the defaults.
func (l *Limits) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&l.MaxRequestBytes, "max-request-bytes", DefaultMaxRequestBytes, "largest request body; a larger Content-Length is refused before reading (413)")
	fs.Int64Var(&l.MaxInflightBodyBytes, "max-inflight-body-bytes", DefaultMaxInflightBodyBytes, "node-wide budget of request-body bytes being read; past it requests answer 429 overloaded")
	fs.IntVar(&l.MaxConcurrent, "max-concurrent-requests", DefaultMaxConcurrent, "API requests served at once, long-polls included; past it requests answer 429 overloaded")
	fs.DurationVar(&l.ReadTimeout, "http-read-timeout", DefaultReadTimeout, "time to read a whole request, body included")
	fs.DurationVar(&l.WriteTimeout, "http-write-timeout", DefaultWriteTimeout, "time to write an answer (long-polls get their wait plus a margin instead); more than the produce wait")
	fs.DurationVar(&l.IdleTimeout, "http-idle-timeout", DefaultIdleTimeout, "how long an idle keep-alive connection is kept")
}
