package fsm

import (
	"fmt"

	"github.com/loamhq/loam/shared/meta"
)

// Defaults applied by NormalizeConfig to fields left at their zero value.
const (
	DefaultRetentionMs    = 7 * 24 * 60 * 60 * 1000 // Kafka's log.retention.ms
	DefaultRetentionBytes = -1
)

// ValidName reports whether s is a valid namespace or stream name: Kafka's topic rules,
// 1..249 characters of [a-zA-Z0-9._-], and neither "." nor "..".
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > meta.MaxNameLength || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

func checkName(kind, s string) error {
	if !ValidName(s) {
		return fmt.Errorf("%w: %s name %q: want 1..%d characters of [a-zA-Z0-9._-], not . or ..",
			meta.ErrInvalidArgument, kind, s, meta.MaxNameLength)
	}
	return nil
}

// NormalizeConfig validates a stream configuration and fills its defaults: namespace
// "default", class standard, encoding kafka, cleanup delete, retention_ms 7 days and
// retention_bytes -1 when zero. It is pure, so the leader runs it before proposing and the
// state machine runs it again when applying.
func NormalizeConfig(c meta.StreamConfig) (meta.StreamConfig, error) {
	if c.Namespace == "" {
		c.Namespace = meta.DefaultNS
	}
	if err := checkName("namespace", c.Namespace); err != nil {
		return c, err
	}
	if err := checkName("stream", c.Name); err != nil {
		return c, err
	}
	if c.Partitions < 1 || c.Partitions > meta.MaxPartitions {
		return c, fmt.Errorf("%w: partitions %d: want 1..%d", meta.ErrInvalidArgument, c.Partitions, meta.MaxPartitions)
	}
	switch c.Class {
	case "":
		c.Class = meta.ClassStandard
	case meta.ClassStandard, meta.ClassExpress, meta.ClassQuorum:
	default:
		return c, fmt.Errorf("%w: class %q: want standard, express or quorum", meta.ErrInvalidArgument, c.Class)
	}
	switch c.Encoding {
	case "":
		c.Encoding = meta.EncodingKafka
	case meta.EncodingKafka:
	default:
		return c, fmt.Errorf("%w: encoding %q: only kafka is supported (arrow is reserved)", meta.ErrInvalidArgument, c.Encoding)
	}
	if c.CleanupPolicy == "" {
		c.CleanupPolicy = meta.CleanupDelete
	}
	if c.RetentionMs == 0 {
		c.RetentionMs = DefaultRetentionMs
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = DefaultRetentionBytes
	}
	if err := checkKeyAttribute(c.KeyAttribute); err != nil {
		return c, err
	}
	if err := checkMaxMessageBytes(c.MaxMessageBytes); err != nil {
		return c, err
	}
	if err := meta.CheckLeaderZone(c.Class, c.LeaderZone); err != nil {
		return c, err
	}
	return c, checkMutable(c.CleanupPolicy, c.RetentionMs, c.RetentionBytes)
}

// checkKeyAttribute refuses a key attribute meta.ValidKeyAttribute refuses.
func checkKeyAttribute(a string) error {
	if !meta.ValidKeyAttribute(a) {
		return fmt.Errorf("%w: key_attribute of %d bytes: want empty or 1..%d bytes of valid UTF-8",
			meta.ErrInvalidArgument, len(a), meta.MaxKeyAttributeLength)
	}
	return nil
}

// checkMaxMessageBytes refuses a batch size bound outside 0..meta.MaxMessageBytesLimit.
func checkMaxMessageBytes(n int32) error {
	if n < 0 || n > meta.MaxMessageBytesLimit {
		return fmt.Errorf("%w: max_message_bytes %d: want 1..%d, or 0 for the log node's record limit",
			meta.ErrInvalidArgument, n, meta.MaxMessageBytesLimit)
	}
	return nil
}

func checkMutable(cleanup string, retMs, retBytes int64) error {
	if cleanup != meta.CleanupDelete && cleanup != meta.CleanupCompact {
		return fmt.Errorf("%w: cleanup_policy %q: want delete or compact", meta.ErrInvalidArgument, cleanup)
	}
	if retMs < -1 || retMs == 0 {
		return fmt.Errorf("%w: retention_ms %d: want -1 or > 0", meta.ErrInvalidArgument, retMs)
	}
	if retBytes < -1 || retBytes == 0 {
		return fmt.Errorf("%w: retention_bytes %d: want -1 or > 0", meta.ErrInvalidArgument, retBytes)
	}
	return nil
}

// ApplyPatch returns cur changed by p, validated. Partitions may only grow; a zero
// retention in the patch means the default, as in NormalizeConfig.
func ApplyPatch(cur meta.StreamConfig, p meta.StreamPatch) (meta.StreamConfig, error) {
	next := cur
	if p.Partitions != nil {
		n := *p.Partitions
		if n < cur.Partitions {
			return cur, fmt.Errorf("%w: partitions %d: a stream's partitions can only grow (now %d)", meta.ErrInvalidArgument, n, cur.Partitions)
		}
		if n > meta.MaxPartitions {
			return cur, fmt.Errorf("%w: partitions %d: want at most %d", meta.ErrInvalidArgument, n, meta.MaxPartitions)
		}
		next.Partitions = n
	}
	if p.RetentionMs != nil {
		next.RetentionMs = *p.RetentionMs
		if next.RetentionMs == 0 {
			next.RetentionMs = DefaultRetentionMs
		}
	}
	if p.RetentionBytes != nil {
		next.RetentionBytes = *p.RetentionBytes
		if next.RetentionBytes == 0 {
			next.RetentionBytes = DefaultRetentionBytes
		}
	}
	if p.CleanupPolicy != nil {
		next.CleanupPolicy = *p.CleanupPolicy
	}
	if p.KeyAttribute != nil {
		if err := checkKeyAttribute(*p.KeyAttribute); err != nil {
			return cur, err
		}
		next.KeyAttribute = *p.KeyAttribute
	}
	if p.MaxMessageBytes != nil {
		if err := checkMaxMessageBytes(*p.MaxMessageBytes); err != nil {
			return cur, err
		}
		next.MaxMessageBytes = *p.MaxMessageBytes
	}
	if p.LeaderZone != nil {
		if err := meta.CheckLeaderZone(cur.Class, *p.LeaderZone); err != nil {
			return cur, err
		}
		next.LeaderZone = *p.LeaderZone
	}
	if err := checkMutable(next.CleanupPolicy, next.RetentionMs, next.RetentionBytes); err != nil {
		return cur, err
	}
	return next, nil
}

// CheckCommit validates a CommitWal's shape (not the streams it names): an object key, at
// least one chunk, every chunk with records > 0, offset >= 0 and length > 0.
func CheckCommit(c meta.CommitWal) error {
	if c.Object == "" {
		return fmt.Errorf("%w: commit wal: empty object key", meta.ErrInvalidArgument)
	}
	if len(c.Chunks) == 0 {
		return fmt.Errorf("%w: commit wal %s: no chunks", meta.ErrInvalidArgument, c.Object)
	}
	for i, ch := range c.Chunks {
		if ch.Records <= 0 || ch.Offset < 0 || ch.Length <= 0 {
			return fmt.Errorf("%w: commit wal %s: chunk %d (stream %d partition %d): records %d, offset %d, length %d: want records > 0, offset >= 0, length > 0",
				meta.ErrInvalidArgument, c.Object, i, ch.StreamID, ch.Partition, ch.Records, ch.Offset, ch.Length)
		}
		if ch.Producer.Has() && c.AllOrNothing {
			return fmt.Errorf("%w: commit wal %s: chunk %d carries producer %d: producer chunks are answered per chunk, not all or nothing",
				meta.ErrInvalidArgument, c.Object, i, ch.Producer.ID)
		}
	}
	return nil
}
