package httpapi

// Namespace keys: envelope encryption of a namespace's chunks with its own KMS key
// (docs/encryption.md). Admin routes (an admin key is required):
//
//	GET  /v1/namespaces/{ns}/key         the namespace's key (404 not_found: none)
//	PUT  /v1/namespaces/{ns}/key         {"kms_key": ARN} or {"create": true}: attach a key
//	POST /v1/namespaces/{ns}/key/rotate  {} or {"kms_key": ARN} or {"create": true}
//	POST /v1/namespaces/{ns}/key/shred   {"pending_days": 7, "wait_ms": 60000}
//
// Shred is the crypto-shredding procedure: it disables the KMS key and schedules its
// deletion (through this node's KMS), records the shred in the metastore, and answers once
// every live log node (the node registry; this node alone without one) has confirmed that
// it dropped the namespace's key material and cached plaintext. Nodes learn of the shred
// from the metastore, which each lists every second (envelope.Catalog), and confirm it
// there. Past wait_ms it answers 504 shred_pending naming the nodes still waited for; the
// shred stands, and repeating it waits again.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// CodeShredPending answers a shred that was recorded but not yet confirmed by every live
// log node within its wait (HTTP 504): repeat it to wait again.
const CodeShredPending = "shred_pending"

// shred bounds.
const (
	defaultShredWait = time.Minute
	maxShredWait     = 10 * time.Minute
	shredPoll        = 100 * time.Millisecond
)

func (s *Server) routeNamespaceKeys() {
	const key = "/v1/namespaces/{ns}/key"
	s.handle("GET "+key, s.getNamespaceKey)
	s.handle("PUT "+key, s.attachNamespaceKey)
	s.handle("POST "+key+"/rotate", s.rotateNamespaceKey)
	s.handle("POST "+key+"/shred", s.shredNamespaceKey)
}

func toAPIKey(k meta.NamespaceKey) streamapi.NamespaceKey {
	return streamapi.NamespaceKey{Namespace: k.Namespace, ID: k.ID, KMSKey: k.KeyARN, Generation: k.Generation, State: k.State,
		UpdatedMs: k.UpdatedMs, ShreddedMs: k.ShreddedMs, Dropped: k.Dropped}
}

// namespaceKey answers ns's key: 404 not_found when it has none.
func (s *Server) namespaceKey(ctx context.Context, ns string) (meta.NamespaceKey, error) {
	ks, err := s.cfg.Meta.ListNamespaceKeys(ctx)
	if err != nil {
		return meta.NamespaceKey{}, err
	}
	if i := slices.IndexFunc(ks, func(k meta.NamespaceKey) bool { return k.Namespace == ns }); i >= 0 {
		return ks[i], nil
	}
	return meta.NamespaceKey{}, badInput(http.StatusNotFound, streamapi.CodeNotFound, "namespace %s has no key", ns)
}

// refreshKeys makes this node act on a key change now rather than at its next refresh.
func (s *Server) refreshKeys(ctx context.Context) {
	if s.cfg.Keys != nil {
		if err := s.cfg.Keys.Refresh(ctx); err != nil {
			s.cfg.Logger.Warn("namespace keys refresh failed", "err", err)
		}
	}
}

// kmsKey is the KMS key a request names, or a new one when it asks to create one.
func (s *Server) kmsKey(ctx context.Context, ns, arn string, create, required bool) (string, error) {
	switch {
	case create && arn != "":
		return "", badInput(400, streamapi.CodeInvalidArgument, `give one of "kms_key" and "create": true, not both`)
	case create:
		if s.cfg.KMSAdmin == nil {
			return "", badInput(400, streamapi.CodeInvalidArgument, "this log node has no KMS configured (--kms-endpoint or AWS): it cannot create a key; name one with \"kms_key\"")
		}
		return envelope.CreateKey(ctx, s.cfg.KMSAdmin, ns)
	case arn == "" && required:
		return "", badInput(400, streamapi.CodeInvalidArgument, `"kms_key" (a KMS key ARN, id or alias) or "create": true is required`)
	case arn != "":
		if err := meta.CheckKeyARN(arn); err != nil {
			return "", badInput(400, streamapi.CodeInvalidArgument, "%s", err.Error())
		}
	}
	return arn, nil
}

func (s *Server) getNamespaceKey(w http.ResponseWriter, r *http.Request) error {
	k, err := s.namespaceKey(r.Context(), r.PathValue("ns"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toAPIKey(k))
	return nil
}

// decodeOptional decodes a JSON body into v; an empty body leaves v as it is.
func (s *Server) decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := s.readBody(w, r)
	if err != nil || len(body) == 0 {
		return err
	}
	return decodeStrict(body, v)
}

func (s *Server) attachNamespaceKey(w http.ResponseWriter, r *http.Request) error {
	ns := r.PathValue("ns")
	var req streamapi.AttachNamespaceKeyRequest
	if err := s.decodeOptional(w, r, &req); err != nil {
		return err
	}
	names, err := s.cfg.Meta.ListNamespaces(r.Context())
	if err != nil {
		return err
	}
	if !slices.Contains(names, ns) {
		return fmt.Errorf("attach a key to namespace %s: %w", ns, meta.ErrNamespaceNotFound)
	}
	if req.Create {
		// Refuse before a KMS key is made that could not be attached.
		if k, err := s.namespaceKey(r.Context(), ns); err == nil {
			return badInput(400, streamapi.CodeInvalidArgument, "namespace %s already has a key (%s, %s); rotate it to move to another", ns, k.KeyARN, k.State)
		}
	}
	arn, err := s.kmsKey(r.Context(), ns, req.KMSKey, req.Create, true)
	if err != nil {
		return err
	}
	k, err := s.cfg.Meta.AttachNamespaceKey(r.Context(), ns, arn)
	if err != nil {
		return err
	}
	s.refreshKeys(r.Context())
	writeJSON(w, http.StatusOK, toAPIKey(k))
	return nil
}

func (s *Server) rotateNamespaceKey(w http.ResponseWriter, r *http.Request) error {
	ns := r.PathValue("ns")
	var req streamapi.RotateNamespaceKeyRequest
	if err := s.decodeOptional(w, r, &req); err != nil {
		return err
	}
	if _, err := s.namespaceKey(r.Context(), ns); err != nil {
		return err
	}
	arn, err := s.kmsKey(r.Context(), ns, req.KMSKey, req.Create, false)
	if err != nil {
		return err
	}
	k, err := s.cfg.Meta.RotateNamespaceKey(r.Context(), ns, arn)
	if err != nil {
		return err
	}
	s.refreshKeys(r.Context())
	writeJSON(w, http.StatusOK, toAPIKey(k))
	return nil
}

func (s *Server) shredNamespaceKey(w http.ResponseWriter, r *http.Request) error {
	ns := r.PathValue("ns")
	req := streamapi.ShredNamespaceKeyRequest{PendingDays: 7}
	if err := s.decodeOptional(w, r, &req); err != nil {
		return err
	}
	wait := defaultShredWait
	switch {
	case req.PendingDays < 7 || req.PendingDays > 30:
		return badInput(400, streamapi.CodeInvalidArgument, `"pending_days" %d: KMS waits 7-30 days before deleting a key`, req.PendingDays)
	case req.WaitMs < 0 || time.Duration(req.WaitMs)*time.Millisecond > maxShredWait:
		return badInput(400, streamapi.CodeInvalidArgument, `"wait_ms" %d is out of range [0, %d]`, req.WaitMs, maxShredWait.Milliseconds())
	case req.WaitMs > 0:
		wait = time.Duration(req.WaitMs) * time.Millisecond
	}
	if s.cfg.KMSAdmin == nil {
		return badInput(400, streamapi.CodeInvalidArgument, "this log node has no KMS configured (--kms-endpoint or AWS): it cannot disable the key")
	}
	ctx := r.Context()
	k, err := s.namespaceKey(ctx, ns)
	if err != nil {
		return err
	}
	if err := envelope.ShredKey(ctx, s.cfg.KMSAdmin, k.KeyARN, req.PendingDays); err != nil {
		return err
	}
	if k, err = s.cfg.Meta.ShredNamespaceKey(ctx, ns); err != nil {
		return err
	}
	s.refreshKeys(ctx)
	deadline := time.Now().Add(wait)
	for {
		waiting, err := s.shredWaiting(ctx, k)
		if err != nil {
			return err
		}
		if len(waiting) == 0 {
			writeJSON(w, http.StatusOK, toAPIKey(k))
			return nil
		}
		if time.Now().After(deadline) {
			return badInput(http.StatusGatewayTimeout, CodeShredPending, "namespace %s: the key is shredded, but live log nodes %v have not yet confirmed dropping its keys and cached plaintext; repeat the shred to wait again", ns, waiting)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(shredPoll):
		}
		if k, err = s.namespaceKey(ctx, ns); err != nil {
			return err
		}
	}
}

// shredWaiting lists the live log nodes that have not confirmed k's shred.
func (s *Server) shredWaiting(ctx context.Context, k meta.NamespaceKey) ([]string, error) {
	live := []string{s.cfg.NodeID}
	if s.cfg.Nodes != nil {
		nodes, err := s.cfg.Nodes(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("list the live log nodes: %w", err)
		}
		for _, n := range nodes {
			if n.ID != s.cfg.NodeID {
				live = append(live, n.ID)
			}
		}
	}
	var waiting []string
	for _, id := range live {
		if !slices.Contains(k.Dropped, id) {
			waiting = append(waiting, id)
		}
	}
	slices.Sort(waiting)
	return waiting, nil
}

// keyAnswer maps a namespace key that cannot be used: 403 key_unavailable, naming the
// namespace (the message), not retriable until the key is enabled again.
func keyAnswer(err error) (answer, bool) {
	if !errors.Is(err, envelope.ErrKeyUnavailable) {
		return answer{}, false
	}
	return definite(http.StatusForbidden, streamapi.CodeKeyUnavailable), true
}
