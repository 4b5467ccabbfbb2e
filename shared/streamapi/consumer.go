package streamapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Named consumers over HTTP (docs/consumers.md):
//
//	GET  /v1/namespaces/{ns}/consumers                     -> ConsumerList
//	GET  /v1/namespaces/{ns}/consumers/{name}              -> ConsumerDescription (offsets, leases, lag)
//	POST /v1/namespaces/{ns}/consumers/{name}/heartbeat    HeartbeatRequest -> Assignment
//	POST /v1/namespaces/{ns}/consumers/{name}/offsets      CommitOffsetsRequest -> {}

// Error codes of the consumer routes.
const (
	// CodeStaleConsumerEpoch (409): a commit under a lease epoch the member no longer
	// holds, or without a member on a partition a member holds. Nothing was committed:
	// heartbeat, then commit only the partitions still leased.
	CodeStaleConsumerEpoch = "stale_consumer_epoch"
	// CodeConsumerNotFound (404): the namespace has no consumer of that name.
	CodeConsumerNotFound = "consumer_not_found"
)

// HeartbeatRequest is the body of POST .../consumers/{name}/heartbeat: member Member of the
// consumer reads Stream, for SessionMs (100..600000) from now; Leave ends the membership
// and its leases at once.
type HeartbeatRequest struct {
	Stream    string `json:"stream"`
	Member    string `json:"member"`
	SessionMs int64  `json:"session_ms,omitempty"`
	Leave     bool   `json:"leave,omitempty"`
}

// Lease is a partition leased to the member until ExpiresMs (the sequencer's clock, ms
// since the epoch). Epoch goes with every commit of the partition.
type Lease struct {
	Partition int32  `json:"partition"`
	Epoch     uint64 `json:"epoch"`
	ExpiresMs int64  `json:"expires_ms"`
}

// Assignment answers a heartbeat: the member's leases after balancing, the stream's
// partitions and the consumer's live members on it. ClockMs is the sequencer's clock when it
// answered: a member treats a lease as ending ExpiresMs-ClockMs after it sent the heartbeat.
type Assignment struct {
	StreamID   uint64  `json:"stream_id"`
	Partitions int32   `json:"partitions"`
	Members    int32   `json:"members"`
	ExpiresMs  int64   `json:"expires_ms"`
	ClockMs    int64   `json:"clock_ms"`
	Leases     []Lease `json:"leases"`
}

// CommitOffset is one partition's committed offset: the next offset to read. Epoch is the
// member's lease epoch (omitted without a member).
type CommitOffset struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Metadata  string `json:"metadata,omitempty"`
	Epoch     uint64 `json:"epoch,omitempty"`
}

// CommitOffsetsRequest is the body of POST .../consumers/{name}/offsets: all offsets or
// none are committed. Without Member, only partitions no member leases may be committed.
type CommitOffsetsRequest struct {
	Stream  string         `json:"stream"`
	Member  string         `json:"member,omitempty"`
	Offsets []CommitOffset `json:"offsets"`
}

// ConsumerPartition is a consumer's state on one partition. Committed is -1 when nothing
// was committed; Lag is HighWatermark - max(Committed, LogStart) (the records not yet
// consumed that the log still holds).
type ConsumerPartition struct {
	Stream         string `json:"stream"`
	Partition      int32  `json:"partition"`
	Committed      int64  `json:"committed"`
	Metadata       string `json:"metadata,omitempty"`
	CommittedMs    int64  `json:"committed_ms,omitempty"`
	HighWatermark  int64  `json:"high_watermark"`
	LogStart       int64  `json:"log_start"`
	Lag            int64  `json:"lag"`
	Holder         string `json:"holder,omitempty"`
	Epoch          uint64 `json:"epoch,omitempty"`
	LeaseExpiresMs int64  `json:"lease_expires_ms,omitempty"`
}

// ConsumerMember is a live member of the consumer on a stream.
type ConsumerMember struct {
	Stream    string `json:"stream"`
	Member    string `json:"member"`
	ExpiresMs int64  `json:"expires_ms"`
}

// ConsumerDescription answers GET .../consumers/{name}: every partition of every stream
// the consumer committed on or holds a lease of, in stream then partition order.
type ConsumerDescription struct {
	Name       string              `json:"name"`
	Partitions []ConsumerPartition `json:"partitions"`
	Members    []ConsumerMember    `json:"members"`
	ClockMs    int64               `json:"clock_ms"`
}

// ConsumerList answers GET .../consumers.
type ConsumerList struct {
	Consumers []string `json:"consumers"`
}

func consumerPath(ns, name string) string {
	return "/v1/namespaces/" + url.PathEscape(ns) + "/consumers/" + url.PathEscape(name)
}

// Heartbeat sends a member's heartbeat (or, with req.Leave, its departure).
func (c *Client) Heartbeat(ctx context.Context, ns, consumer string, req HeartbeatRequest) (Assignment, error) {
	var out Assignment
	if err := checkNames("consumer heartbeat", ns, consumer, req.Stream); err != nil {
		return out, err
	}
	if req.Member == "" {
		return out, fmt.Errorf("streamapi: consumer heartbeat %s/%s: %w: no member", ns, consumer, ErrInvalidArgument)
	}
	err := c.do(ctx, "consumer heartbeat", http.MethodPost, consumerPath(ns, consumer)+"/heartbeat", nil, req, &out, 0)
	return out, err
}

// CommitOffsets commits offsets, all or none. An *APIError with code CodeStaleConsumerEpoch
// says a lease named was lost: nothing was committed.
func (c *Client) CommitOffsets(ctx context.Context, ns, consumer string, req CommitOffsetsRequest) error {
	if err := checkNames("commit offsets", ns, consumer, req.Stream); err != nil {
		return err
	}
	if len(req.Offsets) == 0 {
		return fmt.Errorf("streamapi: commit offsets %s/%s: %w: no offsets", ns, consumer, ErrInvalidArgument)
	}
	var out struct{}
	return c.do(ctx, "commit offsets", http.MethodPost, consumerPath(ns, consumer)+"/offsets", nil, req, &out, 0)
}

// DescribeConsumer answers a consumer's offsets, leases, lag and members.
func (c *Client) DescribeConsumer(ctx context.Context, ns, consumer string) (ConsumerDescription, error) {
	var out ConsumerDescription
	if err := checkNames("describe consumer", ns, consumer); err != nil {
		return out, err
	}
	err := c.do(ctx, "describe consumer", http.MethodGet, consumerPath(ns, consumer), nil, nil, &out, 0)
	return out, err
}

// ListConsumers lists a namespace's consumers in name order.
func (c *Client) ListConsumers(ctx context.Context, ns string) ([]string, error) {
	var out ConsumerList
	if err := checkNames("list consumers", ns); err != nil {
		return nil, err
	}
	err := c.do(ctx, "list consumers", http.MethodGet, "/v1/namespaces/"+url.PathEscape(ns)+"/consumers", nil, nil, &out, 0)
	return out.Consumers, err
}
