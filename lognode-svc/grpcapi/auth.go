package grpcapi

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// Authentication of the gRPC API. With Config.Auth set, every loam.v1 call needs the
// metadata "authorization: Bearer <key>"; health and reflection stay open:
//
//	method                                           scope
//	NamespaceService/*, KeyService/*                 admin
//	NamespaceKeyService/*                            admin
//	StreamService/ListNamespaces                     admin
//	a call whose request names a namespace           a key of that namespace, or admin
//	(stream admin, Produce, Fetch, Subscribe, ...)
//
// A missing, malformed, unknown or revoked key is UNAUTHENTICATED (reason UNAUTHORIZED); a
// valid key whose scope does not cover the call PERMISSION_DENIED (reason
// PERMISSION_DENIED). A streaming call is checked on its request message, before the
// handler sees it. The interceptors read only the metadata and the request, whatever the
// transport (plain or TLS).

// adminMethods need an admin key.
var adminMethods = map[string]bool{
	"/loam.v1.StreamService/ListNamespaces": true,
}

func isAdminMethod(m string) bool {
	return adminMethods[m] || strings.HasPrefix(m, "/loam.v1.NamespaceService/") || strings.HasPrefix(m, "/loam.v1.KeyService/") ||
		strings.HasPrefix(m, "/loam.v1.NamespaceKeyService/")
}

// callScope is the scope a call of method with request req needs.
func callScope(method string, req any) auth.Scope {
	if isAdminMethod(method) {
		return auth.Scope{Admin: true}
	}
	if r, ok := req.(interface{ GetNamespace() string }); ok {
		return auth.Scope{Namespace: r.GetNamespace()}
	}
	return auth.Scope{}
}

// checkKey authenticates the call's key and authorizes scope.
func (s *Server) checkKey(ctx context.Context, scope auth.Scope) error {
	var authz string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			authz = v[0]
		}
	}
	_, err := s.cfg.Auth.Check(ctx, authz, scope)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, auth.ErrUnauthenticated):
		return answerStatus(answer{code: codes.Unauthenticated, reason: "UNAUTHORIZED", msg: err.Error()}).Err()
	case errors.Is(err, auth.ErrPermissionDenied):
		return answerStatus(answer{code: codes.PermissionDenied, reason: "PERMISSION_DENIED", msg: err.Error()}).Err()
	}
	return err
}

// authUnary checks a unary call's key.
func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if s.cfg.Auth == nil || !strings.HasPrefix(info.FullMethod, apiPrefix) {
		return h(ctx, req)
	}
	if err := s.checkKey(ctx, callScope(info.FullMethod, req)); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

// authStream checks a streaming call's key on each request message it receives.
func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if s.cfg.Auth == nil || !strings.HasPrefix(info.FullMethod, apiPrefix) {
		return h(srv, ss)
	}
	return h(srv, &authStream{ServerStream: ss, s: s, method: info.FullMethod})
}

type authStream struct {
	grpc.ServerStream
	s      *Server
	method string
}

func (a *authStream) RecvMsg(m any) error {
	if err := a.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return a.s.checkKey(a.Context(), callScope(a.method, m))
}

// ---- NamespaceService and KeyService ----

type namespaceService struct {
	loamv1pb.UnimplementedNamespaceServiceServer
	s *Server
}

type keyService struct {
	loamv1pb.UnimplementedKeyServiceServer
	s *Server
}

// adminError maps the refusals of namespace and key administration.
func adminError(err error) error {
	switch {
	case errors.Is(err, meta.ErrNamespaceNotEmpty):
		return answerStatus(answer{code: codes.FailedPrecondition, reason: "NAMESPACE_NOT_EMPTY", msg: err.Error()}).Err()
	case errors.Is(err, meta.ErrKeyNotFound):
		return answerStatus(answer{code: codes.NotFound, reason: "KEY_NOT_FOUND", msg: err.Error()}).Err()
	case errors.Is(err, meta.ErrKeyExists):
		return answerStatus(answer{code: codes.AlreadyExists, reason: "KEY_EXISTS", msg: err.Error()}).Err()
	}
	return err
}

func (n namespaceService) CreateNamespace(ctx context.Context, req *loamv1pb.CreateNamespaceRequest) (*loamv1pb.CreateNamespaceResponse, error) {
	if err := required("name", req.GetName()); err != nil {
		return nil, err
	}
	if err := n.s.cfg.Meta.CreateNamespace(ctx, req.GetName()); err != nil {
		return nil, err
	}
	return &loamv1pb.CreateNamespaceResponse{}, nil
}

func (n namespaceService) DeleteNamespace(ctx context.Context, req *loamv1pb.DeleteNamespaceRequest) (*loamv1pb.DeleteNamespaceResponse, error) {
	if err := required("name", req.GetName()); err != nil {
		return nil, err
	}
	if err := n.s.cfg.Meta.DeleteNamespace(ctx, req.GetName()); err != nil {
		return nil, adminError(err)
	}
	n.s.cfg.Streams.StreamsChanged()
	return &loamv1pb.DeleteNamespaceResponse{}, nil
}

func keyInfo(k meta.APIKey) *loamv1pb.KeyInfo {
	return &loamv1pb.KeyInfo{Id: k.ID, Namespace: k.Namespace, Admin: k.Admin, Description: k.Description,
		CreatedMs: k.CreatedMs, RevokedMs: k.RevokedMs}
}

func (k keyService) CreateKey(ctx context.Context, req *loamv1pb.CreateKeyRequest) (*loamv1pb.CreateKeyResponse, error) {
	if req.GetAdmin() == (req.GetNamespace() != "") {
		return nil, badInput(streamapi.CodeInvalidArgument, "give exactly one of namespace and admin")
	}
	token, key, err := auth.NewKey(req.GetAdmin(), req.GetNamespace(), req.GetDescription())
	if err != nil {
		return nil, err
	}
	key, err = k.s.cfg.Meta.CreateKey(ctx, key)
	if err != nil {
		return nil, adminError(err)
	}
	return &loamv1pb.CreateKeyResponse{Info: keyInfo(key), Key: token}, nil
}

func (k keyService) ListKeys(ctx context.Context, _ *loamv1pb.ListKeysRequest) (*loamv1pb.ListKeysResponse, error) {
	keys, err := k.s.cfg.Meta.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := &loamv1pb.ListKeysResponse{Keys: make([]*loamv1pb.KeyInfo, len(keys))}
	for i, key := range keys {
		out.Keys[i] = keyInfo(key)
	}
	return out, nil
}

func (k keyService) RevokeKey(ctx context.Context, req *loamv1pb.RevokeKeyRequest) (*loamv1pb.RevokeKeyResponse, error) {
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	if err := k.s.cfg.Meta.RevokeKey(ctx, req.GetId()); err != nil {
		return nil, adminError(err)
	}
	return &loamv1pb.RevokeKeyResponse{}, nil
}

// registerAuth registers NamespaceService and KeyService on g.
func (s *Server) registerAuth(g grpc.ServiceRegistrar) {
	loamv1pb.RegisterNamespaceServiceServer(g, namespaceService{s: s})
	loamv1pb.RegisterKeyServiceServer(g, keyService{s: s})
}
