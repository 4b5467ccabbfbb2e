package loamv1pb_test

import (
	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// The golden messages of NamespaceKeyService (TestGolden).
func init() {
	goldenMessages["namespace_key_get_request.bin"] = func() proto.Message {
		return &loamv1pb.GetNamespaceKeyRequest{Namespace: "team-a"}
	}
	goldenMessages["namespace_key_attach_request.bin"] = func() proto.Message {
		return &loamv1pb.AttachNamespaceKeyRequest{Namespace: "team-a", KmsKey: "arn:aws:kms:us-east-1:111122223333:key/0b1c"}
	}
	goldenMessages["namespace_key_attach_create_request.bin"] = func() proto.Message {
		return &loamv1pb.AttachNamespaceKeyRequest{Namespace: "team-b", Create: true}
	}
	goldenMessages["namespace_key_rotate_request.bin"] = func() proto.Message {
		return &loamv1pb.RotateNamespaceKeyRequest{Namespace: "team-a", KmsKey: "alias/team-a-2", Create: false}
	}
	goldenMessages["namespace_key_shred_request.bin"] = func() proto.Message {
		return &loamv1pb.ShredNamespaceKeyRequest{Namespace: "team-a", PendingDays: 10, WaitMs: 30000}
	}
	goldenMessages["namespace_key.bin"] = func() proto.Message {
		return &loamv1pb.NamespaceKey{Namespace: "team-a", Id: 7, KmsKey: "alias/team-a-2", Generation: 3, State: "shredded",
			UpdatedMs: 1732869990000, ShreddedMs: 1732869990500, Dropped: []string{"ln-1", "ln-2"}}
	}
}
