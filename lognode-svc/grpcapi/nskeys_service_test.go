package grpcapi_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	localkms "github.com/loamhq/loam/local/kms"
	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// keyEnv is a log node with authentication, the embedded KMS (or none) and a node
// registry, on a real sequencer, reached over gRPC.
type keyEnv struct {
	n     *node.Node
	mc    meta.Client
	conn  *grpc.ClientConn
	keys  loamv1pb.NamespaceKeyServiceClient
	admin string          // an admin API key
	kms   *kms.Client     // the embedded KMS, nil without one
	reg   *coord.Registry // the node registry
}

func startKeyNode(t *testing.T, withKMS bool) *keyEnv {
	t.Helper()
	e := &keyEnv{mc: startSequencer(t)}
	admin, err := auth.BootstrapNew(context.Background(), e.mc)
	if err != nil {
		t.Fatal(err)
	}
	e.admin = admin
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e.reg = &coord.Registry{Store: store}
	cfg := node.Config{NodeID: "nk-1", HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bucket: objstore.NewMem(), Meta: e.mc,
		FlushInterval: 5 * time.Millisecond, Logger: quiet(), Auth: auth.New(e.mc, auth.Options{TTL: 100 * time.Millisecond}),
		Registry: e.reg, KeyRefresh: 50 * time.Millisecond}
	if withKMS {
		srv, err := localkms.Start(t.TempDir(), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		e.kms = kms.New(kms.Options{Region: localkms.Region, BaseEndpoint: aws.String(srv.URL),
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
		cfg.KMS, cfg.KMSAdmin = e.kms, e.kms
	}
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.n = n
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	e.conn, err = grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.conn.Close() })
	e.keys = loamv1pb.NewNamespaceKeyServiceClient(e.conn)
	return e
}

// wantRefused is wantCode that also checks the status's message holds sub.
func wantRefused(t *testing.T, what string, err error, code codes.Code, reason, sub string) *status.Status {
	t.Helper()
	wantCode(t, what, err, code, reason)
	st := status.Convert(err)
	if !strings.Contains(st.Message(), sub) {
		t.Fatalf("%s: %q does not say %q", what, st.Message(), sub)
	}
	return st
}

// TestNamespaceKeyService: attach (an existing KMS key, or a new one), read, rotate and
// shred a namespace's key over gRPC with an admin key, against the embedded KMS; the
// shred disables the KMS key, schedules its deletion, answers once the node confirmed it,
// and the namespace's records then answer key_unavailable; a live node that never
// confirms makes it DEADLINE_EXCEEDED shred_pending naming that node; bad input, other
// keys and unknown namespaces are refused with their statuses.
func TestNamespaceKeyService(t *testing.T) {
	e := startKeyNode(t, true)
	c := withKey(t, e.admin)
	for _, ns := range []string{"team-a", "team-b"} {
		if err := e.mc.CreateNamespace(c, ns); err != nil {
			t.Fatal(err)
		}
	}
	ck, err := loamv1pb.NewKeyServiceClient(e.conn).CreateKey(c, &loamv1pb.CreateKeyRequest{Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	nsc := withKey(t, ck.GetKey())

	// Only an admin key manages keys: a namespace's own key may not, none is unauthenticated.
	_, err = e.keys.GetNamespaceKey(nsc, &loamv1pb.GetNamespaceKeyRequest{Namespace: "team-a"})
	wantCode(t, "get with a namespace key", err, codes.PermissionDenied, "PERMISSION_DENIED")
	_, err = e.keys.AttachNamespaceKey(nsc, &loamv1pb.AttachNamespaceKeyRequest{Namespace: "team-a", KmsKey: "alias/x"})
	wantCode(t, "attach with a namespace key", err, codes.PermissionDenied, "PERMISSION_DENIED")
	_, err = e.keys.ShredNamespaceKey(nsc, &loamv1pb.ShredNamespaceKeyRequest{Namespace: "team-a"})
	wantCode(t, "shred with a namespace key", err, codes.PermissionDenied, "PERMISSION_DENIED")
	_, err = e.keys.RotateNamespaceKey(ctx(t), &loamv1pb.RotateNamespaceKeyRequest{Namespace: "team-a"})
	wantCode(t, "rotate without a key", err, codes.Unauthenticated, "UNAUTHORIZED")

	_, err = e.keys.GetNamespaceKey(c, &loamv1pb.GetNamespaceKeyRequest{Namespace: "team-a"})
	wantRefused(t, "get before a key", err, codes.NotFound, streamapi.CodeNotFound, "namespace team-a has no key")
	for _, bad := range []*loamv1pb.AttachNamespaceKeyRequest{{Namespace: "team-a"}, {Namespace: "team-a", KmsKey: "a b"},
		{Namespace: "team-a", KmsKey: "alias/x", Create: true}, {KmsKey: "alias/x"}} {
		_, err = e.keys.AttachNamespaceKey(c, bad)
		wantCode(t, "attach "+bad.String(), err, codes.InvalidArgument, streamapi.CodeInvalidArgument)
	}
	_, err = e.keys.AttachNamespaceKey(c, &loamv1pb.AttachNamespaceKeyRequest{Namespace: "nope", KmsKey: "alias/x"})
	wantRefused(t, "attach to an unknown namespace", err, codes.NotFound, streamapi.CodeNamespaceNotFound, "nope")

	// Attach a KMS key made outside Loam; repeating it answers the same record.
	made, err := e.kms.CreateKey(c, &kms.CreateKeyInput{Description: aws.String("team-a's own")})
	if err != nil {
		t.Fatal(err)
	}
	arnA := aws.ToString(made.KeyMetadata.Arn)
	k, err := e.keys.AttachNamespaceKey(c, &loamv1pb.AttachNamespaceKeyRequest{Namespace: "team-a", KmsKey: arnA})
	if err != nil || k.GetKmsKey() != arnA || k.GetGeneration() != 1 || k.GetState() != meta.NamespaceKeyActive || k.GetId() == 0 || k.GetNamespace() != "team-a" {
		t.Fatalf("attach: %v %v", k, err)
	}
	if again, err := e.keys.AttachNamespaceKey(c, &loamv1pb.AttachNamespaceKeyRequest{Namespace: "team-a", KmsKey: arnA}); err != nil || again.GetGeneration() != 1 {
		t.Fatalf("attach again: %v %v", again, err)
	}
	_, err = e.keys.AttachNamespaceKey(c, &loamv1pb.AttachNamespaceKeyRequest{Namespace: "team-a", KmsKey: "alias/other"})
	wantRefused(t, "attach another key", err, codes.InvalidArgument, streamapi.CodeInvalidArgument, "rotate")
	_, err = e.keys.AttachNamespaceKey(c, &loamv1pb.AttachNamespaceKeyRequest{Namespace: "team-a", Create: true})
	wantRefused(t, "create for a namespace with a key", err, codes.InvalidArgument, streamapi.CodeInvalidArgument, "already has a key")

	// Create: the node's KMS makes the key.
	kb, err := e.keys.AttachNamespaceKey(c, &loamv1pb.AttachNamespaceKeyRequest{Namespace: "team-b", Create: true})
	if err != nil || !strings.HasPrefix(kb.GetKmsKey(), "arn:aws:kms:") || kb.GetGeneration() != 1 {
		t.Fatalf("attach a new key: %v %v", kb, err)
	}
	d, err := e.kms.DescribeKey(c, &kms.DescribeKeyInput{KeyId: aws.String(kb.GetKmsKey())})
	if err != nil || aws.ToString(d.KeyMetadata.Description) != "loam namespace team-b" || d.KeyMetadata.KeyState != kmstypes.KeyStateEnabled {
		t.Fatalf("the created KMS key: %+v %v", d, err)
	}
	if got, err := e.keys.GetNamespaceKey(c, &loamv1pb.GetNamespaceKeyRequest{Namespace: "team-b"}); err != nil || got.GetKmsKey() != kb.GetKmsKey() {
		t.Fatalf("get: %v %v", got, err)
	}

	// Rotate: on the same key, then onto a new one.
	if r, err := e.keys.RotateNamespaceKey(c, &loamv1pb.RotateNamespaceKeyRequest{Namespace: "team-a"}); err != nil || r.GetGeneration() != 2 || r.GetKmsKey() != arnA {
		t.Fatalf("rotate: %v %v", r, err)
	}
	r, err := e.keys.RotateNamespaceKey(c, &loamv1pb.RotateNamespaceKeyRequest{Namespace: "team-a", Create: true})
	if err != nil || r.GetGeneration() != 3 || r.GetKmsKey() == arnA || !strings.HasPrefix(r.GetKmsKey(), "arn:aws:kms:") {
		t.Fatalf("rotate onto a new key: %v %v", r, err)
	}
	arnA = r.GetKmsKey()
	_, err = e.keys.RotateNamespaceKey(c, &loamv1pb.RotateNamespaceKeyRequest{Namespace: "team-a", KmsKey: "a b"})
	wantCode(t, "rotate onto a bad key", err, codes.InvalidArgument, streamapi.CodeInvalidArgument)
	_, err = e.keys.RotateNamespaceKey(c, &loamv1pb.RotateNamespaceKeyRequest{Namespace: "nope"})
	wantRefused(t, "rotate an unknown namespace", err, codes.NotFound, streamapi.CodeNotFound, "nope")

	// A record of team-a, sealed under its key, reads back before the shred.
	streams, records := loamv1pb.NewStreamServiceClient(e.conn), loamv1pb.NewRecordServiceClient(e.conn)
	if _, err := streams.CreateStream(c, &loamv1pb.CreateStreamRequest{Namespace: "team-a", Name: "s", Partitions: ptr(int32(1))}); err != nil {
		t.Fatal(err)
	}
	if _, err := records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "team-a", Stream: "s", Records: []*loamv1pb.Record{{Value: []byte("secret")}}}); err != nil {
		t.Fatal(err)
	}
	if f, err := records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "team-a", Stream: "s"}); err != nil || len(f.GetRecords()) != 1 {
		t.Fatalf("fetch before the shred: %v %v", f, err)
	}

	for _, bad := range []*loamv1pb.ShredNamespaceKeyRequest{{Namespace: "team-a", PendingDays: 3}, {Namespace: "team-a", PendingDays: 31},
		{Namespace: "team-a", WaitMs: -1}, {Namespace: "team-a", WaitMs: 9999999}, {}} {
		_, err = e.keys.ShredNamespaceKey(c, bad)
		wantCode(t, "shred "+bad.String(), err, codes.InvalidArgument, streamapi.CodeInvalidArgument)
	}
	d, err = e.kms.DescribeKey(c, &kms.DescribeKeyInput{KeyId: aws.String(arnA)})
	if err != nil || d.KeyMetadata.KeyState != kmstypes.KeyStateEnabled {
		t.Fatalf("a refused shred touched the KMS key: %+v %v", d, err)
	}

	// Shred: answered once the node dropped team-a's keys and cached plaintext.
	start := time.Now()
	s, err := e.keys.ShredNamespaceKey(c, &loamv1pb.ShredNamespaceKeyRequest{Namespace: "team-a", PendingDays: 10})
	if err != nil || s.GetState() != meta.NamespaceKeyShredded || s.GetShreddedMs() == 0 || strings.Join(s.GetDropped(), ",") != "nk-1" {
		t.Fatalf("shred: %v %v", s, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("shred took %v", took)
	}
	d, err = e.kms.DescribeKey(c, &kms.DescribeKeyInput{KeyId: aws.String(arnA)})
	if err != nil || d.KeyMetadata.KeyState != kmstypes.KeyStatePendingDeletion || d.KeyMetadata.DeletionDate == nil ||
		d.KeyMetadata.DeletionDate.Sub(start) < 9*24*time.Hour || d.KeyMetadata.DeletionDate.Sub(start) > 11*24*time.Hour {
		t.Fatalf("the shredded KMS key: %+v %v; want its deletion in 10 days", d.KeyMetadata, err)
	}
	_, err = records.Fetch(c, &loamv1pb.FetchRequest{Namespace: "team-a", Stream: "s"})
	wantRefused(t, "fetch after the shred", err, codes.FailedPrecondition, streamapi.CodeKeyUnavailable, "team-a")
	if again, err := e.keys.ShredNamespaceKey(c, &loamv1pb.ShredNamespaceKeyRequest{Namespace: "team-a"}); err != nil || again.GetState() != meta.NamespaceKeyShredded {
		t.Fatalf("shred again: %v %v", again, err)
	}
	_, err = e.keys.RotateNamespaceKey(c, &loamv1pb.RotateNamespaceKeyRequest{Namespace: "team-a"})
	wantRefused(t, "rotate a shredded key", err, codes.InvalidArgument, streamapi.CodeInvalidArgument, "shredded")
	before, err := e.kms.ListKeys(c, &kms.ListKeysInput{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.keys.RotateNamespaceKey(c, &loamv1pb.RotateNamespaceKeyRequest{Namespace: "team-a", Create: true})
	wantRefused(t, "rotate a shredded key onto a new one", err, codes.InvalidArgument, streamapi.CodeInvalidArgument, "shredded")
	if after, err := e.kms.ListKeys(c, &kms.ListKeysInput{}); err != nil || len(after.Keys) != len(before.Keys) {
		t.Fatalf("a refused rotation made a KMS key: %d keys, %d before (%v)", len(after.Keys), len(before.Keys), err)
	}
	_, err = e.keys.ShredNamespaceKey(c, &loamv1pb.ShredNamespaceKeyRequest{Namespace: "nope"})
	wantRefused(t, "shred an unknown namespace", err, codes.NotFound, streamapi.CodeNotFound, "nope")

	// A live node that never confirms: the shred stands but answers shred_pending naming it;
	// once it left, repeating the shred answers.
	if err := e.reg.Heartbeat(c, coord.Node{ID: "ghost-9"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err = e.keys.ShredNamespaceKey(c, &loamv1pb.ShredNamespaceKeyRequest{Namespace: "team-b", WaitMs: 300})
	st := wantRefused(t, "shred with a node that never confirms", err, codes.DeadlineExceeded, streamapi.CodeShredPending, "[ghost-9]")
	for _, det := range st.Details() {
		if info, ok := det.(*errdetails.ErrorInfo); ok && info.GetMetadata()["waiting"] != "ghost-9" {
			t.Fatalf("shred_pending metadata %v, want waiting ghost-9", info.GetMetadata())
		}
	}
	if got, err := e.keys.GetNamespaceKey(c, &loamv1pb.GetNamespaceKeyRequest{Namespace: "team-b"}); err != nil || got.GetState() != meta.NamespaceKeyShredded ||
		strings.Join(got.GetDropped(), ",") != "nk-1" {
		t.Fatalf("after a pending shred: %v %v", got, err)
	}
	if err := e.reg.Leave(c, "ghost-9"); err != nil {
		t.Fatal(err)
	}
	if s, err := e.keys.ShredNamespaceKey(c, &loamv1pb.ShredNamespaceKeyRequest{Namespace: "team-b", WaitMs: 5000}); err != nil || s.GetState() != meta.NamespaceKeyShredded {
		t.Fatalf("shred once the node left: %v %v", s, err)
	}
}

// TestNamespaceKeyServiceWithoutKMS: a node without KMS attaches a named key but refuses
// to create or shred one with FAILED_PRECONDITION kms_not_configured, touching nothing.
func TestNamespaceKeyServiceWithoutKMS(t *testing.T) {
	e := startKeyNode(t, false)
	c := withKey(t, e.admin)
	if err := e.mc.CreateNamespace(c, "team-a"); err != nil {
		t.Fatal(err)
	}
	_, err := e.keys.AttachNamespaceKey(c, &loamv1pb.AttachNamespaceKeyRequest{Namespace: "team-a", Create: true})
	wantRefused(t, "create without KMS", err, codes.FailedPrecondition, streamapi.CodeKMSNotConfigured, "no KMS configured")
	if _, err := e.keys.GetNamespaceKey(c, &loamv1pb.GetNamespaceKeyRequest{Namespace: "team-a"}); status.Code(err) != codes.NotFound {
		t.Fatalf("a refused create attached a key: %v", err)
	}
	if k, err := e.keys.AttachNamespaceKey(c, &loamv1pb.AttachNamespaceKeyRequest{Namespace: "team-a", KmsKey: "alias/team-a"}); err != nil || k.GetKmsKey() != "alias/team-a" {
		t.Fatalf("attach a named key without KMS: %v %v", k, err)
	}
	_, err = e.keys.RotateNamespaceKey(c, &loamv1pb.RotateNamespaceKeyRequest{Namespace: "team-a", Create: true})
	wantRefused(t, "rotate onto a new key without KMS", err, codes.FailedPrecondition, streamapi.CodeKMSNotConfigured, "no KMS configured")
	_, err = e.keys.ShredNamespaceKey(c, &loamv1pb.ShredNamespaceKeyRequest{Namespace: "team-a"})
	wantRefused(t, "shred without KMS", err, codes.FailedPrecondition, streamapi.CodeKMSNotConfigured, "cannot disable the key")
	if k, err := e.keys.GetNamespaceKey(c, &loamv1pb.GetNamespaceKeyRequest{Namespace: "team-a"}); err != nil || k.GetState() != meta.NamespaceKeyActive || k.GetGeneration() != 1 {
		t.Fatalf("after the refusals: %v %v", k, err)
	}
}

// TestNamespaceKeyServiceGrpcurl lists, describes and calls NamespaceKeyService with the
// real grpcurl, as docs/encryption.md shows.
func TestNamespaceKeyServiceGrpcurl(t *testing.T) {
	bin := grpcurlBin(t)
	e := startKeyNode(t, true)
	if err := e.mc.CreateNamespace(ctx(t), "team-a"); err != nil {
		t.Fatal(err)
	}
	run := func(wantErr bool, args ...string) string {
		t.Helper()
		args = append([]string{"-plaintext", "-H", "authorization: Bearer " + e.admin}, args...)
		for i, a := range args {
			if a == "ADDR" {
				args[i] = e.n.GRPCAddr()
			}
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if (err != nil) != wantErr {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run(false, "ADDR", "list"); !strings.Contains(out, "loam.v1.NamespaceKeyService\n") {
		t.Errorf("grpcurl list lacks loam.v1.NamespaceKeyService:\n%s", out)
	}
	out := run(false, "ADDR", "describe", "loam.v1.NamespaceKeyService")
	for _, m := range []string{"GetNamespaceKey", "AttachNamespaceKey", "RotateNamespaceKey", "ShredNamespaceKey"} {
		if !strings.Contains(out, "rpc "+m+" ( .loam.v1.") {
			t.Errorf("describe lacks %s:\n%s", m, out)
		}
	}
	out = run(false, "-d", `{"namespace": "team-a", "create": true}`, "ADDR", "loam.v1.NamespaceKeyService/AttachNamespaceKey")
	if !strings.Contains(out, `"kmsKey": "arn:aws:kms:`) || !strings.Contains(out, `"generation": "1"`) || !strings.Contains(out, `"state": "active"`) {
		t.Errorf("attach:\n%s", out)
	}
	if out := run(false, "-d", `{"namespace": "team-a"}`, "ADDR", "loam.v1.NamespaceKeyService/RotateNamespaceKey"); !strings.Contains(out, `"generation": "2"`) {
		t.Errorf("rotate:\n%s", out)
	}
	if out := run(false, "-d", `{"namespace": "team-a"}`, "ADDR", "loam.v1.NamespaceKeyService/ShredNamespaceKey"); !strings.Contains(out, `"state": "shredded"`) ||
		!strings.Contains(out, `"nk-1"`) {
		t.Errorf("shred:\n%s", out)
	}
	if out := run(true, "-d", `{"namespace": "team-b"}`, "ADDR", "loam.v1.NamespaceKeyService/GetNamespaceKey"); !strings.Contains(out, "NotFound") ||
		!strings.Contains(out, "namespace team-b has no key") {
		t.Errorf("get of a namespace without a key:\n%s", out)
	}
}

// TestNamespaceKeyGoClient: the Go client's gRPC methods answer what its HTTP methods
// answer on the same node, and refusals are the same *APIError codes.
func TestNamespaceKeyGoClient(t *testing.T) {
	e := startKeyNode(t, true)
	c := withKey(t, e.admin)
	if err := e.mc.CreateNamespace(c, "team-a"); err != nil {
		t.Fatal(err)
	}
	g := streamapi.NewGRPCClient(e.conn)
	h, err := streamapi.NewClient("http://"+e.n.Addr(), streamapi.WithAPIKey(e.admin))
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.GetNamespaceKey(c, "team-a")
	if ae, ok := errors.AsType[*streamapi.APIError](err); !ok || ae.Status != 404 || ae.Detail.Code != streamapi.CodeNotFound {
		t.Fatalf("get before a key over gRPC: %v, want 404 not_found", err)
	}
	_, herr := h.GetNamespaceKey(c, "team-a")
	if streamapi.ErrorCode(herr) != streamapi.ErrorCode(err) {
		t.Fatalf("get before a key: gRPC %v, HTTP %v", err, herr)
	}
	k, err := g.AttachNamespaceKey(c, "team-a", streamapi.AttachNamespaceKeyRequest{Create: true})
	if err != nil || !strings.HasPrefix(k.KMSKey, "arn:aws:kms:") || k.Generation != 1 {
		t.Fatalf("attach over gRPC: %+v %v", k, err)
	}
	if k, err = g.RotateNamespaceKey(c, "team-a", streamapi.RotateNamespaceKeyRequest{}); err != nil || k.Generation != 2 {
		t.Fatalf("rotate over gRPC: %+v %v", k, err)
	}
	if hk, err := h.GetNamespaceKey(c, "team-a"); err != nil || !reflect.DeepEqual(hk, k) {
		t.Fatalf("HTTP answers %+v %v, gRPC %+v", hk, err, k)
	}
	_, err = g.ShredNamespaceKey(c, "team-a", streamapi.ShredNamespaceKeyRequest{PendingDays: 5})
	if ae, ok := errors.AsType[*streamapi.APIError](err); !ok || ae.Status != 400 || ae.Detail.Code != streamapi.CodeInvalidArgument || !strings.Contains(ae.Detail.Message, `"pending_days" 5`) {
		t.Fatalf("shred with 5 days over gRPC: %v", err)
	}
	if err := e.reg.Heartbeat(c, coord.Node{ID: "ghost-9"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err = g.ShredNamespaceKey(c, "team-a", streamapi.ShredNamespaceKeyRequest{WaitMs: 200})
	if ae, ok := errors.AsType[*streamapi.APIError](err); !ok || ae.Status != 504 || ae.Detail.Code != streamapi.CodeShredPending || !strings.Contains(ae.Detail.Message, "[ghost-9]") {
		t.Fatalf("shred with a node that never confirms over gRPC: %v", err)
	}
	_, herr = h.ShredNamespaceKey(c, "team-a", streamapi.ShredNamespaceKeyRequest{WaitMs: 200})
	gae, _ := errors.AsType[*streamapi.APIError](err)
	if ae, ok := errors.AsType[*streamapi.APIError](herr); !ok || ae.Status != 504 || ae.Detail.Code != streamapi.CodeShredPending || ae.Detail.Message != gae.Detail.Message {
		t.Fatalf("shred with a node that never confirms: HTTP %v, gRPC %v", herr, err)
	}
	if err := e.reg.Leave(c, "ghost-9"); err != nil {
		t.Fatal(err)
	}
	if k, err = g.ShredNamespaceKey(c, "team-a", streamapi.ShredNamespaceKeyRequest{}); err != nil || k.State != meta.NamespaceKeyShredded || len(k.Dropped) != 1 {
		t.Fatalf("shred over gRPC: %+v %v", k, err)
	}
}
