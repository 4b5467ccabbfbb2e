package grpcapi

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/lognode-svc/nskeys"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// NamespaceKeyService: a namespace's customer-managed KMS key over gRPC, checked, acted on
// and refused by the same nskeys.Admin as the HTTP routes (httpapi/nskeys.go). An admin
// key is required (auth.go). Refusals:
//
//	nskeys refusal / failure      gRPC code            reason
//	Invalid                       INVALID_ARGUMENT     invalid_argument
//	NoKey                         NOT_FOUND            not_found
//	NoKMS                         FAILED_PRECONDITION  kms_not_configured
//	ShredPending                  DEADLINE_EXCEEDED    shred_pending (metadata "waiting": the nodes, comma-separated)
//	unknown namespace (meta)      NOT_FOUND            namespace_not_found
//	anything else                 the error table (errors.go)

type namespaceKeyServer struct {
	loamv1pb.UnimplementedNamespaceKeyServiceServer
	s *Server
}

func (s *Server) registerNamespaceKeys(g grpc.ServiceRegistrar) {
	loamv1pb.RegisterNamespaceKeyServiceServer(g, namespaceKeyServer{s: s})
}

// keyReply is k as the service answers it, or err's refusal.
func keyReply(k meta.NamespaceKey, err error) (*loamv1pb.NamespaceKey, error) {
	if err != nil {
		return nil, keyRefusal(err)
	}
	return &loamv1pb.NamespaceKey{Namespace: k.Namespace, Id: k.ID, KmsKey: k.KeyARN, Generation: k.Generation, State: k.State,
		UpdatedMs: k.UpdatedMs, ShreddedMs: k.ShreddedMs, Dropped: k.Dropped}, nil
}

// keyRefusal maps an nskeys refusal (see the table above); other errors go to the error
// table as they are.
func keyRefusal(err error) error {
	var ke *nskeys.Error
	if !errors.As(err, &ke) {
		return err
	}
	switch ke.Kind {
	case nskeys.NoKey:
		return &inputError{code: codes.NotFound, reason: streamapi.CodeNotFound, msg: ke.Msg}
	case nskeys.NoKMS:
		return &inputError{code: codes.FailedPrecondition, reason: streamapi.CodeKMSNotConfigured, msg: ke.Msg}
	case nskeys.ShredPending:
		return answerStatus(answer{code: codes.DeadlineExceeded, reason: streamapi.CodeShredPending, msg: ke.Msg,
			meta: map[string]string{"waiting": strings.Join(ke.Waiting, ",")}}).Err()
	}
	return badInput(streamapi.CodeInvalidArgument, "%s", ke.Msg)
}

// GetNamespaceKey implements loamv1pb.NamespaceKeyServiceServer.
func (n namespaceKeyServer) GetNamespaceKey(ctx context.Context, req *loamv1pb.GetNamespaceKeyRequest) (*loamv1pb.NamespaceKey, error) {
	if err := required("namespace", req.GetNamespace()); err != nil {
		return nil, err
	}
	return keyReply(n.s.cfg.NamespaceKeys.Get(ctx, req.GetNamespace()))
}

// AttachNamespaceKey implements loamv1pb.NamespaceKeyServiceServer.
func (n namespaceKeyServer) AttachNamespaceKey(ctx context.Context, req *loamv1pb.AttachNamespaceKeyRequest) (*loamv1pb.NamespaceKey, error) {
	if err := required("namespace", req.GetNamespace()); err != nil {
		return nil, err
	}
	return keyReply(n.s.cfg.NamespaceKeys.Attach(ctx, req.GetNamespace(), req.GetKmsKey(), req.GetCreate()))
}

// RotateNamespaceKey implements loamv1pb.NamespaceKeyServiceServer.
func (n namespaceKeyServer) RotateNamespaceKey(ctx context.Context, req *loamv1pb.RotateNamespaceKeyRequest) (*loamv1pb.NamespaceKey, error) {
	if err := required("namespace", req.GetNamespace()); err != nil {
		return nil, err
	}
	return keyReply(n.s.cfg.NamespaceKeys.Rotate(ctx, req.GetNamespace(), req.GetKmsKey(), req.GetCreate()))
}

// ShredNamespaceKey implements loamv1pb.NamespaceKeyServiceServer: pending_days 0 is the
// default 7 (proto3 cannot tell 0 from unset).
func (n namespaceKeyServer) ShredNamespaceKey(ctx context.Context, req *loamv1pb.ShredNamespaceKeyRequest) (*loamv1pb.NamespaceKey, error) {
	if err := required("namespace", req.GetNamespace()); err != nil {
		return nil, err
	}
	days := int(req.GetPendingDays())
	if days == 0 {
		days = nskeys.DefaultPendingDays
	}
	return keyReply(n.s.cfg.NamespaceKeys.Shred(ctx, req.GetNamespace(), days, req.GetWaitMs()))
}
