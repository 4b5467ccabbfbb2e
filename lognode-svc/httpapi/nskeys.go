package httpapi

// Namespace keys: envelope encryption of a namespace's chunks with its own KMS key
// (docs/encryption.md). Admin routes (an admin key is required):
//
//	GET  /v1/namespaces/{ns}/key         the namespace's key (404 not_found: none)
//	PUT  /v1/namespaces/{ns}/key         {"kms_key": ARN} or {"create": true}: attach a key
//	POST /v1/namespaces/{ns}/key/rotate  {} or {"kms_key": ARN} or {"create": true}
//	POST /v1/namespaces/{ns}/key/shred   {"pending_days": 7, "wait_ms": 60000}
//
// The checks and actions are lognode-svc/nskeys's, which the gRPC NamespaceKeyService
// shares. Shred is the crypto-shredding procedure: it disables the KMS key and schedules
// its deletion (through this node's KMS), records the shred in the metastore, and answers
// once every live log node has confirmed that it dropped the namespace's key material and
// cached plaintext. Past wait_ms it answers 504 shred_pending naming the nodes still
// waited for; the shred stands, and repeating it waits again.

import (
	"errors"
	"net/http"

	"github.com/loamhq/loam/lognode-svc/nskeys"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// CodeShredPending answers a shred that was recorded but not yet confirmed by every live
// log node within its wait (HTTP 504): repeat it to wait again.
const CodeShredPending = streamapi.CodeShredPending

func (s *Server) routeNamespaceKeys() {
	const key = "/v1/namespaces/{ns}/key"
	s.handle("GET "+key, s.getNamespaceKey)
	s.handle("PUT "+key, s.attachNamespaceKey)
	s.handle("POST "+key+"/rotate", s.rotateNamespaceKey)
	s.handle("POST "+key+"/shred", s.shredNamespaceKey)
}

// NamespaceKeys is this node's namespace key administration, which the gRPC API shares.
func (s *Server) NamespaceKeys() *nskeys.Admin {
	return nskeys.New(nskeys.Config{NodeID: s.cfg.NodeID, Meta: s.cfg.Meta, Keys: s.cfg.Keys, KMSAdmin: s.cfg.KMSAdmin,
		Nodes: s.cfg.Nodes, Logger: s.cfg.Logger})
}

// keyErr is err as these routes answer it: an nskeys refusal becomes its HTTP status and
// code, anything else goes through the error table.
func keyErr(err error) error {
	var ke *nskeys.Error
	if !errors.As(err, &ke) {
		return err
	}
	switch ke.Kind {
	case nskeys.NoKey:
		return badInput(http.StatusNotFound, streamapi.CodeNotFound, "%s", ke.Msg)
	case nskeys.ShredPending:
		return badInput(http.StatusGatewayTimeout, CodeShredPending, "%s", ke.Msg)
	}
	return badInput(http.StatusBadRequest, streamapi.CodeInvalidArgument, "%s", ke.Msg) // Invalid, NoKMS
}

// keyAnswered writes k, or answers err.
func keyAnswered(w http.ResponseWriter, k meta.NamespaceKey, err error) error {
	if err != nil {
		return keyErr(err)
	}
	writeJSON(w, http.StatusOK, nskeys.ToAPI(k))
	return nil
}

func (s *Server) getNamespaceKey(w http.ResponseWriter, r *http.Request) error {
	k, err := s.NamespaceKeys().Get(r.Context(), r.PathValue("ns"))
	return keyAnswered(w, k, err)
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
	var req streamapi.AttachNamespaceKeyRequest
	if err := s.decodeOptional(w, r, &req); err != nil {
		return err
	}
	k, err := s.NamespaceKeys().Attach(r.Context(), r.PathValue("ns"), req.KMSKey, req.Create)
	return keyAnswered(w, k, err)
}

func (s *Server) rotateNamespaceKey(w http.ResponseWriter, r *http.Request) error {
	var req streamapi.RotateNamespaceKeyRequest
	if err := s.decodeOptional(w, r, &req); err != nil {
		return err
	}
	k, err := s.NamespaceKeys().Rotate(r.Context(), r.PathValue("ns"), req.KMSKey, req.Create)
	return keyAnswered(w, k, err)
}

func (s *Server) shredNamespaceKey(w http.ResponseWriter, r *http.Request) error {
	req := streamapi.ShredNamespaceKeyRequest{PendingDays: nskeys.DefaultPendingDays}
	if err := s.decodeOptional(w, r, &req); err != nil {
		return err
	}
	k, err := s.NamespaceKeys().Shred(r.Context(), r.PathValue("ns"), req.PendingDays, req.WaitMs)
	return keyAnswered(w, k, err)
}

// keyAnswer maps a namespace key that cannot be used: 403 key_unavailable, naming the
// namespace (the message), not retriable until the key is enabled again.
func keyAnswer(err error) (answer, bool) {
	if !errors.Is(err, envelope.ErrKeyUnavailable) {
		return answer{}, false
	}
	return definite(http.StatusForbidden, streamapi.CodeKeyUnavailable), true
}
