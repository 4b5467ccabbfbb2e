package kafka

import (
	"fmt"
	"strconv"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// Topic configurations: the four that map onto stream settings. Any other name is
// refused INVALID_CONFIG naming it.
const (
	cfgRetentionMs       = "retention.ms"
	cfgRetentionBytes    = "retention.bytes"
	cfgCleanupPolicy     = "cleanup.policy"
	cfgMaxMessageBytes   = "max.message.bytes"
	servedConfigsMessage = "only retention.ms, retention.bytes, cleanup.policy and max.message.bytes are"
)

// Stream defaults (the HTTP and gRPC APIs' create defaults).
var (
	defaultRetentionMs    = 7 * 24 * time.Hour.Milliseconds()
	defaultRetentionBytes = int64(-1)
	defaultCleanupPolicy  = meta.CleanupDelete
)

var topicConfigNames = []string{cfgCleanupPolicy, cfgMaxMessageBytes, cfgRetentionBytes, cfgRetentionMs}

// topicConfig is one configuration's value on a stream and whether it is the default.
type topicConfig struct {
	name, value string
	isDefault   bool
}

// configsOf answers a stream's configs; nodeMax is the node's batch size bound, which a
// stream without its own max.message.bytes has.
func configsOf(st meta.Stream, nodeMax int) []topicConfig {
	return []topicConfig{
		{cfgCleanupPolicy, st.CleanupPolicy, st.CleanupPolicy == defaultCleanupPolicy},
		{cfgMaxMessageBytes, strconv.Itoa(maxMessageBytes(st, nodeMax)), st.MaxMessageBytes == 0},
		{cfgRetentionBytes, strconv.FormatInt(st.RetentionBytes, 10), st.RetentionBytes == defaultRetentionBytes},
		{cfgRetentionMs, strconv.FormatInt(st.RetentionMs, 10), st.RetentionMs == defaultRetentionMs},
	}
}

// setConfig applies name=value (nil value: the default) to patch, or answers why it
// cannot.
func setConfig(patch *meta.StreamPatch, name string, value *string) error {
	switch name {
	case cfgRetentionMs, cfgRetentionBytes:
		v := defaultRetentionMs
		if name == cfgRetentionBytes {
			v = defaultRetentionBytes
		}
		if value != nil {
			n, err := strconv.ParseInt(*value, 10, 64)
			if err != nil || n != -1 && n <= 0 {
				return fmt.Errorf("%s %q: want -1 (unbounded) or a positive integer", name, *value)
			}
			v = n
		}
		if name == cfgRetentionMs {
			patch.RetentionMs = &v
		} else {
			patch.RetentionBytes = &v
		}
	case cfgCleanupPolicy:
		v := defaultCleanupPolicy
		if value != nil {
			v = *value
		}
		if v != meta.CleanupDelete && v != meta.CleanupCompact {
			return fmt.Errorf("cleanup.policy %q: want delete or compact (one policy; delete,compact is not served)", v)
		}
		patch.CleanupPolicy = &v
	case cfgMaxMessageBytes:
		v := int32(0)
		if value != nil {
			n, err := strconv.ParseInt(*value, 10, 32)
			if err != nil || n <= 0 || n > meta.MaxMessageBytesLimit {
				return fmt.Errorf("max.message.bytes %q: want a byte count of 1..%d", *value, meta.MaxMessageBytesLimit)
			}
			v = int32(n)
		}
		patch.MaxMessageBytes = &v
	default:
		return fmt.Errorf("topic config %q is not served: %s", name, servedConfigsMessage)
	}
	return nil
}

// applyPatch sets a stream configuration's fields from a patch (CreateTopics).
func applyPatch(cfg *meta.StreamConfig, p meta.StreamPatch) {
	if p.RetentionMs != nil {
		cfg.RetentionMs = *p.RetentionMs
	}
	if p.RetentionBytes != nil {
		cfg.RetentionBytes = *p.RetentionBytes
	}
	if p.CleanupPolicy != nil {
		cfg.CleanupPolicy = *p.CleanupPolicy
	}
	if p.MaxMessageBytes != nil {
		cfg.MaxMessageBytes = *p.MaxMessageBytes
	}
}

// maxMessageBytes is the largest record batch a produce to st may carry: the stream's
// max.message.bytes, else the node's record limit.
func maxMessageBytes(st meta.Stream, nodeMax int) int {
	if st.MaxMessageBytes > 0 {
		return int(st.MaxMessageBytes)
	}
	return nodeMax
}
