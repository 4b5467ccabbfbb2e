package streamapi

import (
	"context"
	"net/http"
	"net/url"
)

// CodeQuotaExceeded answers a produce refused because its namespace is over its ingest
// quota (HTTP 429 with Retry-After, gRPC RESOURCE_EXHAUSTED with RetryInfo). Nothing of
// the request was written; retry after the delay.
const CodeQuotaExceeded = "quota_exceeded"

// Quota is a namespace's ingest quota: GET and PUT /v1/namespaces/{ns}/quota.
// IngestBytesPerSec bounds the produce request bytes the cluster admits per second for the
// namespace, across all log nodes; 0 means no quota.
type Quota struct {
	Namespace         string `json:"namespace,omitempty"`
	IngestBytesPerSec int64  `json:"ingest_bytes_per_sec"`
}

// SetQuota sets namespace ns's ingest quota (PUT /v1/namespaces/{ns}/quota); 0 removes it.
func (c *Client) SetQuota(ctx context.Context, ns string, bytesPerSec int64) (Quota, error) {
	var out Quota
	err := c.do(ctx, "set quota", http.MethodPut, "/v1/namespaces/"+url.PathEscape(ns)+"/quota", nil, Quota{IngestBytesPerSec: bytesPerSec}, &out, 0)
	return out, err
}

// GetQuota reads namespace ns's ingest quota (GET /v1/namespaces/{ns}/quota).
func (c *Client) GetQuota(ctx context.Context, ns string) (Quota, error) {
	var out Quota
	err := c.do(ctx, "get quota", http.MethodGet, "/v1/namespaces/"+url.PathEscape(ns)+"/quota", nil, nil, &out, 0)
	return out, err
}
