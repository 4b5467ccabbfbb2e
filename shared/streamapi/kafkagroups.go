package streamapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Kafka consumer groups over HTTP, read only (docs/kafka-groups.md; Kafka clients join and
// commit through the Kafka gateway):
//
//	GET /v1/namespaces/{ns}/kafka-groups          -> KafkaGroupList
//	GET /v1/namespaces/{ns}/kafka-groups/{group}  -> KafkaGroupDescription (offsets, lag)

// CodeKafkaGroupNotFound (404): the namespace has no Kafka group of that id.
const CodeKafkaGroupNotFound = "kafka_group_not_found"

// KafkaGroupSummary is one group as the sequencer keeps it.
type KafkaGroupSummary struct {
	Group        string `json:"group"`
	Generation   int32  `json:"generation"`
	ProtocolType string `json:"protocol_type"`
	UpdatedMs    int64  `json:"updated_ms"`
}

// KafkaGroupList answers GET .../kafka-groups, by group id.
type KafkaGroupList struct {
	Groups []KafkaGroupSummary `json:"groups"`
}

// KafkaGroupPartition is a group's committed offset on one partition with its lag
// (high_watermark - committed, at least 0).
type KafkaGroupPartition struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     int64  `json:"committed"`
	HighWatermark int64  `json:"high_watermark"`
	Lag           int64  `json:"lag"`
	Metadata      string `json:"metadata,omitempty"`
	CommittedMs   int64  `json:"committed_ms"`
}

// KafkaGroupDescription answers GET .../kafka-groups/{group}.
type KafkaGroupDescription struct {
	Group        string                `json:"group"`
	Generation   int32                 `json:"generation"`
	Epoch        uint64                `json:"epoch"`
	ProtocolType string                `json:"protocol_type"`
	CreatedMs    int64                 `json:"created_ms"`
	UpdatedMs    int64                 `json:"updated_ms"`
	Partitions   []KafkaGroupPartition `json:"partitions"`
}

// ListKafkaGroups lists a namespace's Kafka groups.
func (c *Client) ListKafkaGroups(ctx context.Context, ns string) ([]KafkaGroupSummary, error) {
	var out KafkaGroupList
	if err := checkNames("list kafka groups", ns); err != nil {
		return nil, err
	}
	err := c.do(ctx, "list kafka groups", http.MethodGet, "/v1/namespaces/"+url.PathEscape(ns)+"/kafka-groups", nil, nil, &out, 0)
	return out.Groups, err
}

// DescribeKafkaGroup answers a Kafka group's generation, committed offsets and lag.
func (c *Client) DescribeKafkaGroup(ctx context.Context, ns, group string) (KafkaGroupDescription, error) {
	var out KafkaGroupDescription
	if err := checkNames("describe kafka group", ns); err != nil {
		return out, err
	}
	if group == "" {
		return out, fmt.Errorf("streamapi: describe kafka group: %w: empty group id", ErrInvalidArgument)
	}
	err := c.do(ctx, "describe kafka group", http.MethodGet, "/v1/namespaces/"+url.PathEscape(ns)+"/kafka-groups/"+url.PathEscape(group), nil, nil, &out, 0)
	return out, err
}
