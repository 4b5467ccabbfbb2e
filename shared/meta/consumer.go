package meta

import (
	"errors"
	"fmt"
	"time"
)

// Named consumers.
//
// A named consumer of a namespace keeps a committed offset per (stream, partition), with an
// optional metadata string, in the Raft state machine. Its members read one stream each;
// the partitions of that stream are leased to them so that no two members read the same
// partition at once:
//
//   - a member calls ConsumerHeartbeat every session/3 or so. The heartbeat records the
//     member live until clock + session and renews every lease it holds for as long;
//   - with M live members (ordered by member id) and P partitions, member i's share is
//     ⌊P/M⌋, plus one when i < P mod M. A heartbeat releases the member's leases beyond its
//     share (highest partitions first) and claims free partitions (never leased, released
//     or expired) up to it, lowest first, each at the next epoch of that partition;
//   - a member that stops heartbeating is dropped, and its leases end, at the expiry the
//     heartbeat answered; a member that leaves (Leave) ends both at once.
//
// Every live member renews at least once per session, so after membership changes each
// releases its extras within one session and the others claim them at their next heartbeat:
// with M live members each holds its share within two sessions.
//
// A commit names the member and, per partition, the epoch of the lease it holds: unless that
// lease is still the member's, live, at that epoch, the whole commit is refused with
// ErrStaleConsumerEpoch. A commit without a member (epoch 0) is accepted only for
// partitions no member holds a live lease on (tools that reset offsets).

// Consumer limits.
const (
	// MaxConsumerMetadata is the longest metadata string of one committed offset (Kafka's
	// offset.metadata.max.bytes).
	MaxConsumerMetadata = 4096
	// MaxConsumerMembers caps the live members of one consumer on one stream.
	MaxConsumerMembers = 1000
	// MaxConsumers caps the consumers of one namespace.
	MaxConsumers = 10000
	// MinConsumerSession and MaxConsumerSession bound a member's session (its lease period).
	MinConsumerSession = 100 * time.Millisecond
	MaxConsumerSession = 10 * time.Minute
	// DefaultConsumerSession is the session clients use when none is set.
	DefaultConsumerSession = 10 * time.Second
)

var (
	// ErrStaleConsumerEpoch: a consumer offset commit under a lease the member no longer
	// holds (released, expired, or granted to another member at a newer epoch), or without
	// a member for a partition a member holds. Nothing was committed.
	ErrStaleConsumerEpoch = errors.New("meta: stale consumer lease epoch")
	// ErrConsumerNotFound: the namespace has no consumer of that name (nothing committed,
	// no member).
	ErrConsumerNotFound = errors.New("meta: consumer not found")
)

// ConsumerHeartbeat is one member's heartbeat (or, with Leave, its departure).
type ConsumerHeartbeat struct {
	Namespace string
	Consumer  string
	Stream    string
	Member    string
	Session   time.Duration
	Leave     bool
}

// ConsumerLease is a partition leased to a member until ExpiresMs (sequencer clock).
type ConsumerLease struct {
	Partition int32  `json:"partition"`
	Epoch     uint64 `json:"epoch"`
	ExpiresMs int64  `json:"expires_ms"`
}

// ConsumerAssignment answers a heartbeat: the member's leases after balancing.
type ConsumerAssignment struct {
	StreamID   uint64          `json:"stream_id"`
	Partitions int32           `json:"partitions"`
	Members    int32           `json:"members"`
	ExpiresMs  int64           `json:"expires_ms"` // the member's session end (0 after Leave)
	Leases     []ConsumerLease `json:"leases"`
}

// ConsumerOffset is one partition's offset to commit: the next offset to read.
type ConsumerOffset struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Metadata  string `json:"metadata,omitempty"`
	Epoch     uint64 `json:"epoch,omitempty"` // the member's lease epoch (0 without a member)
}

// ConsumerCommit commits offsets of one stream, all or none.
type ConsumerCommit struct {
	Namespace string
	Consumer  string
	Stream    string
	Member    string // empty: an unfenced commit (no member may hold the partitions)
	Offsets   []ConsumerOffset
}

// ConsumerPartition is a consumer's state on one partition.
type ConsumerPartition struct {
	Stream         string `json:"stream"`
	StreamID       uint64 `json:"stream_id"`
	Partition      int32  `json:"partition"`
	Committed      int64  `json:"committed"` // -1: nothing committed
	Metadata       string `json:"metadata,omitempty"`
	CommittedMs    int64  `json:"committed_ms,omitempty"`
	Holder         string `json:"holder,omitempty"` // the live lease's member, if any
	Epoch          uint64 `json:"epoch,omitempty"`
	LeaseExpiresMs int64  `json:"lease_expires_ms,omitempty"`
}

// ConsumerMember is a live member of a consumer on a stream.
type ConsumerMember struct {
	Stream    string `json:"stream"`
	Member    string `json:"member"`
	ExpiresMs int64  `json:"expires_ms"`
}

// ConsumerState is what DescribeConsumer answers: partitions ordered by stream id and
// partition (streams deleted since are left out), live members by stream and member.
type ConsumerState struct {
	Partitions []ConsumerPartition `json:"partitions"`
	Members    []ConsumerMember    `json:"members"`
	ClockMs    int64               `json:"clock_ms"`
}

// CheckConsumerHeartbeat validates a heartbeat's shape (names are checked where stream
// names are).
func CheckConsumerHeartbeat(h ConsumerHeartbeat) error {
	if err := checkMember(h.Member); err != nil {
		return fmt.Errorf("consumer heartbeat: %w", err)
	}
	if !h.Leave && (h.Session < MinConsumerSession || h.Session > MaxConsumerSession) {
		return fmt.Errorf("%w: consumer heartbeat: session %s: want %s..%s", ErrInvalidArgument, h.Session, MinConsumerSession, MaxConsumerSession)
	}
	return nil
}

// CheckConsumerCommit validates a commit's shape: a member name when set, 1..MaxPartitions
// offsets of distinct partitions >= 0, offsets >= 0, metadata of at most
// MaxConsumerMetadata bytes, and epochs > 0 exactly when a member is named.
func CheckConsumerCommit(c ConsumerCommit) error {
	if c.Member != "" {
		if err := checkMember(c.Member); err != nil {
			return fmt.Errorf("commit offsets: %w", err)
		}
	}
	if len(c.Offsets) == 0 || len(c.Offsets) > MaxPartitions {
		return fmt.Errorf("%w: commit offsets: %d offsets: want 1..%d", ErrInvalidArgument, len(c.Offsets), MaxPartitions)
	}
	seen := make(map[int32]bool, len(c.Offsets))
	for _, o := range c.Offsets {
		switch {
		case o.Partition < 0:
			return fmt.Errorf("%w: commit offsets: partition %d", ErrInvalidArgument, o.Partition)
		case seen[o.Partition]:
			return fmt.Errorf("%w: commit offsets: partition %d twice", ErrInvalidArgument, o.Partition)
		case o.Offset < 0:
			return fmt.Errorf("%w: commit offsets: partition %d: offset %d", ErrInvalidArgument, o.Partition, o.Offset)
		case len(o.Metadata) > MaxConsumerMetadata:
			return fmt.Errorf("%w: commit offsets: partition %d: metadata of %d bytes: at most %d", ErrInvalidArgument,
				o.Partition, len(o.Metadata), MaxConsumerMetadata)
		case c.Member != "" && o.Epoch == 0:
			return fmt.Errorf("%w: commit offsets: partition %d: member %s without a lease epoch", ErrInvalidArgument, o.Partition, c.Member)
		case c.Member == "" && o.Epoch != 0:
			return fmt.Errorf("%w: commit offsets: partition %d: epoch %d without a member", ErrInvalidArgument, o.Partition, o.Epoch)
		}
		seen[o.Partition] = true
	}
	return nil
}

// checkMember: 1..MaxNameLength printable ASCII characters without spaces.
func checkMember(m string) error {
	ok := len(m) > 0 && len(m) <= MaxNameLength
	for i := 0; ok && i < len(m); i++ {
		ok = m[i] >= 0x21 && m[i] <= 0x7e
	}
	if !ok {
		return fmt.Errorf("%w: member %q: want 1..%d printable ASCII characters", ErrInvalidArgument, m, MaxNameLength)
	}
	return nil
}
