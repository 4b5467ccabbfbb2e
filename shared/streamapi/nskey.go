package streamapi

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// CodeKeyUnavailable answers a read or write of a namespace whose customer-managed key
// cannot be used: disabled, scheduled for deletion or deleted in KMS (crypto-shredded), or
// refused to the log node (HTTP 403, gRPC FAILED_PRECONDITION, Kafka error 29
// TOPIC_AUTHORIZATION_FAILED). The message names the namespace. Only that namespace's
// records fail; re-enabling the key in KMS restores access.
const CodeKeyUnavailable = "key_unavailable"

// CodeShredPending answers a shred that was recorded but not yet confirmed by every live
// log node within its wait (HTTP 504, gRPC DEADLINE_EXCEEDED); the message names the nodes.
// The shred stands: repeat it to wait again.
const CodeShredPending = "shred_pending"

// CodeKMSNotConfigured is the gRPC reason of a key call that needs KMS (create, shred) on
// a log node without one (FAILED_PRECONDITION); over HTTP it answers 400 invalid_argument.
const CodeKMSNotConfigured = "kms_not_configured"

// NamespaceKey is a namespace's customer-managed key: GET, PUT /v1/namespaces/{ns}/key,
// POST .../key/rotate and .../key/shred (docs/encryption.md). It never holds key material.
type NamespaceKey struct {
	Namespace  string   `json:"namespace"`
	ID         uint64   `json:"id"`      // names ns/<id>/ objects
	KMSKey     string   `json:"kms_key"` // the KMS key: ARN, key id or alias
	Generation uint64   `json:"generation"`
	State      string   `json:"state"` // active | shredded
	UpdatedMs  int64    `json:"updated_ms"`
	ShreddedMs int64    `json:"shredded_ms,omitempty"`
	Dropped    []string `json:"dropped,omitempty"` // log nodes that confirmed the shred
	// Waiting lists the live log nodes that had not confirmed the shred when it answered
	// (a shred that timed out); empty once every live node dropped the namespace's keys.
	Waiting []string `json:"waiting,omitempty"`
}

// AttachNamespaceKeyRequest is the body of PUT /v1/namespaces/{ns}/key: kms_key names an
// existing KMS key, or create asks the node's KMS for a new one.
type AttachNamespaceKeyRequest struct {
	KMSKey string `json:"kms_key,omitempty"`
	Create bool   `json:"create,omitempty"`
}

// RotateNamespaceKeyRequest is the body of POST /v1/namespaces/{ns}/key/rotate: kms_key,
// when set, moves the namespace to another KMS key; create makes a new one.
type RotateNamespaceKeyRequest struct {
	KMSKey string `json:"kms_key,omitempty"`
	Create bool   `json:"create,omitempty"`
}

// ShredNamespaceKeyRequest is the body of POST /v1/namespaces/{ns}/key/shred.
type ShredNamespaceKeyRequest struct {
	// PendingDays is the KMS key's deletion waiting period, 7-30 days (default 7).
	PendingDays int `json:"pending_days,omitempty"`
	// WaitMs bounds how long the answer waits for every live log node to confirm
	// (default 60000).
	WaitMs int64 `json:"wait_ms,omitempty"`
}

func keyPath(ns string) string { return "/v1/namespaces/" + url.PathEscape(ns) + "/key" }

// GetNamespaceKey reads namespace ns's key (GET /v1/namespaces/{ns}/key).
func (c *Client) GetNamespaceKey(ctx context.Context, ns string) (NamespaceKey, error) {
	var out NamespaceKey
	err := c.do(ctx, "get namespace key", http.MethodGet, keyPath(ns), nil, nil, &out, 0)
	return out, err
}

// AttachNamespaceKey gives namespace ns a KMS key (PUT /v1/namespaces/{ns}/key).
func (c *Client) AttachNamespaceKey(ctx context.Context, ns string, req AttachNamespaceKeyRequest) (NamespaceKey, error) {
	var out NamespaceKey
	err := c.do(ctx, "attach namespace key", http.MethodPut, keyPath(ns), nil, req, &out, 0)
	return out, err
}

// RotateNamespaceKey starts namespace ns's next key generation (POST .../key/rotate).
func (c *Client) RotateNamespaceKey(ctx context.Context, ns string, req RotateNamespaceKeyRequest) (NamespaceKey, error) {
	var out NamespaceKey
	err := c.do(ctx, "rotate namespace key", http.MethodPost, keyPath(ns)+"/rotate", nil, req, &out, 0)
	return out, err
}

// ShredNamespaceKey disables namespace ns's KMS key, schedules its deletion and waits until
// every live log node dropped the namespace's keys and cached plaintext (POST .../key/shred).
func (c *Client) ShredNamespaceKey(ctx context.Context, ns string, req ShredNamespaceKeyRequest) (NamespaceKey, error) {
	var out NamespaceKey
	wait := time.Duration(req.WaitMs) * time.Millisecond
	if wait <= 0 {
		wait = time.Minute
	}
	err := c.do(ctx, "shred namespace key", http.MethodPost, keyPath(ns)+"/shred", nil, req, &out, wait+5*time.Second)
	return out, err
}
