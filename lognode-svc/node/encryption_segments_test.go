package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/segmenter"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/loamv1pb"
)

// TestEncryptedNamespaceSegments, against the embedded local-kms: two namespaces produce
// into the same WAL objects, one with a key; the segmenter (with the functions' catalog)
// segments both, the keyed one under ns/<id>/seg/ sealed in pages, the other under seg/.
// A cold node reads both from segments identically to what was produced, over JSON, the
// binary path and gRPC. A flipped byte in a sealed page answers an error and no records.
// Disabling the KMS key makes only the keyed namespace answer key_unavailable from
// segments (403 / FAILED_PRECONDITION naming it); re-enabling restores. A shred makes the
// node that cached the segments' plaintext (memory and disk cache) drop it: its reads
// answer key_unavailable and no ns-<id>- file is left in its disk cache.
func TestEncryptedNamespaceSegments(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw := localKMS(t)
	rec := &recordingKMS{Client: raw}
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	mc := startSequencer(t)
	bucket := objstore.NewMem()
	start := func(id, diskDir string) *node.Node {
		n, err := node.Start(ctx, node.Config{NodeID: id, HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Bucket: bucket, Meta: mc,
			FlushInterval: 50 * time.Millisecond, Logger: logger, KMS: rec, KMSAdmin: raw, KeyRefresh: 100 * time.Millisecond,
			DiskCacheDir: diskDir, DiskCacheBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(context.Background()) })
		return n
	}
	w := start("writer-1", "")
	wurl := "http://" + w.Addr()
	if a := do(t, "POST", wurl+"/v1/namespaces", "application/json", `{"name":"tenant-a"}`, ""); a.status != 201 {
		t.Fatalf("create namespace: %d %s", a.status, a.body)
	}
	if a := do(t, "PUT", wurl+"/v1/namespaces/tenant-a/key", "application/json", `{"create":true}`, ""); a.status != 200 {
		t.Fatalf("attach a key: %d %s", a.status, a.body)
	}
	ks, err := mc.ListNamespaceKeys(ctx)
	if err != nil || len(ks) != 1 {
		t.Fatal(ks, err)
	}
	nk := ks[0]
	for _, ns := range []string{"tenant-a", "default"} {
		if a := do(t, "POST", wurl+"/v1/namespaces/"+ns+"/streams", "application/json", `{"name":"s","partitions":1}`, ""); a.status != 201 {
			t.Fatalf("create stream in %s: %d %s", ns, a.status, a.body)
		}
	}
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		for _, ns := range []string{"tenant-a", "default"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf(`{"records":[{"value":"%s-record-%d-%s"}]}`, ns, i, strings.Repeat("x", 200))
				if a := do(t, "POST", wurl+"/v1/namespaces/"+ns+"/streams/s/records", "application/json", body, ""); a.status != 200 {
					t.Errorf("produce to %s: %d %s", ns, a.status, a.body)
				}
			}()
		}
	}
	wg.Wait()

	// The segmenter, as the functions run it: a catalog without a node id.
	cat, _ := envelope.FunctionKeys(mc, bucket, rec, logger)
	seg, err := segmenter.New(segmenter.Config{Bucket: bucket, Meta: mc, TargetBytes: segmenter.MinTargetBytes, MaxAge: time.Millisecond,
		Keys: cat, PageSize: envelope.MinPageSize, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := seg.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	prefix := map[string]string{"tenant-a": envelope.SegmentKey(nk.ID, "seg/"), "default": "seg/"}
	for _, ns := range []string{"tenant-a", "default"} {
		sts, err := mc.ListStreams(ctx, ns)
		if err != nil || len(sts) != 1 {
			t.Fatal(sts, err)
		}
		es, _, err := mc.Lookup(ctx, sts[0].ID, 0, 0, 100)
		if err != nil || len(es) == 0 {
			t.Fatal(es, err)
		}
		for _, e := range es {
			if e.Kind != meta.KindSegment || !strings.HasPrefix(e.Object, prefix[ns]) {
				t.Fatalf("%s: entry %+v, want a segment under %s", ns, e, prefix[ns])
			}
		}
	}
	var sealedKey string
	bucket.List(ctx, "", func(o objstore.ObjectInfo) error {
		b, _ := bucket.Get(ctx, o.Key)
		if bytes.Contains(b, []byte("tenant-a-record")) {
			t.Errorf("%s holds the keyed namespace's records in clear", o.Key)
		}
		if _, ok := envelope.SealedNamespace(o.Key); ok && sealedKey == "" {
			sealedKey = o.Key
		}
		return nil
	})
	if sealedKey == "" {
		t.Fatal("no sealed segment stored")
	}

	fetch := func(nd *node.Node, ns string) httpAnswer {
		return do(t, "GET", "http://"+nd.Addr()+"/v1/namespaces/"+ns+"/streams/s/partitions/0/records?offset=0&max_bytes=10000000", "", "", "")
	}
	values := func(a httpAnswer) []string {
		var fr streamapi.FetchResponse
		if err := json.Unmarshal(a.body, &fr); err != nil {
			t.Fatalf("fetch: %d %s", a.status, a.body)
		}
		var out []string
		for _, r := range fr.Records {
			out = append(out, string(r.Value))
		}
		return out
	}
	readAll := func(nd *node.Node, ns string) {
		t.Helper()
		a := fetch(nd, ns)
		got := values(a)
		if a.status != 200 || len(got) != n {
			t.Fatalf("json fetch of %s: %d, %d records", ns, a.status, len(got))
		}
		for i := range n {
			if !strings.Contains(string(a.body), fmt.Sprintf("%s-record-%d-", ns, i)) {
				t.Fatalf("json fetch of %s lacks record %d", ns, i)
			}
		}
		b := do(t, "GET", "http://"+nd.Addr()+"/v1/namespaces/"+ns+"/streams/s/partitions/0/records?offset=0", "", "", streamapi.MediaRecordBatch)
		if b.status != 200 || !bytes.Contains(b.body, []byte(ns+"-record-")) {
			t.Fatalf("binary fetch of %s: %d", ns, b.status)
		}
		conn, err := grpc.NewClient(nd.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		g, err := loamv1pb.NewRecordServiceClient(conn).Fetch(ctx, &loamv1pb.FetchRequest{Namespace: ns, Stream: "s", Partition: 0, Offset: 0})
		if err != nil || len(g.GetRecords()) == 0 || !strings.Contains(string(g.GetRecords()[0].GetValue()), ns+"-record-") {
			t.Fatalf("grpc fetch of %s: %v", ns, err)
		}
	}
	diskDir := t.TempDir()
	cold := start("cold-1", diskDir)
	readAll(cold, "tenant-a")
	readAll(cold, "default")
	if a, b := values(fetch(cold, "tenant-a")), values(fetch(cold, "default")); len(a) != len(b) {
		t.Fatalf("the namespaces read back differently: %d and %d records", len(a), len(b))
	}

	// Tampering: a flipped byte in a sealed page.
	orig, _ := bucket.Get(ctx, sealedKey)
	bad := bytes.Clone(orig)
	bad[envelope.PagesHeaderLen+10] ^= 1
	if err := bucket.Put(ctx, sealedKey, bad); err != nil {
		t.Fatal(err)
	}
	if a := fetch(start("cold-tamper", ""), "tenant-a"); a.status == 200 || strings.Contains(string(a.body), "tenant-a-record") {
		t.Fatalf("a tampered page: %d %s, want an error and no records", a.status, a.body)
	}
	if err := bucket.Put(ctx, sealedKey, orig); err != nil {
		t.Fatal(err)
	}

	// The key disabled: a cold node answers key_unavailable for that namespace only.
	if _, err := raw.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(nk.KeyARN)}); err != nil {
		t.Fatal(err)
	}
	cold2 := start("cold-2", "")
	a := fetch(cold2, "tenant-a")
	if a.status != 403 || a.code(t) != streamapi.CodeKeyUnavailable || !strings.Contains(string(a.body), "tenant-a") || strings.Contains(string(a.body), "record-") {
		t.Fatalf("json fetch with the key disabled: %d %s, want 403 key_unavailable naming tenant-a", a.status, a.body)
	}
	conn, err := grpc.NewClient(cold2.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = loamv1pb.NewRecordServiceClient(conn).Fetch(ctx, &loamv1pb.FetchRequest{Namespace: "tenant-a", Stream: "s"})
	if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "tenant-a") {
		t.Fatalf("grpc fetch with the key disabled: %v, want FAILED_PRECONDITION naming tenant-a", err)
	}
	readAll(cold2, "default")
	if _, err := raw.EnableKey(ctx, &kms.EnableKeyInput{KeyId: aws.String(nk.KeyARN)}); err != nil {
		t.Fatal(err)
	}
	readAll(cold2, "tenant-a")

	// Shred: the node that cached the segments' plaintext drops it.
	nsFiles := func() int {
		m, _ := filepath.Glob(filepath.Join(diskDir, "*ns-"+fmt.Sprint(nk.ID)+"-*"))
		return len(m)
	}
	if nsFiles() == 0 {
		entries, _ := os.ReadDir(diskDir)
		t.Fatalf("the cold node's disk cache holds no block of the keyed namespace (%d files)", len(entries))
	}
	if _, err := mc.ShredNamespaceKey(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(nk.KeyARN)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ks, _ := mc.ListNamespaceKeys(ctx)
		if len(ks) == 1 && strings.Contains(strings.Join(ks[0].Dropped, ","), "cold-1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cold-1 did not confirm the shred: %+v", ks)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if k := nsFiles(); k != 0 {
		t.Fatalf("%d disk-cache files of the shredded namespace left", k)
	}
	if a := fetch(cold, "tenant-a"); a.status != 403 || a.code(t) != streamapi.CodeKeyUnavailable || strings.Contains(string(a.body), "record-") {
		t.Fatalf("fetch after the shred on the node that cached it: %d %s", a.status, a.body)
	}
	readAll(cold, "default")

	// No key material in the bucket (sealed segments included), the logs, the error
	// answers or the metastore.
	rec.mu.Lock()
	plaintexts := slices2(rec.plaintexts)
	rec.mu.Unlock()
	if len(plaintexts) < 2 {
		t.Fatalf("%d data keys recorded", len(plaintexts))
	}
	var places [][]byte
	bucket.List(ctx, "", func(o objstore.ObjectInfo) error {
		b, _ := bucket.Get(ctx, o.Key)
		places = append(places, b)
		return nil
	})
	ks, _ = mc.ListNamespaceKeys(ctx)
	kj, _ := json.Marshal(ks)
	logMu.Lock()
	places = append(places, bytes.Clone(logs.Bytes()), kj, a.body)
	logMu.Unlock()
	for i, p := range places {
		for _, k := range plaintexts {
			if bytes.Contains(p, k) || bytes.Contains(p, []byte(fmt.Sprintf("%x", k))) {
				t.Fatalf("key material in place %d of %d (the last three: logs, metastore, an error answer)", i, len(places))
			}
		}
	}
}
