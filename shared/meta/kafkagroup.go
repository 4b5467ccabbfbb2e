package meta

import (
	"errors"
	"fmt"
)

// Kafka consumer groups.
//
// A Kafka consumer group of a namespace is run by one group coordinator, a log node, which
// keeps the group's members, their subscriptions and assignments in memory. The sequencer
// keeps what must survive that node: the group's generation and its committed offsets, keyed
// by (namespace, group, topic, partition), each with a leader epoch and a metadata string.
//
// Fencing: every change of a group's generation is one Raft command (AdvanceKafkaGroup) whose
// Raft index becomes the group's Epoch, a number never reused, not even by a group deleted
// and created again. A coordinator that takes a group over (after a restart, or after the
// group moved to it) claims it (Epoch 0), which advances the generation and fences the
// previous coordinator; each rebalance it completes advances from the epoch it holds. Every
// offset commit, offset deletion and group deletion names the generation and epoch the
// coordinator believes current, and the sequencer refuses it with ErrStaleGroupGeneration
// unless both are the group's: a coordinator that lost the group cannot commit.

// Kafka group limits.
const (
	// MaxKafkaGroups caps the groups of one namespace kept by the sequencer.
	MaxKafkaGroups = 10000
	// MaxKafkaGroupID is the longest group id, in bytes.
	MaxKafkaGroupID = 255
	// MaxKafkaCommitOffsets caps the partitions of one offset commit (and one deletion).
	MaxKafkaCommitOffsets = 10000
	// MaxKafkaOffsetMetadata is the longest metadata of one committed offset (Kafka's
	// offset.metadata.max.bytes).
	MaxKafkaOffsetMetadata = 4096
)

var (
	// ErrStaleGroupGeneration: a group write under a generation or epoch that is not the
	// group's current one (another coordinator claimed or advanced it, or it was deleted).
	// Nothing was changed.
	ErrStaleGroupGeneration = errors.New("meta: stale kafka group generation")
	// ErrKafkaGroupNotFound: the namespace has no Kafka group of that id.
	ErrKafkaGroupNotFound = errors.New("meta: kafka group not found")
)

// KafkaGroupGeneration is a group's generation and the epoch that fences it.
type KafkaGroupGeneration struct {
	Generation int32  `json:"generation"`
	Epoch      uint64 `json:"epoch"`
}

// KafkaOffset is one committed offset of a group: the next offset to read.
type KafkaOffset struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leader_epoch"` // -1: none
	Metadata    string `json:"metadata,omitempty"`
	CommittedMs int64  `json:"committed_ms,omitempty"` // set by the sequencer
}

// KafkaOffsetCommit commits offsets of a group, all or none, under Generation and Epoch.
type KafkaOffsetCommit struct {
	Namespace  string
	Group      string
	Generation int32
	Epoch      uint64
	Offsets    []KafkaOffset
}

// KafkaTopicPartition names one partition of a topic.
type KafkaTopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// KafkaGroupState is a group as the sequencer keeps it: offsets by topic and partition.
type KafkaGroupState struct {
	Group        string        `json:"group"`
	Generation   int32         `json:"generation"`
	Epoch        uint64        `json:"epoch"`
	ProtocolType string        `json:"protocol_type"`
	CreatedMs    int64         `json:"created_ms"`
	UpdatedMs    int64         `json:"updated_ms"`
	Offsets      []KafkaOffset `json:"offsets"`
}

// CheckKafkaGroupID validates a group id: 1..MaxKafkaGroupID bytes without NUL.
func CheckKafkaGroupID(g string) error {
	ok := len(g) > 0 && len(g) <= MaxKafkaGroupID
	for i := 0; ok && i < len(g); i++ {
		ok = g[i] != 0
	}
	if !ok {
		return fmt.Errorf("%w: kafka group id %q: want 1..%d bytes without NUL", ErrInvalidArgument, g, MaxKafkaGroupID)
	}
	return nil
}

// CheckKafkaOffsetCommit validates a commit's shape: a group id, an epoch, 1..
// MaxKafkaCommitOffsets offsets of distinct (topic, partition) with partitions and offsets
// >= 0 and metadata of at most MaxKafkaOffsetMetadata bytes. Topic names are checked where
// stream names are.
func CheckKafkaOffsetCommit(c KafkaOffsetCommit) error {
	if err := CheckKafkaGroupID(c.Group); err != nil {
		return fmt.Errorf("commit kafka offsets: %w", err)
	}
	if c.Epoch == 0 {
		return fmt.Errorf("%w: commit kafka offsets of %s: no epoch", ErrInvalidArgument, c.Group)
	}
	if len(c.Offsets) == 0 || len(c.Offsets) > MaxKafkaCommitOffsets {
		return fmt.Errorf("%w: commit kafka offsets of %s: %d offsets: want 1..%d", ErrInvalidArgument, c.Group, len(c.Offsets), MaxKafkaCommitOffsets)
	}
	seen := make(map[KafkaTopicPartition]bool, len(c.Offsets))
	for _, o := range c.Offsets {
		tp := KafkaTopicPartition{o.Topic, o.Partition}
		switch {
		case o.Partition < 0:
			return fmt.Errorf("%w: commit kafka offsets of %s: %s partition %d", ErrInvalidArgument, c.Group, o.Topic, o.Partition)
		case seen[tp]:
			return fmt.Errorf("%w: commit kafka offsets of %s: %s partition %d twice", ErrInvalidArgument, c.Group, o.Topic, o.Partition)
		case o.Offset < 0:
			return fmt.Errorf("%w: commit kafka offsets of %s: %s partition %d: offset %d", ErrInvalidArgument, c.Group, o.Topic, o.Partition, o.Offset)
		case len(o.Metadata) > MaxKafkaOffsetMetadata:
			return fmt.Errorf("%w: commit kafka offsets of %s: %s partition %d: metadata of %d bytes: at most %d", ErrInvalidArgument,
				c.Group, o.Topic, o.Partition, len(o.Metadata), MaxKafkaOffsetMetadata)
		}
		seen[tp] = true
	}
	return nil
}
