package meta

import (
	"errors"
	"fmt"
	"time"
)

// The CloudEvents dedup ledger.
//
// CloudEvents promise that source + id identify an event, so ingest is idempotent per
// stream. The sequencer keeps, per stream, a ledger of keys SHA-256(source ‖ 0x00 ‖ id):
// a request claims its events' keys (pending for EventClaim.Pending), appends the claimed
// events, then completes them with their offsets (kept for EventComplete.Window) or, when
// the append definitely failed, releases them. A claim that is neither lapses. Expired
// entries are pruned inside the state machine, and a namespace holds at most
// EventClaim.MaxEntries live entries.

// EventKey is an event's deduplication key, SHA-256(source ‖ 0x00 ‖ id).
type EventKey = [32]byte

// Ledger bounds and defaults.
const (
	// DefaultEventPending is how long a claim lives unless completed or released: longer
	// than a writer's WriterBudget, so a live request completes before it lapses.
	DefaultEventPending = 2 * time.Minute
	MaxEventPending     = 10 * time.Minute
	// DefaultEventWindow is how long a completed key is kept (the dedup window).
	DefaultEventWindow = time.Hour
	MaxEventWindow     = 24 * time.Hour
	// DefaultMaxEventEntries caps a namespace's live ledger entries (about 150 bytes
	// each in the state machine's file, both indexes included).
	DefaultMaxEventEntries = 1_000_000
	// MaxEventKeys bounds the keys of one claim, complete or release.
	MaxEventKeys = 10000
)

// ErrEventLedgerFull refuses a claim that would take its namespace over its cap of live
// ledger entries; nothing was claimed. Retry once entries expire.
var ErrEventLedgerFull = errors.New("meta: CloudEvents dedup ledger full")

// EventStatus is one key's claim answer.
type EventStatus uint8

const (
	EventClaimed   EventStatus = 0 // the key is this claim's: append the event
	EventDuplicate EventStatus = 1 // appended before: Partition and Offset say where
	EventInFlight  EventStatus = 2 // pending under another claim: retry later
)

func (s EventStatus) String() string {
	switch s {
	case EventClaimed:
		return "claimed"
	case EventDuplicate:
		return "duplicate"
	case EventInFlight:
		return "in_flight"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// EventClaim claims keys of one stream for one request. Claim is the request's id,
// chosen at random: a retried claim with the same id answers the same.
type EventClaim struct {
	Namespace  string
	StreamID   uint64
	Node       string
	Claim      uint64
	Keys       []EventKey // no key twice
	Pending    time.Duration
	MaxEntries int64
}

// EventClaimAnswer is one key's answer.
type EventClaimAnswer struct {
	Status    EventStatus
	Partition int32 // EventDuplicate: where the event was appended
	Offset    int64
}

// EventDone is one appended event.
type EventDone struct {
	Key       EventKey
	Partition int32
	Offset    int64
}

// EventComplete marks a claim's appended keys done for Window.
type EventComplete struct {
	Namespace string
	StreamID  uint64
	Claim     uint64
	Done      []EventDone
	Window    time.Duration
}

// EventRelease drops a claim's pending keys.
type EventRelease struct {
	Namespace string
	StreamID  uint64
	Claim     uint64
	Keys      []EventKey
}

// CheckEventClaim validates a claim's bounds.
func CheckEventClaim(c EventClaim) error {
	switch {
	case c.Namespace == "":
		return fmt.Errorf("%w: claim events: empty namespace", ErrInvalidArgument)
	case len(c.Keys) == 0 || len(c.Keys) > MaxEventKeys:
		return fmt.Errorf("%w: claim events: %d keys, want 1..%d", ErrInvalidArgument, len(c.Keys), MaxEventKeys)
	case c.Pending < time.Second || c.Pending > MaxEventPending:
		return fmt.Errorf("%w: claim events: pending %v is out of range [1s, %v]", ErrInvalidArgument, c.Pending, MaxEventPending)
	case c.MaxEntries <= 0:
		return fmt.Errorf("%w: claim events: max entries %d is not positive", ErrInvalidArgument, c.MaxEntries)
	}
	return nil
}

// CheckEventWindow validates a dedup window: (0, MaxEventWindow].
func CheckEventWindow(w time.Duration) error {
	if w < time.Millisecond || w > MaxEventWindow {
		return fmt.Errorf("%w: CloudEvents dedup window %v is out of range (0, %v]", ErrInvalidArgument, w, MaxEventWindow)
	}
	return nil
}

// EventLedgerFullError names the namespace and its cap.
type EventLedgerFullError struct {
	Namespace string
	Max       int64
}

func (e *EventLedgerFullError) Error() string {
	return fmt.Sprintf("namespace %q holds its cap of %d CloudEvents dedup ledger entries: retry once entries expire", e.Namespace, e.Max)
}

// Unwrap makes errors.Is(err, ErrEventLedgerFull) hold.
func (e *EventLedgerFullError) Unwrap() error { return ErrEventLedgerFull }
