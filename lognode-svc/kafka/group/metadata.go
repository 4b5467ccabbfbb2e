package group

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SubscribedTopics decodes the topics of a classic "consumer" protocol member metadata
// (ConsumerMemberMetadata, any version): malformed bytes are an error, never a panic.
func SubscribedTopics(metadata []byte) ([]string, error) {
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(metadata); err != nil {
		return nil, fmt.Errorf("group: consumer member metadata of %d bytes: %w", len(metadata), err)
	}
	return m.Topics, nil
}

// AssignedPartitions decodes a classic "consumer" protocol member assignment
// (ConsumerMemberAssignment): topic → partitions. Malformed bytes are an error.
func AssignedPartitions(assignment []byte) (map[string][]int32, error) {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("group: consumer member assignment of %d bytes: %w", len(assignment), err)
	}
	out := make(map[string][]int32, len(a.Topics))
	for _, t := range a.Topics {
		out[t.Topic] = append(out[t.Topic], t.Partitions...)
	}
	return out, nil
}
