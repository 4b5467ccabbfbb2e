package loamv1pb_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// authGoldenMessages: NamespaceService and KeyService messages, every field set, pinned
// in testdata/v1 like goldenMessages.
var authGoldenMessages = map[string]func() proto.Message{
	"create_namespace_request.bin": func() proto.Message { return &loamv1pb.CreateNamespaceRequest{Name: "team-a"} },
	"delete_namespace_request.bin": func() proto.Message { return &loamv1pb.DeleteNamespaceRequest{Name: "team-a"} },
	"create_key_request.bin": func() proto.Message {
		return &loamv1pb.CreateKeyRequest{Namespace: "team-a", Admin: true, Description: "ci"}
	},
	"create_key_response.bin": func() proto.Message {
		return &loamv1pb.CreateKeyResponse{Key: "loam_0123_c2VjcmV0", Info: &loamv1pb.KeyInfo{Id: "0123", Namespace: "team-a",
			Admin: true, Description: "ci", CreatedMs: 1732870000000, RevokedMs: 1732870001000}}
	},
	"list_keys_response.bin": func() proto.Message {
		return &loamv1pb.ListKeysResponse{Keys: []*loamv1pb.KeyInfo{{Id: "a", Namespace: "n", CreatedMs: 1}, {Id: "b", Admin: true, CreatedMs: 2}}}
	},
	"revoke_key_request.bin": func() proto.Message { return &loamv1pb.RevokeKeyRequest{Id: "0123"} },
}

func TestGoldenAuth(t *testing.T) {
	saved := goldenMessages
	goldenMessages = authGoldenMessages
	defer func() { goldenMessages = saved }()
	TestGolden(t)
}
