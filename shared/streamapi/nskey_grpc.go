package streamapi

import (
	"context"

	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// Namespace keys over gRPC (NamespaceKeyService), the counterparts of Client's methods of
// nskey.go: the same types and errors, but a log node without KMS refuses create and
// shred with Detail.Code kms_not_configured (Status 409) where HTTP answers 400
// invalid_argument. An admin key is required: pass it as per-RPC credentials or outgoing
// "authorization" metadata.

func namespaceKeyOf(k *loamv1pb.NamespaceKey) NamespaceKey {
	return NamespaceKey{Namespace: k.GetNamespace(), ID: k.GetId(), KMSKey: k.GetKmsKey(), Generation: k.GetGeneration(), State: k.GetState(),
		UpdatedMs: k.GetUpdatedMs(), ShreddedMs: k.GetShreddedMs(), Dropped: k.GetDropped()}
}

// GetNamespaceKey reads namespace ns's key (NamespaceKeyService.GetNamespaceKey).
func (c *GRPCClient) GetNamespaceKey(ctx context.Context, ns string) (NamespaceKey, error) {
	k, err := c.nskeys.GetNamespaceKey(ctx, &loamv1pb.GetNamespaceKeyRequest{Namespace: ns})
	if err != nil {
		return NamespaceKey{}, grpcError(ctx, "get namespace key", err)
	}
	return namespaceKeyOf(k), nil
}

// AttachNamespaceKey gives namespace ns a KMS key (NamespaceKeyService.AttachNamespaceKey).
func (c *GRPCClient) AttachNamespaceKey(ctx context.Context, ns string, req AttachNamespaceKeyRequest) (NamespaceKey, error) {
	k, err := c.nskeys.AttachNamespaceKey(ctx, &loamv1pb.AttachNamespaceKeyRequest{Namespace: ns, KmsKey: req.KMSKey, Create: req.Create})
	if err != nil {
		return NamespaceKey{}, grpcError(ctx, "attach namespace key", err)
	}
	return namespaceKeyOf(k), nil
}

// RotateNamespaceKey starts namespace ns's next key generation
// (NamespaceKeyService.RotateNamespaceKey).
func (c *GRPCClient) RotateNamespaceKey(ctx context.Context, ns string, req RotateNamespaceKeyRequest) (NamespaceKey, error) {
	k, err := c.nskeys.RotateNamespaceKey(ctx, &loamv1pb.RotateNamespaceKeyRequest{Namespace: ns, KmsKey: req.KMSKey, Create: req.Create})
	if err != nil {
		return NamespaceKey{}, grpcError(ctx, "rotate namespace key", err)
	}
	return namespaceKeyOf(k), nil
}

// ShredNamespaceKey disables namespace ns's KMS key, schedules its deletion and waits until
// every live log node dropped the namespace's keys and cached plaintext
// (NamespaceKeyService.ShredNamespaceKey). PendingDays 0 is the default 7; ctx should
// outlast WaitMs (default 60 s).
func (c *GRPCClient) ShredNamespaceKey(ctx context.Context, ns string, req ShredNamespaceKeyRequest) (NamespaceKey, error) {
	k, err := c.nskeys.ShredNamespaceKey(ctx, &loamv1pb.ShredNamespaceKeyRequest{Namespace: ns, PendingDays: int32(req.PendingDays), WaitMs: req.WaitMs})
	if err != nil {
		return NamespaceKey{}, grpcError(ctx, "shred namespace key", err)
	}
	return namespaceKeyOf(k), nil
}
