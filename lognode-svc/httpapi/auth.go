package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// Authentication of the HTTP API. With Config.Auth set, every route but /healthz and
// /metrics needs "Authorization: Bearer <key>":
//
//	route                                   scope
//	/v1/namespaces (GET, POST)              admin
//	/v1/namespaces/{ns} (DELETE)            admin
//	/v1/namespaces/{ns}/key, .../key/...    admin
//	/v1/keys, /v1/keys/{id}                 admin
//	/v1/namespaces/{ns}/...                 a key of namespace ns, or admin
//	anything else (/v1/cluster/nodes, ...)  any valid key
//
// A missing, malformed, unknown or revoked key answers 401 (code unauthorized, with
// WWW-Authenticate: Bearer); a valid key whose scope does not cover the route 403 (code
// permission_denied). The check reads only the method, the path and the Authorization
// header, so it sits in front of whatever transport serves the handler (plain or TLS).

// authScope is the scope a request needs, or open for the routes served without a key.
func authScope(r *http.Request) (scope auth.Scope, open bool) {
	// The escaped path, split as the mux splits it: an escaped "/" stays inside its
	// segment, so the namespace checked is the one the route will serve.
	p := r.URL.EscapedPath()
	switch {
	case p == "/healthz" || p == "/metrics":
		return auth.Scope{}, true
	case p == "/v1/keys" || strings.HasPrefix(p, "/v1/keys/"):
		return auth.Scope{Admin: true}, false
	case p == "/v1/namespaces" || p == "/v1/namespaces/":
		return auth.Scope{Admin: true}, false
	}
	if rest, ok := strings.CutPrefix(p, "/v1/namespaces/"); ok {
		seg, sub, _ := strings.Cut(rest, "/")
		if sub == "" || sub == "key" || strings.HasPrefix(sub, "key/") {
			return auth.Scope{Admin: true}, false // the namespace itself (DELETE) and its key (nskeys.go)
		}
		ns, err := url.PathUnescape(seg)
		if err != nil {
			return auth.Scope{Admin: true}, false // no route serves it; only admin keys get the 4xx
		}
		return auth.Scope{Namespace: ns}, false
	}
	return auth.Scope{}, false
}

// authenticate wraps next with the key check of a (nil: no authentication).
func authenticate(a *auth.Authenticator, next http.Handler) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scope, open := authScope(r)
		if open {
			next.ServeHTTP(w, r)
			return
		}
		if _, err := a.Check(r.Context(), r.Header.Get("Authorization"), scope); err != nil {
			switch {
			case errors.Is(err, auth.ErrUnauthenticated):
				w.Header().Set("WWW-Authenticate", `Bearer realm="loam"`)
				writeError(w, http.StatusUnauthorized, streamapi.CodeUnauthorized, err.Error())
			case errors.Is(err, auth.ErrPermissionDenied):
				writeError(w, http.StatusForbidden, streamapi.CodePermissionDenied, err.Error())
			default:
				a := errorAnswer(err)
				if a.detail.Retriable {
					w.Header().Set("Retry-After", "1")
				}
				writeJSON(w, a.status, streamapi.ErrorBody{Error: a.detail})
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authError maps the errors of namespace and key administration that errorAnswer does
// not know.
func authError(err error) error {
	switch {
	case errors.Is(err, meta.ErrNamespaceNotEmpty):
		return badInput(http.StatusConflict, streamapi.CodeNamespaceNotEmpty, "%s", err.Error())
	case errors.Is(err, meta.ErrKeyNotFound):
		return badInput(http.StatusNotFound, streamapi.CodeKeyNotFound, "%s", err.Error())
	case errors.Is(err, meta.ErrKeyExists):
		return badInput(http.StatusConflict, streamapi.CodeKeyExists, "%s", err.Error())
	}
	return err
}

func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request) error {
	names, err := s.cfg.Meta.ListNamespaces(r.Context())
	if err != nil {
		return err
	}
	out := streamapi.NamespaceList{Namespaces: make([]streamapi.Namespace, len(names))}
	for i, n := range names {
		out.Namespaces[i] = streamapi.Namespace{Name: n}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) createNamespace(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req streamapi.CreateNamespaceRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return badInput(400, streamapi.CodeInvalidArgument, `"name" is required`)
	}
	if err := s.cfg.Meta.CreateNamespace(r.Context(), req.Name); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, streamapi.Namespace{Name: req.Name})
	return nil
}

func (s *Server) deleteNamespace(w http.ResponseWriter, r *http.Request) error {
	if err := s.cfg.Meta.DeleteNamespace(r.Context(), r.PathValue("ns")); err != nil {
		return authError(err)
	}
	s.streams.invalidate()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func keyInfo(k meta.APIKey) streamapi.KeyInfo {
	return streamapi.KeyInfo{ID: k.ID, Namespace: k.Namespace, Admin: k.Admin, Description: k.Description,
		CreatedMs: k.CreatedMs, RevokedMs: k.RevokedMs}
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req streamapi.CreateKeyRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.Admin == (req.Namespace != "") {
		return badInput(400, streamapi.CodeInvalidArgument, `give exactly one of "namespace" and "admin": true`)
	}
	token, k, err := auth.NewKey(req.Admin, req.Namespace, req.Description)
	if err != nil {
		return err
	}
	k, err = s.cfg.Meta.CreateKey(r.Context(), k)
	if err != nil {
		return authError(err)
	}
	writeJSON(w, http.StatusCreated, streamapi.CreatedKey{KeyInfo: keyInfo(k), Key: token})
	return nil
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.cfg.Meta.ListKeys(r.Context())
	if err != nil {
		return err
	}
	out := streamapi.KeyList{Keys: make([]streamapi.KeyInfo, len(keys))}
	for i, k := range keys {
		out.Keys[i] = keyInfo(k)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) error {
	if err := s.cfg.Meta.RevokeKey(r.Context(), r.PathValue("id")); err != nil {
		return authError(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
