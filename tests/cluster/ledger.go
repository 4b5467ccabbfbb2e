package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
)

// AttemptKey names one produce attempt of one record: a record the load generator retries
// is sent again under the same ID with the next Attempt, so the checker can tell which
// attempt every stored record came from.
type AttemptKey struct {
	ID      int64
	Attempt int
}

func (k AttemptKey) String() string { return fmt.Sprintf("%d#%d", k.ID, k.Attempt) }

// Outcome is what the producer was told about an attempt.
type Outcome int

// Outcomes.
const (
	Pending Outcome = iota // no answer yet
	Acked                  // 2xx with an offset: must be present exactly once, there
	Failed                 // refused before anything was written: must be absent
	Unknown                // network error, timeout, 5xx other than commit_failed: at most once
)

func (o Outcome) String() string {
	return [...]string{"pending", "acked", "failed", "unknown"}[o]
}

// attempt is one record attempt as sent and answered.
type attempt struct {
	partition int32
	key       string
	value     []byte
	outcome   Outcome
	offset    int64 // when Acked
	node      string
	err       string
}

// Request is one produce request in the timeline.
type Request struct {
	Sent, Done time.Time
	Node       string
	Records    int
	OK         bool
	Err        string
	Kind       string // failed: the error code, or "network"
	Probe      bool
	Outcome    Outcome // what the answer says of the request's records
}

// Ledger records every attempt, every answer and every read the tailers made; the checker
// compares it with the final log.
type Ledger struct {
	mu       sync.Mutex
	attempts map[AttemptKey]*attempt
	acked    map[int32]map[int64]AttemptKey
	observed map[int32]map[int64]AttemptKey // offset → what a tailer read there
	requests []Request
	// violations found while the load ran (two acks at one offset, tailer reads that
	// disagree, out-of-order fetches).
	violations []string
	// staleReads counts fetches a node answered offset_out_of_range for an offset at or
	// below what some node had already served: the node's view lagged.
	staleReads int
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{attempts: map[AttemptKey]*attempt{}, acked: map[int32]map[int64]AttemptKey{},
		observed: map[int32]map[int64]AttemptKey{}}
}

// makeRecord builds the record of attempt k for partition p: a JSON value naming the
// attempt (padded so records differ in size), a key, and id/attempt headers.
func makeRecord(k AttemptKey, p int32, pad int) (streamapi.Record, []byte) {
	key := "k-" + strconv.FormatInt(k.ID, 10)
	padding := make([]byte, pad)
	for i := range padding {
		padding[i] = 'a' + byte((int(k.ID)+i)%26)
	}
	value := fmt.Appendf(nil, `{"id":%d,"a":%d,"pad":"%s"}`, k.ID, k.Attempt, padding)
	part := p
	return streamapi.Record{
		Key: &key, Value: json.RawMessage(value), Partition: &part,
		Headers: streamapi.Headers{streamapi.StringHeader("id", strconv.FormatInt(k.ID, 10)), streamapi.StringHeader("a", strconv.Itoa(k.Attempt))},
	}, value
}

// attemptOf reads the attempt key of a fetched record from its headers.
func attemptOf(r streamapi.Record) (AttemptKey, error) {
	id, err1 := strconv.ParseInt(r.Headers.Get("id"), 10, 64)
	a, err2 := strconv.Atoi(r.Headers.Get("a"))
	if err := errors.Join(err1, err2); err != nil {
		return AttemptKey{}, fmt.Errorf("headers %v: %w", r.Headers, err)
	}
	return AttemptKey{ID: id, Attempt: a}, nil
}

// sent records attempts about to be sent.
func (l *Ledger) sent(keys []AttemptKey, parts []int32, recs []streamapi.Record, values [][]byte, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, k := range keys {
		l.attempts[k] = &attempt{partition: parts[i], key: *recs[i].Key, value: values[i], node: node}
	}
}

// answered records the answer to one request.
func (l *Ledger) answered(keys []AttemptKey, req Request, offsets []streamapi.RecordOffset, outcome Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	req.Outcome = outcome
	l.requests = append(l.requests, req)
	for i, k := range keys {
		a := l.attempts[k]
		a.outcome, a.err = outcome, req.Err
		if outcome != Acked {
			continue
		}
		off := offsets[i]
		a.offset = off.Offset
		if off.Partition != a.partition {
			l.violations = append(l.violations, fmt.Sprintf("attempt %s sent to partition %d acknowledged in partition %d", k, a.partition, off.Partition))
		}
		m := l.acked[off.Partition]
		if m == nil {
			m = map[int64]AttemptKey{}
			l.acked[off.Partition] = m
		}
		if prev, dup := m[off.Offset]; dup {
			l.violations = append(l.violations, fmt.Sprintf("offset %d/%d acknowledged twice: %s and %s", off.Partition, off.Offset, prev, k))
		}
		m[off.Offset] = k
	}
}

// observe records what a tailer read at partition p from offset from (already checked to
// be dense and in order).
func (l *Ledger) observe(p int32, from int64, keys []AttemptKey, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.observed[p]
	if m == nil {
		m = map[int64]AttemptKey{}
		l.observed[p] = m
	}
	for i, k := range keys {
		off := from + int64(i)
		if prev, ok := m[off]; ok && prev != k {
			l.violations = append(l.violations, fmt.Sprintf("partition %d offset %d read as %s earlier and as %s from %s", p, off, prev, k, node))
		}
		m[off] = k
	}
}

func (l *Ledger) violation(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations = append(l.violations, fmt.Sprintf(format, a...))
}

func (l *Ledger) staleRead() {
	l.mu.Lock()
	l.staleReads++
	l.mu.Unlock()
}

// Acked is the number of acknowledged record attempts.
func (l *Ledger) Acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.acked {
		n += len(m)
	}
	return n
}

// Requests returns a copy of the produce timeline.
func (l *Ledger) Requests() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.requests)
}

// Resumption is how long after t the first produce request sent at or after t succeeded
// (its answer's arrival minus t), and false when none has yet.
func (l *Ledger) Resumption(t time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	best, ok := time.Duration(0), false
	for _, r := range l.requests {
		if r.OK && !r.Sent.Before(t) {
			if d := r.Done.Sub(t); !ok || d < best {
				best, ok = d, true
			}
		}
	}
	return best, ok
}

// LatencyP50 is the median latency of successful requests sent in [from, to).
func (l *Ledger) LatencyP50(from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for _, r := range l.requests {
		if r.OK && !r.Sent.Before(from) && r.Sent.Before(to) {
			ds = append(ds, r.Done.Sub(r.Sent))
		}
	}
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// Failures counts failed requests by kind: the server's error code, or "network" for a
// request that got no complete answer.
func (l *Ledger) Failures() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, r := range l.requests {
		if !r.OK {
			out[r.Kind]++
		}
	}
	return out
}
