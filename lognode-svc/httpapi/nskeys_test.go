package httpapi_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// fakeKMSAdmin records the key administration calls the routes make.
type fakeKMSAdmin struct {
	mu                sync.Mutex
	created           []string
	disabled, deleted map[string]int32
}

func (f *fakeKMSAdmin) CreateKey(ctx context.Context, in *kms.CreateKeyInput, _ ...func(*kms.Options)) (*kms.CreateKeyOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	arn := "arn:aws:kms:us-east-1:111122223333:key/k" + string(rune('0'+len(f.created)))
	f.created = append(f.created, aws.ToString(in.Description))
	return &kms.CreateKeyOutput{KeyMetadata: &kmstypes.KeyMetadata{Arn: aws.String(arn)}}, nil
}

func (f *fakeKMSAdmin) DisableKey(ctx context.Context, in *kms.DisableKeyInput, _ ...func(*kms.Options)) (*kms.DisableKeyOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disabled[aws.ToString(in.KeyId)]++
	return &kms.DisableKeyOutput{}, nil
}

func (f *fakeKMSAdmin) ScheduleKeyDeletion(ctx context.Context, in *kms.ScheduleKeyDeletionInput, _ ...func(*kms.Options)) (*kms.ScheduleKeyDeletionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted[aws.ToString(in.KeyId)] = aws.ToInt32(in.PendingWindowInDays)
	return &kms.ScheduleKeyDeletionOutput{}, nil
}

// TestNamespaceKeyRoutes: attach (an existing key, or a new one), read, rotate and shred a
// namespace's key over HTTP with an admin key; a namespace key may not; bad input is 400
// naming what is wrong; the shred disables and schedules the KMS key's deletion and
// answers once the node confirmed it.
func TestNamespaceKeyRoutes(t *testing.T) {
	ctx := context.Background()
	mc := startSequencer(t)
	admin, err := auth.BootstrapNew(ctx, mc)
	if err != nil {
		t.Fatal(err)
	}
	fk := &fakeKMSAdmin{disabled: map[string]int32{}, deleted: map[string]int32{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(ctx, node.Config{NodeID: "k-1", Listener: ln, Bucket: objstore.NewMem(), Meta: mc, FlushInterval: 5 * time.Millisecond,
		Logger: quiet(), Auth: auth.New(mc, auth.Options{TTL: time.Second}), KMSAdmin: fk, KeyRefresh: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() { srv.Close(); n.Close(context.Background()) })
	c := authCall{t, srv.URL}
	c.want(admin, "POST", "/v1/namespaces", `{"name":"team-a"}`, 201, "")
	c.want(admin, "POST", "/v1/namespaces", `{"name":"team-b"}`, 201, "")
	var nsKey struct {
		Token string `json:"key"`
	}
	if err := json.Unmarshal([]byte(c.want(admin, "POST", "/v1/keys", `{"namespace":"team-a"}`, 201, "")), &nsKey); err != nil {
		t.Fatal(err)
	}

	c.wantHas(admin, "GET", "/v1/namespaces/team-a/key", "", 404, `"code":"not_found"`)
	for _, bad := range []string{`{}`, `{"kms_key":"a b"}`, `{"kms_key":"alias/x","create":true}`, `{"kms":"x"}`} {
		c.wantHas(admin, "PUT", "/v1/namespaces/team-a/key", bad, 400, `"code":"`)
	}
	c.wantHas(admin, "PUT", "/v1/namespaces/nope/key", `{"kms_key":"alias/x"}`, 404, `"code":"namespace_not_found"`)
	// A namespace's own key manages nothing of its key.
	c.wantHas(nsKey.Token, "GET", "/v1/namespaces/team-a/key", "", 403, `"code":"permission_denied"`)
	c.wantHas(nsKey.Token, "PUT", "/v1/namespaces/team-a/key", `{"kms_key":"alias/x"}`, 403, `"code":"permission_denied"`)
	c.wantHas(nsKey.Token, "POST", "/v1/namespaces/team-a/key/shred", ``, 403, `"code":"permission_denied"`)

	b := c.wantHas(admin, "PUT", "/v1/namespaces/team-a/key", `{"kms_key":"alias/team-a"}`, 200, `"kms_key":"alias/team-a"`)
	var k streamapi.NamespaceKey
	if err := json.Unmarshal([]byte(b), &k); err != nil || k.Generation != 1 || k.State != meta.NamespaceKeyActive || k.ID == 0 {
		t.Fatalf("attach: %s", b)
	}
	c.wantHas(admin, "PUT", "/v1/namespaces/team-a/key", `{"kms_key":"alias/team-a"}`, 200, `"generation":1`) // a retry
	c.wantHas(admin, "PUT", "/v1/namespaces/team-a/key", `{"kms_key":"alias/other"}`, 400, "rotate")
	c.wantHas(admin, "PUT", "/v1/namespaces/team-b/key", `{"create":true}`, 200, `"kms_key":"arn:aws:kms:`)
	if len(fk.created) != 1 || fk.created[0] != "loam namespace team-b" {
		t.Fatalf("created keys %v", fk.created)
	}
	// A namespace with a key is refused before a KMS key is made that could not be attached.
	c.wantHas(admin, "PUT", "/v1/namespaces/team-a/key", `{"create":true}`, 400, "already has a key")
	if len(fk.created) != 1 {
		t.Fatalf("created keys %v: a key was made for a namespace that has one", fk.created)
	}
	c.wantHas(admin, "GET", "/v1/namespaces/team-a/key", "", 200, `"kms_key":"alias/team-a"`)
	c.wantHas(admin, "POST", "/v1/namespaces/team-a/key/rotate", ``, 200, `"generation":2`)
	c.wantHas(admin, "POST", "/v1/namespaces/team-a/key/rotate", `{"kms_key":"alias/team-a-2"}`, 200, `"kms_key":"alias/team-a-2"`)
	c.wantHas(admin, "POST", "/v1/namespaces/team-b/key/rotate", `{"x":1}`, 400, `"code":"`)

	for _, bad := range []string{`{"pending_days":3}`, `{"pending_days":31}`, `{"wait_ms":-1}`, `{"wait_ms":9999999}`} {
		c.wantHas(admin, "POST", "/v1/namespaces/team-a/key/shred", bad, 400, `"code":"invalid_argument"`)
	}
	start := time.Now()
	b = c.wantHas(admin, "POST", "/v1/namespaces/team-a/key/shred", `{"pending_days":10}`, 200, `"state":"shredded"`)
	if !strings.Contains(b, `"dropped":["k-1"]`) {
		t.Fatalf("shred answered before the node confirmed: %s", b)
	}
	if fk.disabled["alias/team-a-2"] != 1 || fk.deleted["alias/team-a-2"] != 10 {
		t.Fatalf("KMS calls: disabled %v, deletion scheduled %v", fk.disabled, fk.deleted)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("shred took %v", took)
	}
	c.wantHas(admin, "POST", "/v1/namespaces/team-a/key/shred", ``, 200, `"state":"shredded"`) // repeated
	c.wantHas(admin, "POST", "/v1/namespaces/team-a/key/rotate", ``, 400, "shredded")
	c.wantHas(admin, "POST", "/v1/namespaces/nope/key/shred", ``, 404, `"code":"not_found"`)
}

// wantHas is want for a body holding sub (any part of it, not only a code).
func (c authCall) wantHas(key, method, path, body string, status int, sub string) string {
	c.t.Helper()
	got, b := c.do(key, method, path, body)
	if got != status || !strings.Contains(b, sub) {
		c.t.Fatalf("%s %s %s: %d %s; want %d with %s", method, path, body, got, b, status, sub)
	}
	return b
}
