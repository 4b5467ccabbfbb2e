package streamapi

import (
	"context"
	"net/http"
	"net/url"
)

// Namespaces and API keys (docs/auth.md). Every call but /healthz and /metrics carries
// "Authorization: Bearer <key>" when the client has one (WithAPIKey); a server with auth
// answers 401 (CodeUnauthorized) without a valid key, 403 (CodePermissionDenied) for a key
// of another namespace or a namespace key on an admin route.

// Error codes of namespaces and keys.
const (
	CodePermissionDenied  = "permission_denied"
	CodeNamespaceNotEmpty = "namespace_not_empty"
	CodeKeyNotFound       = "key_not_found"
	CodeKeyExists         = "key_exists"
)

// CreateNamespaceRequest is the body of POST /v1/namespaces.
type CreateNamespaceRequest struct {
	Name string `json:"name"`
}

// Namespace is one namespace.
type Namespace struct {
	Name string `json:"name"`
}

// NamespaceList answers GET /v1/namespaces.
type NamespaceList struct {
	Namespaces []Namespace `json:"namespaces"`
}

// CreateKeyRequest is the body of POST /v1/keys: a key of one namespace, or an admin key.
type CreateKeyRequest struct {
	Namespace   string `json:"namespace,omitempty"`
	Admin       bool   `json:"admin,omitempty"`
	Description string `json:"description,omitempty"`
}

// KeyInfo describes a stored key; its secret is never answered after creation.
type KeyInfo struct {
	ID          string `json:"id"`
	Namespace   string `json:"namespace,omitempty"`
	Admin       bool   `json:"admin,omitempty"`
	Description string `json:"description,omitempty"`
	CreatedMs   int64  `json:"created_ms"`
	RevokedMs   int64  `json:"revoked_ms,omitempty"`
}

// CreatedKey answers POST /v1/keys: the key itself, shown this once, and its description.
type CreatedKey struct {
	KeyInfo
	Key string `json:"key"`
}

// KeyList answers GET /v1/keys.
type KeyList struct {
	Keys []KeyInfo `json:"keys"`
}

// CreateNamespace creates namespace name (POST /v1/namespaces; admin).
func (c *Client) CreateNamespace(ctx context.Context, name string) error {
	if err := checkNames("create namespace", name); err != nil {
		return err
	}
	return c.do(ctx, "create namespace", http.MethodPost, "/v1/namespaces", nil, CreateNamespaceRequest{Name: name}, nil, 0)
}

// ListNamespaces lists the namespaces (GET /v1/namespaces; admin).
func (c *Client) ListNamespaces(ctx context.Context) ([]string, error) {
	var res NamespaceList
	if err := c.do(ctx, "list namespaces", http.MethodGet, "/v1/namespaces", nil, nil, &res, 0); err != nil {
		return nil, err
	}
	out := make([]string, len(res.Namespaces))
	for i, n := range res.Namespaces {
		out[i] = n.Name
	}
	return out, nil
}

// DeleteNamespace deletes an empty namespace and revokes its keys (DELETE
// /v1/namespaces/{ns}; admin).
func (c *Client) DeleteNamespace(ctx context.Context, name string) error {
	if err := checkNames("delete namespace", name); err != nil {
		return err
	}
	return c.do(ctx, "delete namespace", http.MethodDelete, "/v1/namespaces/"+url.PathEscape(name), nil, nil, nil, 0)
}

// CreateKey creates a key (POST /v1/keys; admin). The answer's Key is shown only here.
func (c *Client) CreateKey(ctx context.Context, req CreateKeyRequest) (CreatedKey, error) {
	var k CreatedKey
	err := c.do(ctx, "create key", http.MethodPost, "/v1/keys", nil, req, &k, 0)
	return k, err
}

// ListKeys lists the keys, revoked ones included, without secrets (GET /v1/keys; admin).
func (c *Client) ListKeys(ctx context.Context) ([]KeyInfo, error) {
	var res KeyList
	if err := c.do(ctx, "list keys", http.MethodGet, "/v1/keys", nil, nil, &res, 0); err != nil {
		return nil, err
	}
	return res.Keys, nil
}

// RevokeKey revokes key id (DELETE /v1/keys/{id}; admin).
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	if err := checkNames("revoke key", id); err != nil {
		return err
	}
	return c.do(ctx, "revoke key", http.MethodDelete, "/v1/keys/"+url.PathEscape(id), nil, nil, nil, 0)
}
