package grpcapi

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// keyStore is a meta.Client holding only what KeyService calls.
type keyStore struct {
	meta.Client
	stored []meta.APIKey
}

func (k *keyStore) CreateKey(_ context.Context, key meta.APIKey) (meta.APIKey, error) {
	if err := meta.CheckKey(key); err != nil {
		return meta.APIKey{}, err
	}
	key.CreatedMs = 1
	k.stored = append(k.stored, key)
	return key, nil
}

// FuzzCreateKeyRequest runs wire bytes of a CreateKeyRequest through KeyService.CreateKey
// and the call's scope: never a panic; a request with exactly one of namespace and admin
// gets a key that parses, whose id is the stored one, whose SHA-256 is what is stored, and
// whose secret is nowhere in the stored record; any other request is refused.
func FuzzCreateKeyRequest(f *testing.F) {
	for _, m := range []*loamv1pb.CreateKeyRequest{{Namespace: "team-a"}, {Admin: true, Description: "ci"}, {},
		{Namespace: "a", Admin: true}, {Namespace: strings.Repeat("n", 300)}, {Admin: true, Description: strings.Repeat("d", 300)}} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		var req loamv1pb.CreateKeyRequest
		if proto.Unmarshal(wire, &req) != nil {
			return
		}
		if s := callScope("/loam.v1.KeyService/CreateKey", &req); !s.Admin {
			t.Fatalf("CreateKey scope %+v", s)
		}
		ks := &keyStore{}
		resp, err := keyService{s: &Server{cfg: Config{Meta: ks}}}.CreateKey(context.Background(), &req)
		valid := req.GetAdmin() != (req.GetNamespace() != "") && len(req.GetDescription()) <= meta.MaxKeyDescriptionLength
		if err != nil {
			if valid {
				t.Fatalf("%v refused: %v", &req, err)
			}
			return
		}
		if !valid || len(ks.stored) != 1 {
			t.Fatalf("%v accepted (%d stored)", &req, len(ks.stored))
		}
		id, err := auth.KeyID(resp.GetKey())
		st := ks.stored[0]
		if err != nil || id != st.ID || resp.GetInfo().GetId() != id || !bytes.Equal(st.Hash, meta.KeyHash(resp.GetKey())) {
			t.Fatalf("key %q (id %q, %v), stored %+v", resp.GetKey(), id, err, st)
		}
		secret := resp.GetKey()[len(auth.KeyPrefix)+len(id)+1:]
		if bytes.Contains(st.Hash, []byte(secret)) || strings.Contains(st.Description, secret) {
			t.Fatal("secret stored")
		}
	})
}

// FuzzCallScope: a NamespaceService or KeyService method, or ListNamespaces, always needs
// admin; any other method needs what its request names.
func FuzzCallScope(f *testing.F) {
	for _, m := range []string{"/loam.v1.KeyService/ListKeys", "/loam.v1.NamespaceService/X", "/loam.v1.StreamService/ListNamespaces",
		"/loam.v1.RecordService/Produce", "/grpc.health.v1.Health/Check"} {
		f.Add(m, "team-a")
	}
	f.Fuzz(func(t *testing.T, method, ns string) {
		s := callScope(method, &loamv1pb.FetchRequest{Namespace: ns})
		admin := strings.HasPrefix(method, "/loam.v1.KeyService/") || strings.HasPrefix(method, "/loam.v1.NamespaceService/") ||
			method == "/loam.v1.StreamService/ListNamespaces"
		if admin != s.Admin || (!admin && s.Namespace != ns) {
			t.Fatalf("%q %q: %+v", method, ns, s)
		}
	})
}
