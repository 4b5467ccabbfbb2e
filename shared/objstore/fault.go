package objstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A fault profile tells a FaultBucket which calls to break and how. It is JSON:
//
//	{"seed": 7, "rules": [
//	  {"op": "put", "fault": "slowdown", "p": 0.2},
//	  {"op": "put", "fault": "lost_answer", "p": 0.1},
//	  {"op": "get", "fault": "timeout", "p": 0.05},
//	  {"op": "get", "fault": "latency", "ms": 50},
//	  {"op": "*", "fault": "internal_error", "after_ms": 5000, "for_ms": 2000, "every_ms": 10000}
//	]}
//
// See docs/faults.md for every op, fault and field.

// Fault operations: the Bucket method a rule applies to. "get" covers Get and GetRange.
const (
	FaultOpPut    = "put"
	FaultOpGet    = "get"
	FaultOpStat   = "stat"
	FaultOpList   = "list"
	FaultOpDelete = "delete"
	FaultOpAny    = "*"
)

// Faults a rule injects.
const (
	// FaultSlowdown fails the call at once, not forwarded, as S3's 503 SlowDown.
	FaultSlowdown = "slowdown"
	// FaultInternalError fails the call at once, not forwarded, as S3's 500 InternalError.
	FaultInternalError = "internal_error"
	// FaultTimeout holds the call for ms (default 10 s) or until its context ends, not
	// forwarded, then fails with a timeout.
	FaultTimeout = "timeout"
	// FaultLatency delays the call by ms (plus up to jitter_ms), then forwards it.
	FaultLatency = "latency"
	// FaultReset fails the call at once, not forwarded, with a connection reset.
	FaultReset = "reset"
	// FaultLostAnswer forwards the call (put, delete), which takes effect, then fails it
	// as a 500 whose answer was lost: the writer cannot tell it landed.
	FaultLostAnswer = "lost_answer"
	// FaultShortRead forwards a get and returns a prefix of the body, shorter than the
	// object or range asked, without an error.
	FaultShortRead = "short_read"
)

var (
	faultOps   = []string{FaultOpPut, FaultOpGet, FaultOpStat, FaultOpList, FaultOpDelete}
	faultKinds = []string{FaultSlowdown, FaultInternalError, FaultTimeout, FaultLatency, FaultReset, FaultLostAnswer, FaultShortRead}
	// faultOpsFor lists the ops a fault makes sense on; absent: every op.
	faultOpsFor = map[string][]string{
		FaultLostAnswer: {FaultOpPut, FaultOpDelete},
		FaultShortRead:  {FaultOpGet},
	}
)

// FaultOps lists the ops a rule may name (besides "*"); FaultKinds the faults.
func FaultOps() []string   { return slices.Clone(faultOps) }
func FaultKinds() []string { return slices.Clone(faultKinds) }

// DefaultFaultTimeout is how long a timeout fault holds a call when its rule gives no ms.
const DefaultFaultTimeout = 10 * time.Second

// MaxFaultRules bounds a profile's rules (each call walks them all).
const MaxFaultRules = 64

// FaultProfile is a parsed fault profile.
type FaultProfile struct {
	// Seed seeds the random draws; 0: a random seed.
	Seed  uint64      `json:"seed,omitempty"`
	Rules []FaultRule `json:"rules"`
}

// FaultRule is one rule of a profile. A call matches it when its op is Op (or Op is "*"),
// its key (a List's prefix) starts with Prefix, the rule's schedule is active and it has
// fired fewer than Max times; it then fires with probability P.
type FaultRule struct {
	Op    string `json:"op"`
	Fault string `json:"fault"`
	// P is the probability that a matching call is hit; omitted: 1.
	P *float64 `json:"p,omitempty"`
	// MS is the delay of latency (required) and how long timeout holds a call.
	MS int64 `json:"ms,omitempty"`
	// JitterMS adds a uniform random delay of up to this much to latency.
	JitterMS int64  `json:"jitter_ms,omitempty"`
	Prefix   string `json:"prefix,omitempty"`
	// The schedule, from when the profile was loaded: active from AfterMS on, for ForMS
	// (0: for ever), repeating every EveryMS (0: once; else more than ForMS).
	AfterMS int64 `json:"after_ms,omitempty"`
	ForMS   int64 `json:"for_ms,omitempty"`
	EveryMS int64 `json:"every_ms,omitempty"`
	// Max caps how often the rule fires (0: no cap).
	Max int64 `json:"max,omitempty"`
}

// ParseFaultProfile parses a JSON fault profile strictly: an unknown field, op or fault, a
// fault on an op it does not apply to, or a value out of range is an error naming it.
func ParseFaultProfile(data []byte) (*FaultProfile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p FaultProfile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("fault profile: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("fault profile: data after the JSON object")
	}
	if p.Rules == nil {
		return nil, errors.New(`fault profile: no "rules" (an empty list injects nothing)`)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// LoadFaultProfile reads and parses the fault profile in file.
func LoadFaultProfile(file string) (*FaultProfile, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("fault profile: %w", err)
	}
	p, err := ParseFaultProfile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// Validate checks every rule.
func (p *FaultProfile) Validate() error {
	if len(p.Rules) > MaxFaultRules {
		return fmt.Errorf("fault profile: %d rules, at most %d", len(p.Rules), MaxFaultRules)
	}
	for i, r := range p.Rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("fault profile: rule %d (%s %s): %w", i, r.Op, r.Fault, err)
		}
	}
	return nil
}

func (r FaultRule) validate() error {
	if r.Op != FaultOpAny && !slices.Contains(faultOps, r.Op) {
		return fmt.Errorf("unknown op %q: want one of %s or *", r.Op, strings.Join(faultOps, ", "))
	}
	if !slices.Contains(faultKinds, r.Fault) {
		return fmt.Errorf("unknown fault %q: want one of %s", r.Fault, strings.Join(faultKinds, ", "))
	}
	if ops, ok := faultOpsFor[r.Fault]; ok && !slices.Contains(ops, r.Op) {
		return fmt.Errorf("fault %s applies to op %s only, not %q", r.Fault, strings.Join(ops, " and "), r.Op)
	}
	if r.P != nil && !(*r.P >= 0 && *r.P <= 1) {
		return fmt.Errorf("p %v: want a probability from 0 to 1", *r.P)
	}
	const day = int64(24 * time.Hour / time.Millisecond)
	for _, f := range []struct {
		name string
		v    int64
	}{{"ms", r.MS}, {"jitter_ms", r.JitterMS}, {"after_ms", r.AfterMS}, {"for_ms", r.ForMS}, {"every_ms", r.EveryMS}} {
		if f.v < 0 || f.v > day {
			return fmt.Errorf("%s %d: want 0 to %d (a day)", f.name, f.v, day)
		}
	}
	if r.Max < 0 {
		return fmt.Errorf("max %d: want 0 (no cap) or more", r.Max)
	}
	switch r.Fault {
	case FaultLatency:
		if r.MS == 0 && r.JitterMS == 0 {
			return errors.New("latency needs ms (or jitter_ms) above 0")
		}
	case FaultTimeout:
		if r.JitterMS != 0 {
			return errors.New("jitter_ms applies to latency only")
		}
	default:
		if r.MS != 0 || r.JitterMS != 0 {
			return fmt.Errorf("ms and jitter_ms apply to latency and timeout only, not %s", r.Fault)
		}
	}
	if r.EveryMS != 0 && (r.ForMS == 0 || r.ForMS >= r.EveryMS) {
		return fmt.Errorf("every_ms %d needs for_ms above 0 and below it (got %d)", r.EveryMS, r.ForMS)
	}
	return nil
}

// active reports whether the rule's schedule covers since (time since the profile loaded).
func (r *FaultRule) active(since time.Duration) bool {
	ms := since.Milliseconds()
	if ms < r.AfterMS {
		return false
	}
	ms -= r.AfterMS
	if r.EveryMS > 0 {
		ms %= r.EveryMS
	}
	return r.ForMS == 0 || ms < r.ForMS
}

// FaultError is the error an injected fault fails a call with. It wraps ErrFaultInjected,
// and syscall.ECONNRESET (reset) or os.ErrDeadlineExceeded (timeout).
type FaultError struct {
	Op, Key, Fault string
}

// ErrFaultInjected is wrapped by every FaultError.
var ErrFaultInjected = errors.New("injected fault")

func (e *FaultError) Error() string {
	what := map[string]string{
		FaultSlowdown: "503 SlowDown: please reduce your request rate", FaultInternalError: "500 InternalError",
		FaultTimeout: "request timed out", FaultReset: "connection reset by peer",
		FaultLostAnswer: "500 InternalError (the request took effect; its answer was lost)",
	}[e.Fault]
	return fmt.Sprintf("objstore: %s %s: %s (%s: %s)", e.Op, e.Key, what, ErrFaultInjected, e.Fault)
}

// Unwrap returns ErrFaultInjected and what the fault stands for.
func (e *FaultError) Unwrap() []error {
	switch e.Fault {
	case FaultReset:
		return []error{ErrFaultInjected, syscall.ECONNRESET}
	case FaultTimeout:
		return []error{ErrFaultInjected, os.ErrDeadlineExceeded}
	}
	return []error{ErrFaultInjected}
}

// FaultCount is how often one fault fired on one op.
type FaultCount struct {
	Op, Fault string
	N         int64
}

// FaultBucket is a Bucket that injects the faults of a profile into the calls it passes
// to the bucket it wraps (WithFaults). Its profile can be replaced while it runs
// (SetProfile), and it counts every fault it injected, by op and fault, across profiles.
// Its memory is bounded by the profile (at most MaxFaultRules rules) and a fixed table of
// counters. Safe for concurrent use.
type FaultBucket struct {
	b      Bucket
	state  atomic.Pointer[faultState]
	counts [5][7]atomic.Int64 // [op][fault]
	calls  [5]atomic.Int64
	sleep  func(ctx context.Context, d time.Duration) error
}

type faultState struct {
	p      FaultProfile
	loaded time.Time
	fired  []atomic.Int64 // per rule, for Max
	mu     sync.Mutex
	rng    *rand.Rand // guarded by mu
}

var _ Bucket = (*FaultBucket)(nil)

// WithFaults wraps b in a FaultBucket injecting the faults of p (nil: none until
// SetProfile). p must be valid (ParseFaultProfile and Validate check).
func WithFaults(b Bucket, p *FaultProfile) *FaultBucket {
	f := &FaultBucket{b: b, sleep: sleepCtx}
	f.SetProfile(p)
	return f
}

// SetProfile replaces the profile (nil: no faults); its schedules start now. Counts are
// kept.
func (f *FaultBucket) SetProfile(p *FaultProfile) {
	if p == nil {
		p = &FaultProfile{}
	}
	seed := p.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	s := &faultState{p: *p, loaded: time.Now(), fired: make([]atomic.Int64, len(p.Rules)),
		rng: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))}
	s.p.Rules = slices.Clone(p.Rules)
	f.state.Store(s)
}

// Profile returns the profile in force.
func (f *FaultBucket) Profile() FaultProfile {
	p := f.state.Load().p
	p.Rules = slices.Clone(p.Rules)
	return p
}

// Counts returns how often each fault fired on each op, the non-zero counts only, in op
// then fault order.
func (f *FaultBucket) Counts() []FaultCount {
	var out []FaultCount
	for i, op := range faultOps {
		for j, k := range faultKinds {
			if n := f.counts[i][j].Load(); n > 0 {
				out = append(out, FaultCount{Op: op, Fault: k, N: n})
			}
		}
	}
	return out
}

// Count is how often fault fired on op ("*": on every op).
func (f *FaultBucket) Count(op, fault string) int64 {
	j := slices.Index(faultKinds, fault)
	if j < 0 {
		return 0
	}
	var n int64
	for i, o := range faultOps {
		if op == FaultOpAny || op == o {
			n += f.counts[i][j].Load()
		}
	}
	return n
}

// Calls is how many calls of op reached the FaultBucket, hit or not.
func (f *FaultBucket) Calls(op string) int64 {
	if i := slices.Index(faultOps, op); i >= 0 {
		return f.calls[i].Load()
	}
	return 0
}

// plan is what the rules decided for one call.
type plan struct {
	delay time.Duration
	fault string // "" when the call goes through
	hold  time.Duration
}

func (s *faultState) draw() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Float64()
}

func (s *faultState) jitter(max int64) time.Duration {
	if max <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.rng.Int64N(max+1)) * time.Millisecond
}

// decide walks the rules in order: every latency rule that fires adds its delay, and the
// first other rule that fires decides the call's fault.
func (f *FaultBucket) decide(op, key string) plan {
	opi := slices.Index(faultOps, op)
	f.calls[opi].Add(1)
	s := f.state.Load()
	var pl plan
	if len(s.p.Rules) == 0 {
		return pl
	}
	since := time.Since(s.loaded)
	for i := range s.p.Rules {
		r := &s.p.Rules[i]
		if (r.Op != FaultOpAny && r.Op != op) || !strings.HasPrefix(key, r.Prefix) || !r.active(since) {
			continue
		}
		if ops, ok := faultOpsFor[r.Fault]; ok && !slices.Contains(ops, op) {
			continue // a "*" rule of a fault this op cannot have
		}
		if r.P != nil && (*r.P <= 0 || (*r.P < 1 && s.draw() >= *r.P)) {
			continue
		}
		if r.Max > 0 {
			if s.fired[i].Add(1) > r.Max {
				continue
			}
		}
		f.counts[opi][slices.Index(faultKinds, r.Fault)].Add(1)
		if r.Fault == FaultLatency {
			pl.delay += time.Duration(r.MS)*time.Millisecond + s.jitter(r.JitterMS)
			continue
		}
		pl.fault = r.Fault
		if r.Fault == FaultTimeout {
			pl.hold = time.Duration(r.MS) * time.Millisecond
			if pl.hold == 0 {
				pl.hold = DefaultFaultTimeout
			}
		}
		break
	}
	return pl
}

// before applies a plan's delay and the faults that stop a call before it reaches the
// wrapped bucket; it returns nil when the call goes on.
func (f *FaultBucket) before(ctx context.Context, pl plan, op, key string) error {
	if pl.delay > 0 {
		if err := f.sleep(ctx, pl.delay); err != nil {
			return fmt.Errorf("objstore: %s %s: %w", op, key, err)
		}
	}
	switch pl.fault {
	case FaultSlowdown, FaultInternalError, FaultReset:
		return &FaultError{Op: op, Key: key, Fault: pl.fault}
	case FaultTimeout:
		if err := f.sleep(ctx, pl.hold); err != nil {
			return fmt.Errorf("objstore: %s %s: %w: %w", op, key, err, &FaultError{Op: op, Key: key, Fault: pl.fault})
		}
		return &FaultError{Op: op, Key: key, Fault: pl.fault}
	}
	return nil
}

// short cuts body to a random shorter length (an empty body cannot be cut).
func (f *FaultBucket) short(body []byte) []byte {
	if len(body) == 0 {
		return body
	}
	s := f.state.Load()
	s.mu.Lock()
	n := s.rng.IntN(len(body))
	s.mu.Unlock()
	return body[:n:n]
}

func (f *FaultBucket) Put(ctx context.Context, key string, body []byte, opts ...PutOption) error {
	pl := f.decide(FaultOpPut, key)
	if err := f.before(ctx, pl, "put", key); err != nil {
		return err
	}
	err := f.b.Put(ctx, key, body, opts...)
	if err == nil && pl.fault == FaultLostAnswer {
		return &FaultError{Op: "put", Key: key, Fault: pl.fault}
	}
	return err
}

func (f *FaultBucket) Get(ctx context.Context, key string) ([]byte, error) {
	pl := f.decide(FaultOpGet, key)
	if err := f.before(ctx, pl, "get", key); err != nil {
		return nil, err
	}
	body, err := f.b.Get(ctx, key)
	if err == nil && pl.fault == FaultShortRead {
		body = f.short(body)
	}
	return body, err
}

func (f *FaultBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	pl := f.decide(FaultOpGet, key)
	if err := f.before(ctx, pl, "get range", key); err != nil {
		return nil, err
	}
	body, err := f.b.GetRange(ctx, key, off, n)
	if err == nil && pl.fault == FaultShortRead {
		body = f.short(body)
	}
	return body, err
}

func (f *FaultBucket) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := f.before(ctx, f.decide(FaultOpStat, key), "stat", key); err != nil {
		return ObjectInfo{}, err
	}
	return f.b.Stat(ctx, key)
}

func (f *FaultBucket) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := f.before(ctx, f.decide(FaultOpList, prefix), "list", prefix); err != nil {
		return err
	}
	return f.b.List(ctx, prefix, fn)
}

func (f *FaultBucket) Delete(ctx context.Context, key string) error {
	pl := f.decide(FaultOpDelete, key)
	if err := f.before(ctx, pl, "delete", key); err != nil {
		return err
	}
	err := f.b.Delete(ctx, key)
	if err == nil && pl.fault == FaultLostAnswer {
		return &FaultError{Op: "delete", Key: key, Fault: pl.fault}
	}
	return err
}

func (f *FaultBucket) Close() error { return f.b.Close() }
