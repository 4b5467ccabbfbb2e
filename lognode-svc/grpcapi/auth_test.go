package grpcapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// startAuthNode starts a log node whose gRPC API checks keys against a real sequencer,
// and returns its connection and the bootstrap admin key.
func startAuthNode(t *testing.T) (*grpc.ClientConn, string) {
	t.Helper()
	mc := startSequencer(t)
	admin, err := auth.BootstrapNew(context.Background(), mc)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: "ga-1", HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
		Bucket: objstore.NewMem(), Meta: mc, FlushInterval: 5 * time.Millisecond, Logger: quiet(),
		Auth: auth.New(mc, auth.Options{TTL: 100 * time.Millisecond})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, admin
}

func withKey(t *testing.T, key string) context.Context {
	c := ctx(t)
	if key == "" {
		return c
	}
	return metadata.AppendToOutgoingContext(c, "authorization", "Bearer "+key)
}

func wantCode(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
	if reason == "" {
		return
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reason {
			return
		}
	}
	t.Fatalf("%s: %v carries no ErrorInfo reason %s", what, err, reason)
}

func TestAuthGRPC(t *testing.T) {
	conn, admin := startAuthNode(t)
	streams := loamv1pb.NewStreamServiceClient(conn)
	records := loamv1pb.NewRecordServiceClient(conn)
	nss := loamv1pb.NewNamespaceServiceClient(conn)
	keys := loamv1pb.NewKeyServiceClient(conn)

	// Health stays open.
	if _, err := healthpb.NewHealthClient(conn).Check(ctx(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	// No key, a malformed one, an unknown one: UNAUTHENTICATED everywhere.
	unknown, _, _ := auth.NewKey(true, "", "")
	for _, key := range []string{"", "garbage", unknown} {
		c := withKey(t, key)
		_, err := streams.ListStreams(c, &loamv1pb.ListStreamsRequest{Namespace: "default"})
		wantCode(t, "list streams", err, codes.Unauthenticated, "UNAUTHORIZED")
		_, err = records.Produce(c, &loamv1pb.ProduceRequest{Namespace: "default", Stream: "s"})
		wantCode(t, "produce", err, codes.Unauthenticated, "UNAUTHORIZED")
		_, err = streams.ListNamespaces(c, &loamv1pb.ListNamespacesRequest{})
		wantCode(t, "list namespaces", err, codes.Unauthenticated, "UNAUTHORIZED")
		_, err = keys.ListKeys(c, &loamv1pb.ListKeysRequest{})
		wantCode(t, "list keys", err, codes.Unauthenticated, "UNAUTHORIZED")
		sub, err := records.Subscribe(c, &loamv1pb.SubscribeRequest{Namespace: "default", Stream: "s"})
		if err == nil {
			_, err = sub.Recv()
		}
		wantCode(t, "subscribe", err, codes.Unauthenticated, "UNAUTHORIZED")
	}

	// Admin: namespaces and keys.
	ac := withKey(t, admin)
	if _, err := nss.CreateNamespace(ac, &loamv1pb.CreateNamespaceRequest{Name: "team-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := nss.CreateNamespace(ac, &loamv1pb.CreateNamespaceRequest{Name: "team-b"}); err != nil {
		t.Fatal(err)
	}
	ns, err := streams.ListNamespaces(ac, &loamv1pb.ListNamespacesRequest{})
	if err != nil || !strings.Contains(strings.Join(ns.GetNamespaces(), ","), "team-a") {
		t.Fatalf("namespaces: %v, %v", ns, err)
	}
	created, err := keys.CreateKey(ac, &loamv1pb.CreateKeyRequest{Namespace: "team-a"})
	if err != nil || created.GetKey() == "" || created.GetInfo().GetNamespace() != "team-a" {
		t.Fatalf("create key: %v, %v", created, err)
	}
	_, err = keys.CreateKey(ac, &loamv1pb.CreateKeyRequest{})
	wantCode(t, "create key without scope", err, codes.InvalidArgument, "")

	// The namespace key: its namespace yes (unary and streaming), another one and admin no.
	kc := withKey(t, created.GetKey())
	parts := int32(1)
	if _, err := streams.CreateStream(kc, &loamv1pb.CreateStreamRequest{Namespace: "team-a", Name: "s", Partitions: &parts}); err != nil {
		t.Fatal(err)
	}
	if _, err := records.Produce(kc, &loamv1pb.ProduceRequest{Namespace: "team-a", Stream: "s",
		Records: []*loamv1pb.Record{{Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(kc)
	sub, err := records.Subscribe(sctx, &loamv1pb.SubscribeRequest{Namespace: "team-a", Stream: "s", Partition: 0, Offset: 0})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := sub.Recv(); err != nil || len(m.GetRecords()) == 0 {
		t.Fatalf("subscribe: %v, %v", m, err)
	}
	cancel()
	_, err = streams.ListStreams(kc, &loamv1pb.ListStreamsRequest{Namespace: "team-b"})
	wantCode(t, "list streams of another namespace", err, codes.PermissionDenied, "PERMISSION_DENIED")
	_, err = records.Fetch(kc, &loamv1pb.FetchRequest{Namespace: "default", Stream: "s"})
	wantCode(t, "fetch of another namespace", err, codes.PermissionDenied, "PERMISSION_DENIED")
	sub, err = records.Subscribe(kc, &loamv1pb.SubscribeRequest{Namespace: "team-b", Stream: "s"})
	if err == nil {
		_, err = sub.Recv()
	}
	wantCode(t, "subscribe to another namespace", err, codes.PermissionDenied, "PERMISSION_DENIED")
	_, err = streams.ListNamespaces(kc, &loamv1pb.ListNamespacesRequest{})
	wantCode(t, "list namespaces", err, codes.PermissionDenied, "PERMISSION_DENIED")
	_, err = nss.CreateNamespace(kc, &loamv1pb.CreateNamespaceRequest{Name: "x"})
	wantCode(t, "create namespace", err, codes.PermissionDenied, "PERMISSION_DENIED")
	_, err = keys.CreateKey(kc, &loamv1pb.CreateKeyRequest{Namespace: "team-a"})
	wantCode(t, "create key", err, codes.PermissionDenied, "PERMISSION_DENIED")

	// Listing never shows secrets; namespace deletion is refused while streams remain.
	list, err := keys.ListKeys(ac, &loamv1pb.ListKeysRequest{})
	if err != nil || len(list.GetKeys()) != 2 || strings.Contains(list.String(), created.GetKey()) {
		t.Fatalf("list keys: %v, %v", list, err)
	}
	_, err = nss.DeleteNamespace(ac, &loamv1pb.DeleteNamespaceRequest{Name: "team-a"})
	wantCode(t, "delete non-empty namespace", err, codes.FailedPrecondition, "NAMESPACE_NOT_EMPTY")

	// Revocation: refused once the node's cache entry expired (TTL 100 ms here).
	if _, err := keys.RevokeKey(ac, &loamv1pb.RevokeKeyRequest{Id: created.GetInfo().GetId()}); err != nil {
		t.Fatal(err)
	}
	_, err = keys.RevokeKey(ac, &loamv1pb.RevokeKeyRequest{Id: "nosuch"})
	wantCode(t, "revoke unknown key", err, codes.NotFound, "KEY_NOT_FOUND")
	time.Sleep(150 * time.Millisecond)
	_, err = streams.ListStreams(kc, &loamv1pb.ListStreamsRequest{Namespace: "team-a"})
	wantCode(t, "revoked key", err, codes.Unauthenticated, "UNAUTHORIZED")
}
