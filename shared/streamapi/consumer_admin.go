package streamapi

import (
	"context"
	"net/http"
	"net/url"
)

// Deleting a named consumer and resetting its offsets over HTTP (docs/consumers.md):
//
//	DELETE /v1/namespaces/{ns}/consumers/{name}[?force=true]  -> 204
//	POST   /v1/namespaces/{ns}/consumers/{name}/reset         ResetOffsetsRequest -> ResetOffsetsResponse

// CodeConsumerActive (409): a delete or reset while members of the consumer are live (on
// the stream, for a reset). Nothing was changed: stop the members (or let their sessions
// end), or force.
const CodeConsumerActive = "consumer_active"

// Where a reset moves the offsets (ResetOffsetsRequest.To).
const (
	ResetEarliest  = "earliest"
	ResetLatest    = "latest"
	ResetOffset    = "offset"
	ResetTimestamp = "timestamp"
)

// ResetOffsetsRequest is the body of POST .../consumers/{name}/reset: the committed offsets
// of Stream's Partitions (all when empty) go to the log start (earliest), the high
// watermark (latest), Offset (offset; clamped to both) or the start of the first chunk
// holding a record at or after TimestampMs (timestamp). Force drops the live members of
// the stream first; without it a reset with live members is refused (consumer_active).
type ResetOffsetsRequest struct {
	Stream      string  `json:"stream"`
	To          string  `json:"to"`
	Partitions  []int32 `json:"partitions,omitempty"`
	Offset      *int64  `json:"offset,omitempty"`
	TimestampMs *int64  `json:"timestamp_ms,omitempty"`
	Force       bool    `json:"force,omitempty"`
}

// PartitionOffset is one partition's committed offset after a reset.
type PartitionOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// ResetOffsetsResponse answers a reset: each partition's new committed offset.
type ResetOffsetsResponse struct {
	Offsets []PartitionOffset `json:"offsets"`
}

// DeleteConsumer deletes consumer name of ns: its offsets, members and leases. With live
// members it fails with CodeConsumerActive unless force.
func (c *Client) DeleteConsumer(ctx context.Context, ns, name string, force bool) error {
	if err := checkNames("delete consumer", ns, name); err != nil {
		return err
	}
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	return c.do(ctx, "delete consumer", http.MethodDelete, "/v1/namespaces/"+url.PathEscape(ns)+"/consumers/"+url.PathEscape(name), q, nil, nil, 0)
}

// ResetOffsets resets consumer name's committed offsets on one stream (ResetOffsetsRequest).
func (c *Client) ResetOffsets(ctx context.Context, ns, name string, req ResetOffsetsRequest) (ResetOffsetsResponse, error) {
	var out ResetOffsetsResponse
	if err := checkNames("reset consumer offsets", ns, name); err != nil {
		return out, err
	}
	err := c.do(ctx, "reset consumer offsets", http.MethodPost, "/v1/namespaces/"+url.PathEscape(ns)+"/consumers/"+url.PathEscape(name)+"/reset", nil, req, &out, 0)
	return out, err
}
