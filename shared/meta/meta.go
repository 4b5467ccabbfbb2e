// Package meta holds the sequencer's protocol as Go types and the Client interface that
// log nodes, functions and tools use to reach it.
//
// The sequencer (sequencer-svc) is the single source of truth for streams, partitions (next
// offset, high watermark, log start), the offset index and WAL-commit dedupe records.
// Every mutation is one Raft proposal; CommitWal carries one
// log node flush, batched across partitions.
//
// Per-chunk answers: one WAL object carries many streams' chunks, so a chunk that cannot
// commit (its stream was deleted, its partition does not exist) is refused alone:
// CommitResult.Status names each refusal, the other chunks get their offsets, and the
// object is referenced by the committed chunks only (retired at once when none committed).
//
// Commit window: CommitWal carries the WAL object's creation time (its ULID time).
// The sequencer dedupes a retried commit by object path and answers the first commit's
// offsets; it rejects a commit more than StaleAfter older than the metastore clock
// (ErrStaleCommit) and prunes dedupe records after DedupeWindow. The leader refuses commands
// stamped more than MaxClockAhead ahead of its own clock (ErrClockAhead), so one node with a
// fast clock cannot push the metastore clock forward.
//
// Background work: segmenting and compaction run under a Lease of their
// partition and replace index entries with SwapIndex, fenced by the lease's epoch;
// retention moves log starts with TrimPartition. Every index entry is one reference to its
// object; an object left without references is retired, and GC deletes retired objects
// after a grace period (ListRetired, Referenced, ForgetRetired).
package meta

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Commit-window constants.
const (
	StaleAfter            = 15 * time.Minute // a commit older than this is refused (ErrStaleCommit)
	DedupeWindow          = 30 * time.Minute // dedupe records are pruned after this
	WriterBudget          = 60 * time.Second // writers start no new commit attempt after this
	MaxClockAhead         = 60 * time.Second // commands stamped further ahead are refused
	DefaultNS             = "default"
	MaxPartitions         = 10000
	MaxNameLength         = 249 // Kafka's topic name limit
	MaxKeyAttributeLength = 255 // bytes of a stream's KeyAttribute
	ClassStandard         = "standard"
	ClassExpress          = "express"
	ClassQuorum           = "quorum"
	EncodingKafka         = "kafka"
	EncodingArrow         = "arrow"
	CleanupDelete         = "delete"
	CleanupCompact        = "compact"
)

// Sentinel errors. Implementations wrap them; callers test with errors.Is and map them to
// HTTP statuses, gRPC codes or Kafka error codes at the protocol edge.
var (
	ErrNamespaceNotFound = errors.New("meta: namespace not found")
	ErrStreamNotFound    = errors.New("meta: stream not found")
	ErrStreamExists      = errors.New("meta: stream already exists")
	ErrPartitionNotFound = errors.New("meta: partition not found")
	ErrInvalidArgument   = errors.New("meta: invalid argument")
	// ErrStaleCommit: the WAL object's creation time is more than StaleAfter older than the
	// metastore clock and no dedupe record names it. On a first attempt it proves nothing
	// was committed.
	ErrStaleCommit = errors.New("meta: stale commit")
	// ErrClockAhead: the command's stamp is more than MaxClockAhead ahead of the leader.
	ErrClockAhead = errors.New("meta: command stamped ahead of the leader clock")
	// ErrNotLeader: this voter cannot accept writes; retry another voter.
	ErrNotLeader = errors.New("meta: not the leader")
	// ErrUnavailable: the sequencer could not be reached or did not answer. The outcome of
	// a write that failed with it is unknown.
	ErrUnavailable = errors.New("meta: sequencer unavailable")
	// ErrOffsetOutOfRange: a lookup below the log start or above the high watermark, or a
	// trim past the high watermark.
	ErrOffsetOutOfRange = errors.New("meta: offset out of range")
	// ErrLeaseHeld: AcquireLease found a live lease of another holder.
	ErrLeaseHeld = errors.New("meta: lease held by another holder")
	// ErrLeaseLost: a SwapIndex whose lease is not the current grant of its (stream,
	// partition, kind), or has expired on the sequencer clock. Nothing was changed.
	ErrLeaseLost = errors.New("meta: lease lost")
	// ErrIndexChanged: a SwapIndex whose Old entries are no longer exactly what the index
	// holds (another swap, a trim or a stream deletion came first). Nothing was changed.
	ErrIndexChanged = errors.New("meta: index changed")
	// ErrChunkRefused: one chunk of a CommitWal was refused (CommitResult.ChunkErr wraps
	// it with the refusal's own sentinel); the object's other chunks were committed.
	ErrChunkRefused = errors.New("meta: chunk refused")
)

// StreamConfig is what a user sets on a stream.
type StreamConfig struct {
	Namespace      string `json:"namespace"`
	Name           string `json:"name"`
	Partitions     int32  `json:"partitions"`
	Class          string `json:"class"`           // standard | express | quorum
	Encoding       string `json:"encoding"`        // kafka | arrow (arrow reserved)
	RetentionMs    int64  `json:"retention_ms"`    // -1: forever
	RetentionBytes int64  `json:"retention_bytes"` // -1: unbounded, per partition
	CleanupPolicy  string `json:"cleanup_policy"`  // delete | compact
	// KeyAttribute names the OTLP attribute whose value keys the stream's OTLP log records
	// (for example service.name): 1..MaxKeyAttributeLength bytes of UTF-8, or empty for
	// keyless records spread over the partitions.
	KeyAttribute string `json:"key_attribute,omitempty"`
	// MaxMessageBytes bounds one produced record batch of the stream (Kafka's topic config
	// max.message.bytes): 1..MaxMessageBytesLimit, or 0 for the log node's record limit.
	MaxMessageBytes int32 `json:"max_message_bytes,omitempty"`
	// LeaderZone is a quorum stream's placement hint (CheckLeaderZone): the zone its
	// journal's leader should be in, usually its producers' zone. The stream is placed in a
	// journal with a member in that zone and that journal's leader is handed to it
	// (docs/quorum.md, "Leader zone"). Empty: no hint; only streams of class quorum take one.
	LeaderZone string `json:"leader_zone,omitempty"`
}

// MaxLeaderZoneLength bounds a StreamConfig.LeaderZone.
const MaxLeaderZoneLength = 64

// CheckLeaderZone reports a leader zone hint that cannot be one: empty (no hint) or 1..
// MaxLeaderZoneLength bytes of printable ASCII without spaces, only on a stream of class
// quorum. A zone no log node is in is accepted (zones come and go).
func CheckLeaderZone(class, zone string) error {
	if zone == "" {
		return nil
	}
	if class != ClassQuorum {
		return fmt.Errorf("%w: leader_zone %q: only a stream of class quorum takes a leader zone (this one is %s)", ErrInvalidArgument, zone, class)
	}
	if len(zone) > MaxLeaderZoneLength {
		return fmt.Errorf("%w: leader_zone of %d bytes: want 1..%d", ErrInvalidArgument, len(zone), MaxLeaderZoneLength)
	}
	for i := 0; i < len(zone); i++ {
		if c := zone[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: leader_zone %q: byte %d is not printable ASCII (spaces excluded)", ErrInvalidArgument, zone, i)
		}
	}
	return nil
}

// MaxMessageBytesLimit is the largest StreamConfig.MaxMessageBytes (the Kafka gateway's
// default frame limit).
const MaxMessageBytesLimit = 64 << 20

// ValidKeyAttribute reports whether a is a valid StreamConfig.KeyAttribute: empty (keyless)
// or 1..MaxKeyAttributeLength bytes of valid UTF-8.
func ValidKeyAttribute(a string) bool {
	return len(a) <= MaxKeyAttributeLength && utf8.ValidString(a)
}

// Stream is a stream as the sequencer knows it. ID is cluster-unique and never reused, so a
// stream dropped and recreated under its name gets a new ID.
type Stream struct {
	ID          uint64 `json:"id"`
	CreatedAtMs int64  `json:"created_at_ms"`
	StreamConfig
}

// StreamPatch changes a stream; nil fields stay. Partitions may only grow.
type StreamPatch struct {
	Partitions     *int32  `json:"partitions,omitempty"`
	RetentionMs    *int64  `json:"retention_ms,omitempty"`
	RetentionBytes *int64  `json:"retention_bytes,omitempty"`
	CleanupPolicy  *string `json:"cleanup_policy,omitempty"`
	// KeyAttribute replaces the key attribute; a pointer to "" clears it.
	KeyAttribute *string `json:"key_attribute,omitempty"`
	// MaxMessageBytes replaces the batch size bound; a pointer to 0 restores the node's.
	MaxMessageBytes *int32 `json:"max_message_bytes,omitempty"`
	// LeaderZone replaces a quorum stream's leader zone hint; a pointer to "" clears it. It
	// does not move the stream's partitions; its journal's leader follows the new zone.
	LeaderZone *string `json:"leader_zone,omitempty"`
}

// PartitionState is one partition's offsets. For the leaderless classes the high watermark
// is the next offset the sequencer will assign: a commit is visible once applied.
type PartitionState struct {
	StreamID      uint64 `json:"stream_id"`
	Partition     int32  `json:"partition"`
	LogStart      int64  `json:"log_start"`
	HighWatermark int64  `json:"high_watermark"`
	Bytes         int64  `json:"bytes"` // stored bytes referenced by the index
}

// Chunk describes one partition's chunk in a WAL object.
type Chunk struct {
	StreamID     uint64
	Partition    int32
	Records      int64 // offsets the chunk consumes (sum over batches of lastOffsetDelta+1)
	Offset       int64 // byte range of the chunk within the object
	Length       int64
	MaxTimestamp int64 // ms
	// Producer is the idempotent producer of the chunk's batches, if any (see
	// ChunkProducer): a chunk carries at most one producer's batches.
	Producer ChunkProducer
}

// CommitWal is one log node flush: a WAL object and its chunks, in object order.
type CommitWal struct {
	NodeID    string
	Object    string // bucket key of the WAL object
	Class     string
	CreatedMs int64 // the object's ULID time
	StampMs   int64 // the proposer's clock when it sent the command
	Chunks    []Chunk
	// AllOrNothing asks for the rule of clients that predate per-chunk answers: a chunk
	// naming a missing stream or partition fails the whole commit with ErrStreamNotFound or
	// ErrPartitionNotFound and nothing is committed. By default such a chunk is refused
	// alone (CommitResult.Status) and the others commit.
	AllOrNothing bool
}

// ChunkStatus is one chunk's outcome in a CommitResult. Every status but ChunkCommitted
// and ChunkDuplicate is a refusal: the chunk was not committed, and a retry of the same
// object answers the same (the dedupe record keeps it), while the object's other chunks
// were committed. ChunkDuplicate is a success: the chunk's batches were committed before
// (by an earlier object of the same producer) and its base offset is theirs.
type ChunkStatus uint8

const (
	ChunkCommitted          ChunkStatus = 0
	ChunkStreamNotFound     ChunkStatus = 1 // the chunk's stream does not exist (deleted)
	ChunkPartitionNotFound  ChunkStatus = 2 // the stream exists, the partition does not
	ChunkDuplicate          ChunkStatus = 3 // committed before: the original offsets, nothing new written
	ChunkOutOfOrderSequence ChunkStatus = 4 // ErrOutOfOrderSequence
	ChunkProducerFenced     ChunkStatus = 5 // ErrProducerFenced
	ChunkUnknownProducer    ChunkStatus = 6 // ErrUnknownProducer
)

// Err is the sentinel of a refusal: nil for ChunkCommitted and ChunkDuplicate, the
// refusal's sentinel (ErrStreamNotFound, ErrPartitionNotFound, ErrOutOfOrderSequence,
// ErrProducerFenced, ErrUnknownProducer), or ErrChunkRefused for a status this version
// does not know (a newer sequencer's refusal).
func (s ChunkStatus) Err() error {
	switch s {
	case ChunkCommitted, ChunkDuplicate:
		return nil
	case ChunkStreamNotFound:
		return ErrStreamNotFound
	case ChunkPartitionNotFound:
		return ErrPartitionNotFound
	case ChunkOutOfOrderSequence:
		return ErrOutOfOrderSequence
	case ChunkProducerFenced:
		return ErrProducerFenced
	case ChunkUnknownProducer:
		return ErrUnknownProducer
	}
	return fmt.Errorf("%w (status %d)", ErrChunkRefused, uint8(s))
}

// ChunkStatusOf is the refusal status of err (one of the sentinels ChunkStatus.Err
// returns) and true, or false when err is no chunk refusal.
func ChunkStatusOf(err error) (ChunkStatus, bool) {
	switch {
	case errors.Is(err, ErrStreamNotFound):
		return ChunkStreamNotFound, true
	case errors.Is(err, ErrPartitionNotFound):
		return ChunkPartitionNotFound, true
	case errors.Is(err, ErrOutOfOrderSequence):
		return ChunkOutOfOrderSequence, true
	case errors.Is(err, ErrProducerFenced):
		return ChunkProducerFenced, true
	case errors.Is(err, ErrUnknownProducer):
		return ChunkUnknownProducer, true
	}
	return ChunkCommitted, false
}

// CommitResult answers CommitWal per chunk, in request order. Duplicate reports that the
// object was committed before and this is the first commit's answer.
type CommitResult struct {
	// BaseOffsets holds each chunk's first offset (for a ChunkDuplicate, the offset its
	// batches were first committed at), or -1 for a refused chunk.
	BaseOffsets []int64
	// Status is empty when every chunk committed; else it holds one status per chunk.
	Status    []ChunkStatus
	Duplicate bool
	// AppliedIndex is the Raft index of the commit: a consistency token.
	AppliedIndex uint64
}

// ChunkErr is nil when chunk i committed (now or, ChunkDuplicate, before), else an error naming the chunk that wraps its
// refusal's sentinel (ChunkStatus.Err) and ErrChunkRefused.
func (r CommitResult) ChunkErr(i int) error {
	if i >= len(r.Status) || r.Status[i] == ChunkCommitted || r.Status[i] == ChunkDuplicate {
		return nil
	}
	err := r.Status[i].Err()
	if errors.Is(err, ErrChunkRefused) {
		return fmt.Errorf("chunk %d: %w", i, err)
	}
	return fmt.Errorf("chunk %d: %w: %w", i, ErrChunkRefused, err)
}

// Committed is the number of chunks that committed now (duplicates not counted).
func (r CommitResult) Committed() int {
	n := len(r.BaseOffsets)
	for _, s := range r.Status {
		if s != ChunkCommitted {
			n--
		}
	}
	return n
}

// IsDuplicate reports whether chunk i was a duplicate of batches committed before.
func (r CommitResult) IsDuplicate(i int) bool {
	return i < len(r.Status) && r.Status[i] == ChunkDuplicate
}

// EntryKind says what an index entry points at.
type EntryKind uint8

const (
	KindWAL     EntryKind = 1 // a chunk of a WAL object (header + payload)
	KindSegment EntryKind = 2 // a data region of a segment object
)

// IndexEntry is one offset-index entry of a partition: Count offsets starting at
// BaseOffset live in bytes [Offset, Offset+Length) of Object.
type IndexEntry struct {
	BaseOffset   int64     `json:"base_offset"`
	Count        int64     `json:"count"`
	Kind         EntryKind `json:"kind"`
	Object       string    `json:"object"`
	Offset       int64     `json:"offset"`
	Length       int64     `json:"length"`
	MaxTimestamp int64     `json:"max_timestamp"`
}

// End is the offset after the entry's last offset.
func (e IndexEntry) End() int64 { return e.BaseOffset + e.Count }

// PartitionUpdate is a change to one partition pushed by Watch.
type PartitionUpdate struct {
	StreamID      uint64
	Partition     int32
	LogStart      int64
	HighWatermark int64
	Added         []IndexEntry // entries appended at the end of the index
	// Replaced is set when entries were swapped or dropped (segmenting, retention,
	// compaction): readers drop their cached entries of this partition below
	// HighWatermark and look them up again.
	Replaced bool
}

// Event is one applied Raft entry's effect, pushed by Watch in applied order.
type Event struct {
	AppliedIndex uint64
	Partitions   []PartitionUpdate
	// StreamsChanged is set when a stream was created, changed or deleted.
	StreamsChanged bool
	// Reset is set when the watcher fell too far behind: it must drop its caches and
	// look everything up again from AppliedIndex on.
	Reset bool
	// JournalsChanged is set when a journal of the quorum class or the journal of a
	// partition changed (placement.go): log nodes read ListJournals again.
	JournalsChanged bool
}

// Lease kinds: the background work a lease fences.
const (
	LeaseSegment = "segment"
	LeaseCompact = "compact"
)

// Lease limits.
const (
	MaxLeaseTTL = time.Hour
	// MaxSwapEntries bounds Old and New of one IndexSwap (and so one Raft entry).
	MaxSwapEntries = 10000
	// MaxRetiredList bounds one ListRetired answer (and is what limit <= 0 asks for).
	MaxRetiredList = 10000
)

// Lease fences one partition's background work (segmenting, compaction): at most one
// holder has a live lease of a (stream, partition, kind), and only its current grant may
// swap index entries.
type Lease struct {
	StreamID  uint64 `json:"stream_id"`
	Partition int32  `json:"partition"`
	Kind      string `json:"kind"` // LeaseSegment | LeaseCompact (any valid name)
	Holder    string `json:"holder"`
	// Epoch increases with every grant to a holder that did not hold a live lease of this
	// (stream, partition, kind); a renewal keeps it. Never reused.
	Epoch     uint64 `json:"epoch"`
	ExpiresMs int64  `json:"expires_ms"` // on the sequencer clock
}

// IndexSwap replaces a contiguous run of a partition's index entries (the lease's) with
// entries of kind KindSegment covering exactly the same offsets: a segmenter's WAL chunks
// by one segment, or a compactor's segments by new ones.
type IndexSwap struct {
	Lease Lease
	// Old is the run being replaced, exactly as the index holds it (as Lookup returned it):
	// same BaseOffset, Count, Kind, Object, Offset and Length, contiguous.
	Old []IndexEntry
	// New covers [Old[0].BaseOffset, Old[len(Old)-1].End()), contiguous, kind KindSegment.
	New     []IndexEntry
	StampMs int64 // the proposer's clock when it sent the swap (checked like CommitWal's)
}

// RetiredObject is an object no index entry references any more, since RetiredMs (on the
// sequencer clock). GC deletes it after a grace period, then calls ForgetRetired.
type RetiredObject struct {
	Key       string `json:"key"`
	RetiredMs int64  `json:"retired_ms"`
}

// Client reaches the sequencer. Every method is safe for concurrent use. Writes go to the
// Raft leader (implementations forward or retry); reads may be served by any caught-up voter.
type Client interface {
	CreateNamespace(ctx context.Context, name string) error
	ListNamespaces(ctx context.Context) ([]string, error)

	CreateStream(ctx context.Context, cfg StreamConfig) (Stream, error)
	UpdateStream(ctx context.Context, ns, name string, patch StreamPatch) (Stream, error)
	DeleteStream(ctx context.Context, ns, name string) error
	GetStream(ctx context.Context, ns, name string) (Stream, []PartitionState, error)
	ListStreams(ctx context.Context, ns string) ([]Stream, error)

	// CommitWal assigns offsets to a WAL object's chunks (see the package comment).
	CommitWal(ctx context.Context, c CommitWal) (CommitResult, error)

	// InitProducer allocates an idempotent producer of namespace ns (producer.go): with
	// no name and no id (id <= 0) a new id at epoch 0; with a name already known, the
	// same id at epoch + 1, fencing its previous holder (an unknown name gets a new id);
	// with an (id, epoch) presented, epoch + 1 (Kafka's KIP-360 bump; a repeat of the
	// last bump answers the same, an older epoch is ErrProducerFenced, an unknown or
	// expired id gets a new id). An epoch that would pass math.MaxInt16 gets a new id at
	// epoch 0. ErrNamespaceNotFound when ns does not exist.
	InitProducer(ctx context.Context, ns, name string, id int64, epoch int16) (Producer, error)

	// Lookup returns up to max index entries of a partition, starting with the entry that
	// holds offset from, and the partition's state. from at the high watermark returns no
	// entries; below the log start or above the high watermark it fails with
	// ErrOffsetOutOfRange. max <= 0 returns no entries and the partition's state whatever
	// from is: that is how a reader learns a partition's bounds.
	Lookup(ctx context.Context, streamID uint64, partition int32, from int64, max int) ([]IndexEntry, PartitionState, error)

	// Watch calls fn with every event applied after fromIndex (0: from now), in order,
	// until ctx ends or fn returns an error.
	Watch(ctx context.Context, fromIndex uint64, fn func(Event) error) error

	// AcquireLease grants holder the lease of (streamID, partition, kind) for ttl (at most
	// MaxLeaseTTL) on the sequencer clock: when no live lease exists (a new Epoch), or when
	// holder already holds it (a renewal: same Epoch, later ExpiresMs). Another holder's
	// live lease is ErrLeaseHeld. Repeating a call is harmless.
	AcquireLease(ctx context.Context, streamID uint64, partition int32, kind, holder string, ttl time.Duration) (Lease, error)
	// ReleaseLease ends l if it is still the current grant; otherwise it does nothing.
	ReleaseLease(ctx context.Context, l Lease) error
	// SwapIndex replaces s.Old by s.New in one Raft proposal (see IndexSwap): only under
	// the current, unexpired grant of s.Lease (else ErrLeaseLost), only if s.Old is still
	// in the index exactly (else ErrIndexChanged). References move from Old's objects to
	// New's; an object left unreferenced is retired. A swap whose New the index already
	// holds exactly (a retry of an applied swap) answers nil. Watch then reports the
	// partition with Replaced set. After ErrLeaseLost or ErrIndexChanged, delete New's
	// objects only if Referenced says no entry points at them.
	SwapIndex(ctx context.Context, s IndexSwap) error
	// TrimPartition moves the partition's log start forward to logStart (a lower or equal
	// logStart changes nothing; one past the high watermark is ErrOffsetOutOfRange) and
	// drops the entries wholly below it (End() <= logStart), retiring objects left
	// unreferenced. It answers the partition's state afterwards.
	TrimPartition(ctx context.Context, streamID uint64, partition int32, logStart int64) (PartitionState, error)
	// ListRetired lists up to limit retired objects with keys after `after`, in key order
	// (limit <= 0 or above MaxRetiredList: MaxRetiredList).
	ListRetired(ctx context.Context, after string, limit int) ([]RetiredObject, error)
	// ForgetRetired removes keys from the retired set (GC deleted them). Keys not in the
	// set are ignored.
	ForgetRetired(ctx context.Context, keys []string) error
	// Referenced reports, for each key, whether any index entry points at it.
	Referenced(ctx context.Context, keys []string) ([]bool, error)

	// ---- Namespaces and API keys (auth.go) ----

	// DeleteNamespace deletes an empty namespace: ErrNamespaceNotEmpty while it holds
	// streams, ErrNamespaceNotFound when it does not exist, ErrInvalidArgument for
	// DefaultNS (which always exists).
	DeleteNamespace(ctx context.Context, name string) error
	// CreateKey stores k (ID, Hash, Namespace or Admin, Description; CheckKey's rules) and
	// answers it with CreatedMs set. A key whose hash is already stored under the same id
	// and scope answers the stored key (a retry); any other clash is ErrKeyExists.
	// ErrNamespaceNotFound when a namespace key names a missing namespace.
	CreateKey(ctx context.Context, k APIKey) (APIKey, error)
	// ListKeys lists every key, revoked ones included, by id (hashes left out).
	ListKeys(ctx context.Context) ([]APIKey, error)
	// RevokeKey revokes key id (ErrKeyNotFound when unknown); revoking twice is harmless.
	RevokeKey(ctx context.Context, id string) error
	// LookupKey answers the key whose Hash is hash, revoked or not, or ErrKeyNotFound.
	LookupKey(ctx context.Context, hash []byte) (APIKey, error)

	// ---- Named consumers (consumer.go) ----

	// ConsumerHeartbeat joins, renews or (Leave) ends a member of consumer h.Consumer on
	// stream h.Stream, balances the stream's partition leases and answers the member's.
	ConsumerHeartbeat(ctx context.Context, h ConsumerHeartbeat) (ConsumerAssignment, error)
	// CommitConsumerOffsets commits offsets, all or none: ErrStaleConsumerEpoch when a
	// lease named is not the member's live lease; ErrOffsetOutOfRange past a partition's
	// high watermark.
	CommitConsumerOffsets(ctx context.Context, c ConsumerCommit) error
	// DescribeConsumer answers a consumer's offsets, live leases and live members
	// (ErrConsumerNotFound when it has none of them).
	DescribeConsumer(ctx context.Context, ns, consumer string) (ConsumerState, error)
	// ListConsumers lists a namespace's consumers in name order.
	ListConsumers(ctx context.Context, ns string) ([]string, error)

	// ---- Named consumers: delete and reset offsets (consumer_admin.go) ----

	// DeleteConsumer deletes a consumer: its offsets, members and leases.
	// ErrConsumerNotFound when it does not exist; ErrConsumerActive while a member is live,
	// unless force.
	DeleteConsumer(ctx context.Context, ns, consumer string, force bool) error
	// ResetConsumerOffsets sets a consumer's committed offsets on one stream's partitions
	// (ConsumerReset) and answers them; it creates the consumer if needed.
	// ErrConsumerActive while a member is live on the stream, unless r.Force;
	// ErrStreamNotFound, ErrPartitionNotFound.
	ResetConsumerOffsets(ctx context.Context, r ConsumerReset) ([]ConsumerOffset, error)

	// ---- Ingest quotas per namespace (quota.go) ----

	// SetQuota stores ns's ingest quota (IngestBytesPerSec 0 removes it) and answers it.
	// ErrNamespaceNotFound when the namespace does not exist, ErrInvalidArgument for a
	// rate out of range.
	SetQuota(ctx context.Context, q Quota) (Quota, error)
	// GetQuota answers ns's quota (IngestBytesPerSec 0: none).
	GetQuota(ctx context.Context, ns string) (Quota, error)
	// AcquireIngest asks the leader's token bucket of ns for bytes on behalf of log node
	// node: granted (perhaps more, to spend later within Lease), refused until RetryAfter,
	// or Unlimited when ns has no quota.
	AcquireIngest(ctx context.Context, ns, node string, bytes int64) (IngestGrant, error)

	// ---- CloudEvents dedup ledger (cloudevents.go) ----

	// ClaimEvents claims c.Keys of stream c.StreamID for claim c.Claim, all in one
	// proposal, and answers each key in order: EventClaimed (absent, expired or already
	// this claim's: append it), EventDuplicate (done: where it was appended) or
	// EventInFlight (pending under another claim). ErrStreamNotFound when the stream is
	// gone; ErrEventLedgerFull (an *EventLedgerFullError) when the new keys would take the
	// namespace over c.MaxEntries live entries, and then nothing is claimed.
	ClaimEvents(ctx context.Context, c EventClaim) ([]EventClaimAnswer, error)
	// CompleteEvents marks the claim's appended keys done, kept for c.Window: a key
	// pending under the claim, or no longer in the ledger (its claim lapsed and was
	// pruned). A key another claim took meanwhile is left alone. Repeating is harmless.
	CompleteEvents(ctx context.Context, c EventComplete) error
	// ReleaseEvents drops the keys still pending under the claim. Repeating is harmless.
	ReleaseEvents(ctx context.Context, r EventRelease) error
	// ---- Kafka consumer groups (kafkagroup.go) ----

	// AdvanceKafkaGroup moves group to its next generation and answers it with its new
	// epoch. epoch 0 claims the group whatever it holds (creating it, at generation 1, when
	// absent); any other epoch must be the group's current one, else ErrStaleGroupGeneration.
	// ErrNamespaceNotFound when ns does not exist, ErrInvalidArgument past MaxKafkaGroups.
	AdvanceKafkaGroup(ctx context.Context, ns, group string, epoch uint64, protocolType string) (KafkaGroupGeneration, error)
	// CommitKafkaOffsets commits offsets, all or none, when c.Generation and c.Epoch are the
	// group's (else ErrStaleGroupGeneration; ErrKafkaGroupNotFound for no group).
	CommitKafkaOffsets(ctx context.Context, c KafkaOffsetCommit) error
	// DeleteKafkaOffsets drops the group's offsets of parts (absent ones are ignored) under
	// the group's current epoch.
	DeleteKafkaOffsets(ctx context.Context, ns, group string, epoch uint64, parts []KafkaTopicPartition) error
	// DeleteKafkaGroup drops the group and its offsets under its current epoch.
	DeleteKafkaGroup(ctx context.Context, ns, group string, epoch uint64) error
	// DescribeKafkaGroup answers the group's generation and offsets (ErrKafkaGroupNotFound).
	DescribeKafkaGroup(ctx context.Context, ns, group string) (KafkaGroupState, error)
	// ListKafkaGroups lists ns's groups by id, offsets left out.
	ListKafkaGroups(ctx context.Context, ns string) ([]KafkaGroupState, error)

	// ---- Namespace keys: envelope encryption (nskey.go) ----

	// AttachNamespaceKey gives namespace ns the KMS key keyARN (CheckKeyARN's rules) and
	// answers its NamespaceKey (a new ID, generation 1). Attaching the key it already has
	// answers it unchanged; another key while one is attached, or any key once shredded, is
	// ErrInvalidArgument. ErrNamespaceNotFound when ns does not exist.
	AttachNamespaceKey(ctx context.Context, ns, keyARN string) (NamespaceKey, error)
	// RotateNamespaceKey starts ns's next key generation, under keyARN when it is set
	// (else the same KMS key). ErrInvalidArgument when ns has no key or it
	// was shredded.
	RotateNamespaceKey(ctx context.Context, ns, keyARN string) (NamespaceKey, error)
	// ShredNamespaceKey records that ns's key was shredded; repeating it answers the
	// record. ErrInvalidArgument when ns has no key.
	ShredNamespaceKey(ctx context.Context, ns string) (NamespaceKey, error)
	// AckNamespaceShred records that log node node dropped ns's key material and cached
	// plaintext after its shred (repeating is harmless).
	AckNamespaceShred(ctx context.Context, ns, node string) (NamespaceKey, error)
	// ListNamespaceKeys lists every namespace key, by namespace name.
	ListNamespaceKeys(ctx context.Context) ([]NamespaceKey, error)

	// ---- Quorum placement: journals and their partitions (placement.go) ----

	// CreateJournal records journal j (CheckJournalID, CheckJournalMembers) at epoch 1 and
	// places in it, least-loaded journal first, every partition of a quorum stream that no
	// journal holds yet. Repeating it with the same members answers the journal; another
	// journal under the id is ErrInvalidArgument, as is one past MaxJournals.
	CreateJournal(ctx context.Context, j Journal) (Journal, error)
	// SetJournalMembers replaces journal id's members while its epoch is still epoch and
	// answers it at epoch + 1 (ErrJournalEpoch when another change came first; repeating
	// the change that made the current epoch answers it). ErrInvalidArgument for an
	// unknown journal.
	SetJournalMembers(ctx context.Context, id string, epoch uint64, members []JournalMember) (Journal, error)
	// AssignJournalPartitions makes journal the owner of the partitions of quorum stream
	// streamID (ErrStreamNotFound, ErrPartitionNotFound; ErrInvalidArgument for a stream of
	// another class or an unknown journal). A partition no journal holds is assigned at
	// once; one another journal holds gets a move (JournalMove, state MoveRequested) that
	// its journals carry out. Naming a partition's owner cancels its requested move;
	// naming the target of its move again changes nothing; naming a third journal while
	// a move is in progress is ErrInvalidArgument, as is cancelling a sealed move. The
	// request is checked for every partition before any changes.
	AssignJournalPartitions(ctx context.Context, streamID uint64, partitions []int32, journal string) error
	// SealJournalMove records, for the move of m.StreamID/m.Partition from m.From to m.To
	// (state MoveRequested), that From sealed the partition at m.End with its producer
	// states m.Producers (CheckProducerCarry): the move becomes MoveSealed, and the
	// partition's offload lease is released for To. Refused with ErrJournalMove unless
	// that move is requested (or sealed at m.End already: a repeat answers nil), and
	// with ErrIndexChanged unless the partition's high watermark in the offset index is
	// m.End (everything From held is offloaded).
	SealJournalMove(ctx context.Context, m JournalMove) error
	// CompleteJournalMove makes journal the owner of the partition whose move to it is
	// sealed at end, and drops the move. A repeat (the owner is journal and no move)
	// answers nil; otherwise ErrJournalMove.
	CompleteJournalMove(ctx context.Context, streamID uint64, partition int32, journal string, end int64) error
	// ListJournals answers every journal by id and every assignment by stream and partition.
	ListJournals(ctx context.Context) (Placement, error)

	Close() error
}
