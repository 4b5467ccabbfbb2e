package kafka

import (
	"fmt"
	"strconv"
	"time"

	"github.com/loamhq/loam/shared/meta"
)

// Topic configurations: the three that map onto stream settings. Any other name is
// refused INVALID_CONFIG naming it.
const (
	cfgRetentionMs    = "retention.ms"
	cfgRetentionBytes = "retention.bytes"
	cfgCleanupPolicy  = "cleanup.policy"
)

// Stream defaults (the HTTP and gRPC APIs' create defaults).
var (
	defaultRetentionMs    = 7 * 24 * time.Hour.Milliseconds()
	defaultRetentionBytes = int64(-1)
	defaultCleanupPolicy  = meta.CleanupDelete
)

var topicConfigNames = []string{cfgCleanupPolicy, cfgRetentionBytes, cfgRetentionMs}

// topicConfig is one configuration's value on a stream and whether it is the default.
type topicConfig struct {
	name, value string
	isDefault   bool
}

func configsOf(st meta.Stream) []topicConfig {
	return []topicConfig{
		{cfgCleanupPolicy, st.CleanupPolicy, st.CleanupPolicy == defaultCleanupPolicy},
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
	default:
		return fmt.Errorf("topic config %q is not served: only retention.ms, retention.bytes and cleanup.policy are", name)
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
}
