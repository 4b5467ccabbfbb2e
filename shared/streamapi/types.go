package streamapi

import (
	"encoding/json"
)

// Record is one record in a produce request or a fetch answer.
type Record struct {
	Offset      *int64          `json:"offset,omitempty"`    // fetch only
	Partition   *int32          `json:"partition,omitempty"` // produce: optional target
	Timestamp   *int64          `json:"timestamp,omitempty"` // ms since the epoch
	Key         *string         `json:"key,omitempty"`
	KeyBase64   []byte          `json:"key_base64,omitzero"` // omitzero: an empty key is "", not absent
	Value       json.RawMessage `json:"value,omitempty"`
	ValueBase64 []byte          `json:"value_base64,omitzero"` // omitzero: an empty value is "", not a tombstone
	Headers     Headers         `json:"headers,omitempty"`     // in order; keys may repeat
}

// ProduceRequest is the body of POST /v1/namespaces/{ns}/streams/{stream}/records.
type ProduceRequest struct {
	// ProducerFields make the produce idempotent (producer.go); absent for a plain one.
	ProducerFields
	Records []Record `json:"records"`
}

// RecordOffset is where one produced record landed.
type RecordOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// Error is set, and Offset is -1, only in a 207 answer: this record was refused while
	// others of the request committed (see docs/http-api.md, "Partial commits").
	Error *ErrorDetail `json:"error,omitempty"`
}

// ProduceResponse lists each record's partition and offset in request order (a binary
// produce: each batch's partition and base offset in body order), and a consistency token.
type ProduceResponse struct {
	Offsets []RecordOffset `json:"offsets"`
	Token   string         `json:"token"`
}

// FetchResponse answers GET …/partitions/{p}/records.
type FetchResponse struct {
	Records       []Record `json:"records"`
	NextOffset    int64    `json:"next_offset"`
	HighWatermark int64    `json:"high_watermark"`
	LogStart      int64    `json:"log_start"`
}

// CreateStreamRequest is the body of POST /v1/namespaces/{ns}/streams. Absent fields take
// defaults: 1 partition, class standard, encoding kafka, retention 7 days (bytes -1),
// cleanup_policy delete.
type CreateStreamRequest struct {
	Name           string `json:"name"`
	Partitions     *int32 `json:"partitions,omitempty"`
	Class          string `json:"class,omitempty"`
	Encoding       string `json:"encoding,omitempty"`
	RetentionMs    *int64 `json:"retention_ms,omitempty"`
	RetentionBytes *int64 `json:"retention_bytes,omitempty"`
	CleanupPolicy  string `json:"cleanup_policy,omitempty"`
	// KeyAttribute names the OTLP attribute whose value keys the stream's OTLP log records
	// (for example service.name): 1..255 bytes of UTF-8; empty: keyless records.
	KeyAttribute string `json:"key_attribute,omitempty"`
	// LeaderZone is a quorum stream's placement hint: the zone its journal's leader should
	// be in (its producers' zone). Only with class quorum.
	LeaderZone string `json:"leader_zone,omitempty"`
	// Schema is an arrow stream's schema (encoding "arrow" needs one; docs/arrow.md).
	Schema json.RawMessage `json:"schema,omitempty"`
}

// PatchStreamRequest is the body of PATCH /v1/namespaces/{ns}/streams/{stream}; absent
// fields stay. Partitions may only grow.
type PatchStreamRequest struct {
	Partitions     *int32  `json:"partitions,omitempty"`
	RetentionMs    *int64  `json:"retention_ms,omitempty"`
	RetentionBytes *int64  `json:"retention_bytes,omitempty"`
	CleanupPolicy  *string `json:"cleanup_policy,omitempty"`
	// KeyAttribute replaces the stream's OTLP key attribute; "" clears it (keyless).
	KeyAttribute *string `json:"key_attribute,omitempty"`
	// LeaderZone replaces a quorum stream's leader zone hint; "" clears it.
	LeaderZone *string `json:"leader_zone,omitempty"`
}

// PartitionInfo is one partition's offsets in a stream description.
type PartitionInfo struct {
	Partition     int32 `json:"partition"`
	LogStart      int64 `json:"log_start"`
	HighWatermark int64 `json:"high_watermark"`
}

// Stream describes a stream (create, get, patch answers; list items omit partitions).
type Stream struct {
	Namespace      string          `json:"namespace"`
	Name           string          `json:"name"`
	ID             uint64          `json:"id"`
	Partitions     int32           `json:"partitions"`
	Class          string          `json:"class"`
	Encoding       string          `json:"encoding"`
	RetentionMs    int64           `json:"retention_ms"`
	RetentionBytes int64           `json:"retention_bytes"`
	CleanupPolicy  string          `json:"cleanup_policy"`
	KeyAttribute   string          `json:"key_attribute"`         // OTLP key attribute; "": keyless
	LeaderZone     string          `json:"leader_zone,omitempty"` // quorum: the leader zone hint
	CreatedAtMs    int64           `json:"created_at_ms"`
	PartitionInfo  []PartitionInfo `json:"partition_info,omitempty"`
}

// ListStreamsResponse answers GET /v1/namespaces/{ns}/streams.
type ListStreamsResponse struct {
	Streams []Stream `json:"streams"`
}

// ErrorBody is every error answer: {"error": {"code": "stream_not_found", "message": "…"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail names what is wrong. Retriable tells clients a retry may succeed; for
// commit_unknown the write may or may not have happened.
type ErrorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retriable bool   `json:"retriable,omitempty"`
	LogStart  *int64 `json:"log_start,omitempty"`
	HighWater *int64 `json:"high_watermark,omitempty"`
}

// Error codes of ErrorDetail.Code.
const (
	CodeBadRequest         = "bad_request"
	CodeInvalidJSON        = "invalid_json"
	CodeInvalidRecord      = "invalid_record"
	CodeNamespaceNotFound  = "namespace_not_found"
	CodeStreamNotFound     = "stream_not_found"
	CodeStreamExists       = "stream_exists"
	CodePartitionNotFound  = "partition_not_found"
	CodeOffsetOutOfRange   = "offset_out_of_range"
	CodeRecordTooLarge     = "record_too_large"
	CodeRequestTooLarge    = "request_too_large"
	CodeUnsupportedClass   = "unsupported_class"
	CodeUnavailable        = "unavailable"
	CodeCommitUnknown      = "commit_unknown"
	CodeCommitFailed       = "commit_failed"
	CodeNotFound           = "not_found"
	CodeMethodNotAllowed   = "method_not_allowed"
	CodeUnsupportedMedia   = "unsupported_media_type"
	CodeInternal           = "internal"
	CodeStaleCommit        = "stale_commit"
	CodeInvalidArgument    = "invalid_argument"
	CodeUnauthorized       = "unauthorized"
	CodeServiceUnavailable = "service_unavailable"
	CodeOverloaded         = "overloaded"
)

// Node is a live log node, as GET /v1/cluster/nodes?zone= lists it.
type Node struct {
	ID       string `json:"id"`
	Zone     string `json:"zone"`
	HTTPAddr string `json:"http"`
}

// ListNodesResponse answers GET /v1/cluster/nodes?zone=: the live nodes of the zone, or
// every live node when the zone has none.
type ListNodesResponse struct {
	Nodes []Node `json:"nodes"`
}
