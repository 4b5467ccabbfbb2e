package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	localkms "github.com/loamhq/loam/local/kms"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
	"github.com/loamhq/loam/shared/walfmt"
)

// recordingKMS keeps every data key KMS hands out, so the test can look for key material
// where it must not be.
type recordingKMS struct {
	*kms.Client
	mu         sync.Mutex
	plaintexts [][]byte
}

func (r *recordingKMS) GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	out, err := r.Client.GenerateDataKey(ctx, in, opts...)
	if err == nil {
		r.mu.Lock()
		r.plaintexts = append(r.plaintexts, bytes.Clone(out.Plaintext))
		r.mu.Unlock()
	}
	return out, err
}

func (r *recordingKMS) Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	out, err := r.Client.Decrypt(ctx, in, opts...)
	if err == nil {
		r.mu.Lock()
		r.plaintexts = append(r.plaintexts, bytes.Clone(out.Plaintext))
		r.mu.Unlock()
	}
	return out, err
}

type httpAnswer struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, url, ctype, body string, accept string) httpAnswer {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpAnswer{resp.StatusCode, resp.Header, b}
}

func (a httpAnswer) code(t *testing.T) string {
	var e streamapi.ErrorBody
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("not an error body: %d %s", a.status, a.body)
	}
	return e.Error.Code
}

// TestEncryptedNamespaceEndToEnd, against the embedded local-kms: two namespaces produce
// into the same WAL objects, one with a key. A cold node reads both over JSON, the binary
// path and gRPC; the keyed namespace's records are sealed in the bucket. Disabling the KMS
// key makes only the keyed namespace answer key_unavailable (403 / FAILED_PRECONDITION,
// naming it) on the cold node and on produce; the other reads everything; enabling it
// again restores access. No key material is in the bucket, the logs, the metrics, the
// errors or the metastore.
func TestEncryptedNamespaceEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw := localKMS(t)
	rec := &recordingKMS{Client: raw}
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))

	mc := startSequencer(t)
	bucket := objstore.NewMem()
	start := func(id string) *node.Node {
		n, err := node.Start(ctx, node.Config{NodeID: id, HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bucket: bucket, Meta: mc,
			FlushInterval: 50 * time.Millisecond, Logger: logger, KMS: rec, KMSAdmin: raw, KeyRefresh: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(context.Background()) })
		return n
	}
	w := start("writer-1")
	wurl := "http://" + w.Addr()
	if a := do(t, "POST", wurl+"/v1/namespaces", "application/json", `{"name":"tenant-a"}`, ""); a.status != 201 {
		t.Fatalf("create namespace: %d %s", a.status, a.body)
	}
	a := do(t, "PUT", wurl+"/v1/namespaces/tenant-a/key", "application/json", `{"create":true}`, "")
	var key streamapi.NamespaceKey
	if a.status != 200 || json.Unmarshal(a.body, &key) != nil || key.KMSKey == "" || key.Generation != 1 || key.State != meta.NamespaceKeyActive {
		t.Fatalf("attach a new key: %d %s", a.status, a.body)
	}
	for _, ns := range []string{"tenant-a", "default"} {
		if a := do(t, "POST", wurl+"/v1/namespaces/"+ns+"/streams", "application/json", `{"name":"s","partitions":1}`, ""); a.status != 201 {
			t.Fatalf("create stream in %s: %d %s", ns, a.status, a.body)
		}
	}
	// Both namespaces' produces land in one flush (50 ms): the same WAL objects.
	var wg sync.WaitGroup
	for i := range 5 {
		for _, ns := range []string{"tenant-a", "default"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf(`{"records":[{"value":{"secret":"%s-record-%d"}}]}`, ns, i)
				if a := do(t, "POST", wurl+"/v1/namespaces/"+ns+"/streams/s/records", "application/json", body, ""); a.status != 200 {
					t.Errorf("produce to %s: %d %s", ns, a.status, a.body)
				}
			}()
		}
	}
	wg.Wait()
	var shared, encrypted int
	bucket.List(ctx, "wal/", func(o objstore.ObjectInfo) error {
		body, _ := bucket.Get(ctx, o.Key)
		if bytes.Contains(body, []byte("tenant-a-record")) {
			t.Errorf("%s holds the keyed namespace's records in clear", o.Key)
		}
		obj, err := walfmt.Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		enc := 0
		for _, c := range obj.Chunks {
			if c.Encrypted {
				enc++
			}
		}
		encrypted += enc
		if enc > 0 && enc < len(obj.Chunks) {
			shared++
		}
		return nil
	})
	if encrypted == 0 || shared == 0 {
		t.Fatalf("%d encrypted chunks, %d objects shared by both namespaces: want both", encrypted, shared)
	}

	cold := start("cold-1")
	curl := "http://" + cold.Addr()
	conn, err := grpc.NewClient(cold.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := loamv1pb.NewRecordServiceClient(conn)
	fetchJSON := func(ns string) httpAnswer {
		return do(t, "GET", curl+"/v1/namespaces/"+ns+"/streams/s/partitions/0/records?offset=0", "", "", "")
	}
	readAll := func(ns string) {
		t.Helper()
		a := fetchJSON(ns)
		var fr streamapi.FetchResponse
		if a.status != 200 || json.Unmarshal(a.body, &fr) != nil || len(fr.Records) != 5 || !strings.Contains(string(a.body), ns+"-record-4") {
			t.Fatalf("json fetch of %s: %d %s", ns, a.status, a.body)
		}
		b := do(t, "GET", curl+"/v1/namespaces/"+ns+"/streams/s/partitions/0/records?offset=0", "", "", streamapi.MediaRecordBatch)
		if b.status != 200 || !bytes.Contains(b.body, []byte(ns+"-record-4")) {
			t.Fatalf("binary fetch of %s: %d %q", ns, b.status, b.body)
		}
		g, err := rc.Fetch(ctx, &loamv1pb.FetchRequest{Namespace: ns, Stream: "s", Partition: 0, Offset: 0})
		var values []string
		for _, r := range g.GetRecords() {
			values = append(values, string(r.GetValue()))
		}
		if err != nil || len(values) != 5 || !strings.Contains(strings.Join(values, ","), ns+"-record-4") {
			t.Fatalf("grpc fetch of %s: %v %v", ns, g, err)
		}
	}
	readAll("tenant-a")
	readAll("default")

	// Disable the key: the cold node's caches are dropped by a restart (a new cold node).
	if _, err := raw.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(key.KMSKey)}); err != nil {
		t.Fatal(err)
	}
	cold2 := start("cold-2")
	c2url := "http://" + cold2.Addr()
	a = do(t, "GET", c2url+"/v1/namespaces/tenant-a/streams/s/partitions/0/records?offset=0", "", "", "")
	if a.status != 403 || a.code(t) != streamapi.CodeKeyUnavailable || !strings.Contains(string(a.body), "tenant-a") {
		t.Fatalf("json fetch with the key disabled: %d %s, want 403 key_unavailable naming tenant-a", a.status, a.body)
	}
	if strings.Contains(string(a.body), "record") {
		t.Fatalf("the refusal carries records: %s", a.body)
	}
	a = do(t, "GET", c2url+"/v1/namespaces/tenant-a/streams/s/partitions/0/records?offset=0", "", "", streamapi.MediaRecordBatch)
	if a.status != 403 || a.code(t) != streamapi.CodeKeyUnavailable {
		t.Fatalf("binary fetch with the key disabled: %d %s", a.status, a.body)
	}
	conn2, err := grpc.NewClient(cold2.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	_, err = loamv1pb.NewRecordServiceClient(conn2).Fetch(ctx, &loamv1pb.FetchRequest{Namespace: "tenant-a", Stream: "s"})
	if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "tenant-a") {
		t.Fatalf("grpc fetch with the key disabled: %v, want FAILED_PRECONDITION naming tenant-a", err)
	}
	a = do(t, "GET", c2url+"/v1/namespaces/default/streams/s/partitions/0/records?offset=0", "", "", "")
	if a.status != 200 || !strings.Contains(string(a.body), "default-record-4") {
		t.Fatalf("the other namespace with the key disabled: %d %s", a.status, a.body)
	}
	// Produce: refused for the keyed namespace once its sealing key is due again (a new
	// node has none), the other namespace writes.
	a = do(t, "POST", c2url+"/v1/namespaces/tenant-a/streams/s/records", "application/json", `{"records":[{"value":1}]}`, "")
	if a.status != 403 || a.code(t) != streamapi.CodeKeyUnavailable {
		t.Fatalf("produce with the key disabled: %d %s", a.status, a.body)
	}
	if a := do(t, "POST", c2url+"/v1/namespaces/default/streams/s/records", "application/json", `{"records":[{"value":1}]}`, ""); a.status != 200 {
		t.Fatalf("produce to the other namespace: %d %s", a.status, a.body)
	}

	// Enable it again: access is back, on the same node.
	if _, err := raw.EnableKey(ctx, &kms.EnableKeyInput{KeyId: aws.String(key.KMSKey)}); err != nil {
		t.Fatal(err)
	}
	a = do(t, "GET", c2url+"/v1/namespaces/tenant-a/streams/s/partitions/0/records?offset=0", "", "", "")
	if a.status != 200 || !strings.Contains(string(a.body), "tenant-a-record-4") {
		t.Fatalf("json fetch after re-enabling: %d %s", a.status, a.body)
	}

	// No key material anywhere.
	rec.mu.Lock()
	plaintexts := slices2(rec.plaintexts)
	rec.mu.Unlock()
	if len(plaintexts) == 0 {
		t.Fatal("no data keys recorded")
	}
	var places []struct {
		what string
		b    []byte
	}
	bucket.List(ctx, "", func(o objstore.ObjectInfo) error {
		b, _ := bucket.Get(ctx, o.Key)
		places = append(places, struct {
			what string
			b    []byte
		}{o.Key, b})
		return nil
	})
	logMu.Lock()
	places = append(places, struct {
		what string
		b    []byte
	}{"logs", bytes.Clone(logs.Bytes())})
	logMu.Unlock()
	for _, n := range []*node.Node{w, cold, cold2} {
		m := do(t, "GET", "http://"+n.Addr()+"/metrics", "", "", "")
		places = append(places, struct {
			what string
			b    []byte
		}{"metrics", m.body})
	}
	ks, err := mc.ListNamespaceKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kj, _ := json.Marshal(ks)
	places = append(places, struct {
		what string
		b    []byte
	}{"metastore", kj}, struct {
		what string
		b    []byte
	}{"error answers", a.body})
	for _, p := range places {
		for _, k := range plaintexts {
			if bytes.Contains(p.b, k) || bytes.Contains(p.b, []byte(fmt.Sprintf("%x", k))) {
				t.Fatalf("key material in %s", p.what)
			}
		}
	}
}

func slices2(b [][]byte) [][]byte {
	out := make([][]byte, len(b))
	copy(out, b)
	return out
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestNodeWithoutKMSRefusesKeyedNamespace: a log node without KMS never writes a keyed
// namespace's records in clear: its produce answers key_unavailable naming the namespace,
// and other namespaces write as usual.
func TestNodeWithoutKMSRefusesKeyedNamespace(t *testing.T) {
	ctx := context.Background()
	mc := startSequencer(t)
	bucket := objstore.NewMem()
	if err := mc.CreateNamespace(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.AttachNamespaceKey(ctx, "tenant-a", "alias/tenant-a"); err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(ctx, node.Config{NodeID: "plain-1", HTTPAddr: "127.0.0.1:0", Bucket: bucket, Meta: mc,
		FlushInterval: 5 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)
	url := "http://" + n.Addr()
	for _, ns := range []string{"tenant-a", "default"} {
		if a := do(t, "POST", url+"/v1/namespaces/"+ns+"/streams", "application/json", `{"name":"s","partitions":1}`, ""); a.status != 201 {
			t.Fatalf("create stream in %s: %d %s", ns, a.status, a.body)
		}
	}
	a := do(t, "POST", url+"/v1/namespaces/tenant-a/streams/s/records", "application/json", `{"records":[{"value":"tenant-a-secret"}]}`, "")
	if a.status != 403 || a.code(t) != streamapi.CodeKeyUnavailable || !strings.Contains(string(a.body), "tenant-a") {
		t.Fatalf("produce to a keyed namespace on a node without KMS: %d %s, want 403 key_unavailable", a.status, a.body)
	}
	if a := do(t, "POST", url+"/v1/namespaces/default/streams/s/records", "application/json", `{"records":[{"value":"plain"}]}`, ""); a.status != 200 {
		t.Fatalf("produce to the other namespace: %d %s", a.status, a.body)
	}
	bucket.List(ctx, "", func(o objstore.ObjectInfo) error {
		if b, _ := bucket.Get(ctx, o.Key); bytes.Contains(b, []byte("tenant-a-secret")) {
			t.Errorf("%s holds the keyed namespace's record in clear", o.Key)
		}
		return nil
	})
}

// localKMS starts the embedded local-kms for tb (stopped at its cleanup, after the nodes
// started later) and returns a KMS API client of it.
func localKMS(tb testing.TB) *kms.Client {
	tb.Helper()
	srv, err := localkms.Start(tb.TempDir(), "")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	return kms.New(kms.Options{Region: localkms.Region, BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}
