package coord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"time"
	"unicode/utf8"
)

// Sentinel errors every implementation returns, wrapped with the operation and key.
var (
	// ErrNotFound: no live item has the key (it never existed, was deleted or expired).
	ErrNotFound = errors.New("coord: item not found")
	// ErrConditionFailed: a write's Condition did not hold; nothing was written.
	ErrConditionFailed = errors.New("coord: condition failed")
	// ErrInvalid: a key, attribute name or value, or condition breaks the rules on Store.
	ErrInvalid = errors.New("coord: invalid argument")
	// ErrCorrupt: a stored item could not be decoded.
	ErrCorrupt = errors.New("coord: corrupt item")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("coord: store closed")
)

// Store is a conditional item store: DynamoDB's data model cut down to what Loam's
// coordination needs. Items are addressed by a partition key and a sort key and carry
// string attributes and int64 counters. Every method is safe for concurrent use, and reads
// see every write that returned before they started.
//
// Keys: PK is 1–2048 bytes and SK 1–1024 bytes of valid UTF-8 (DynamoDB's key limits).
// Attribute and counter names are 1–255 bytes of UTF-8, attribute values any valid UTF-8
// (empty allowed). Breaking a rule fails with ErrInvalid before anything is sent.
//
// Versions: every write of an item (Put, Add) gives it a new Version, a random non-zero
// 63-bit number. Versions are tags to compare for equality, not counters: they neither grow
// nor repeat, so a Version seen before a Delete or an expiry never matches a later item.
//
// Expiry: an item whose ExpiresAt is not after Now() is expired. Expired items are invisible:
// Get answers ErrNotFound, Query skips them, IfAbsent holds and IfVersion fails on them, and
// Add starts them afresh. ExpiresAt is kept in whole seconds, rounded up (DynamoDB's TTL
// attribute is epoch seconds). Expired items are removed physically later (DynamoDB TTL,
// Bolt.Sweep), which no caller can observe.
//
//   - Put writes item whole, replacing any item with its key (attributes and counters not in
//     item are gone), when cond holds, and returns the stored item: its new Version and its
//     rounded ExpiresAt. item.Version is ignored; use IfVersion.
//   - Get returns the live item with the key, or ErrNotFound.
//   - Query calls fn with each live item of partition pk whose sort key begins with
//     skPrefix ("" for all), in sort-key byte order. An error from fn stops the query and is
//     returned as is. fn runs outside any transaction and may call the store; items written
//     during a Query may or may not be seen.
//   - Delete removes the item with the key when cond holds. Deleting a missing item with the
//     zero Condition succeeds; IfAbsent is not a Delete condition (ErrInvalid).
//   - Add adds delta to counter name of the item atomically, creating the item (no
//     attributes, never expiring) when it is missing or expired, and returns the counter's
//     new value. A live item keeps its attributes, other counters and ExpiresAt. A counter
//     that would leave the int64 range fails with ErrInvalid.
//   - AddAll adds each of deltas (1 to MaxAddAll counters) to its counter of the item in one
//     write, as Add does for one, and returns the counters' new values. A counter that
//     would leave the int64 range fails the call with ErrInvalid and leaves every counter
//     as it was (DynamoDB: put back by a second write, so a reader may see the overflowed
//     sum in between as ErrCorrupt).
//   - Now is the store's clock, by which expiry is judged; helpers set ExpiresAt from it.
//   - Close releases the store; later calls fail with ErrClosed.
type Store interface {
	Put(ctx context.Context, item Item, cond Condition) (Item, error)
	Get(ctx context.Context, pk, sk string) (Item, error)
	Query(ctx context.Context, pk, skPrefix string, fn func(Item) error) error
	Delete(ctx context.Context, pk, sk string, cond Condition) error
	Add(ctx context.Context, pk, sk, name string, delta int64) (int64, error)
	AddAll(ctx context.Context, pk, sk string, deltas map[string]int64) (map[string]int64, error)
	Now() time.Time
	Close() error
}

// Item is one record of a Store.
type Item struct {
	PK, SK    string
	Version   int64     // set by the store on every write
	ExpiresAt time.Time // zero: never expires
	Attrs     map[string]string
	Counters  map[string]int64
}

// Attr returns attribute name, "" when absent.
func (it Item) Attr(name string) string { return it.Attrs[name] }

// Condition guards a write. The zero Condition always holds.
type Condition struct {
	// Absent holds when no live item has the key.
	Absent bool
	// Version, when non-zero, holds when the live item with the key has this Version.
	Version int64
}

// IfAbsent holds when no live item has the key.
var IfAbsent = Condition{Absent: true}

// IfVersion holds when the live item with the key has Version v.
func IfVersion(v int64) Condition { return Condition{Version: v} }

// holds reports whether c holds for cur, the item with the key (nil: none, or expired).
func (c Condition) holds(cur *Item) bool {
	switch {
	case c.Absent:
		return cur == nil
	case c.Version != 0:
		return cur != nil && cur.Version == c.Version
	}
	return true
}

func (c Condition) String() string {
	switch {
	case c.Absent:
		return "if absent"
	case c.Version != 0:
		return fmt.Sprintf("if version %d", c.Version)
	}
	return "always"
}

// Option configures a store.
type Option func(*options)

type options struct {
	now func() time.Time
}

// WithClock makes the store judge expiry by now instead of time.Now (tests, fake clocks).
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

func applyOptions(opts []Option) options {
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Limits of keys and names (DynamoDB's for keys).
const (
	MaxPKLen   = 2048
	MaxSKLen   = 1024
	MaxNameLen = 255
)

// MaxAddAll bounds the counters of one AddAll: each is a clause of one DynamoDB update
// expression, which may not exceed 4 KB (moto_server fails on somewhat under 200 clauses).
const MaxAddAll = 128

// queryPage is how many items one Query page holds (bbolt transaction, DynamoDB request).
const queryPage = 100

func checkKey(pk, sk string) error {
	switch {
	case pk == "" || len(pk) > MaxPKLen || !utf8.ValidString(pk):
		return fmt.Errorf("coord: partition key %q: must be 1-%d bytes of UTF-8: %w", clip(pk), MaxPKLen, ErrInvalid)
	case sk == "" || len(sk) > MaxSKLen || !utf8.ValidString(sk):
		return fmt.Errorf("coord: sort key %q: must be 1-%d bytes of UTF-8: %w", clip(sk), MaxSKLen, ErrInvalid)
	}
	return nil
}

func checkPK(pk string) error {
	if pk == "" || len(pk) > MaxPKLen || !utf8.ValidString(pk) {
		return fmt.Errorf("coord: partition key %q: must be 1-%d bytes of UTF-8: %w", clip(pk), MaxPKLen, ErrInvalid)
	}
	return nil
}

func checkName(name string) error {
	if name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) {
		return fmt.Errorf("coord: name %q: must be 1-%d bytes of UTF-8: %w", clip(name), MaxNameLen, ErrInvalid)
	}
	return nil
}

func checkAddAll(pk, sk string, deltas map[string]int64) error {
	if err := checkKey(pk, sk); err != nil {
		return err
	}
	if len(deltas) == 0 || len(deltas) > MaxAddAll {
		return fmt.Errorf("coord: add all %s/%s: %d counters, want 1-%d: %w", clip(pk), clip(sk), len(deltas), MaxAddAll, ErrInvalid)
	}
	for name := range deltas {
		if err := checkName(name); err != nil {
			return err
		}
	}
	return nil
}

func checkCond(c Condition, forDelete bool) error {
	switch {
	case c.Absent && c.Version != 0:
		return fmt.Errorf("coord: condition both absent and version %d: %w", c.Version, ErrInvalid)
	case c.Absent && forDelete:
		return fmt.Errorf("coord: delete if absent: %w", ErrInvalid)
	}
	return nil
}

func checkItem(it Item) error {
	if err := checkKey(it.PK, it.SK); err != nil {
		return err
	}
	for k, v := range it.Attrs {
		if err := checkName(k); err != nil {
			return err
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("coord: attribute %q: value is not UTF-8: %w", k, ErrInvalid)
		}
	}
	for k := range it.Counters {
		if err := checkName(k); err != nil {
			return err
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// newVersion returns a random non-zero 63-bit version.
func newVersion() int64 { return rand.Int64N(math.MaxInt64) + 1 }

// roundExpiry rounds t up to a whole second; zero stays zero.
func roundExpiry(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.Unix(expiryUnix(t), 0)
}

// expiryUnix is non-zero t in epoch seconds, rounded up, at least 1.
func expiryUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return max(s, 1) // 0 means never; earlier times are long expired anyway
}

// expiredAt reports whether an item with epoch-second expiry exp (0: never) is expired at
// now: exp is not after now.
func expiredAt(exp int64, now time.Time) bool {
	return exp != 0 && !time.Unix(exp, 0).After(now)
}

// addInt64 adds a and b, failing on overflow.
func addInt64(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

// cloneItem copies it with its maps, so callers and stores never share them.
func cloneItem(it Item) Item {
	it.Attrs = maps.Clone(it.Attrs)
	it.Counters = maps.Clone(it.Counters)
	return it
}
