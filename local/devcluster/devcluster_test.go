package devcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

func ptr[T any](v T) *T { return &v }

type testCluster struct {
	*Cluster
	url    string
	client *streamapi.Client
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs an embedded cluster on dir (and store, when not nil) with loopback ports.
func start(t testing.TB, dir string, store objstore.Bucket, flush time.Duration) *testCluster {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), Config{DataDir: dir, Store: store, HTTPListener: ln, FlushInterval: flush,
		SequencerRPC: freeAddr(t), SequencerRaft: freeAddr(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + c.HTTPAddr()
	cl, err := streamapi.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{Cluster: c, url: url, client: cl}
	t.Cleanup(func() { c.Close(context.Background()) })
	return tc
}

func TestProduceFetchRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := start(t, dir, nil, 10*time.Millisecond)
	if _, err := c.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "s", Partitions: ptr(int32(3))}); err != nil {
		t.Fatal(err)
	}
	var want [3][]string
	for i := range 30 {
		r := streamapi.Record{Value: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)), Partition: ptr(int32(i % 3))}
		resp, err := c.client.Produce(ctx, "default", "s", []streamapi.Record{r})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Offsets[0]; got.Partition != int32(i%3) || got.Offset != int64(i/3) {
			t.Fatalf("record %d landed at %+v", i, got)
		}
		want[i%3] = append(want[i%3], string(r.Value))
	}
	check := func(c *testCluster) {
		t.Helper()
		for p := range 3 {
			resp, err := c.client.Fetch(ctx, "default", "s", int32(p), 0, 1<<20, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Records) != 10 || resp.HighWatermark != 10 || resp.NextOffset != 10 {
				t.Fatalf("partition %d: %d records, hwm %d, next %d", p, len(resp.Records), resp.HighWatermark, resp.NextOffset)
			}
			for i, r := range resp.Records {
				if *r.Offset != int64(i) || string(r.Value) != want[p][i] {
					t.Fatalf("partition %d record %d: offset %d value %s, want %s", p, i, *r.Offset, r.Value, want[p][i])
				}
			}
			// From the middle.
			resp, err = c.client.Fetch(ctx, "default", "s", int32(p), 7, 1<<20, 0)
			if err != nil || len(resp.Records) != 3 || *resp.Records[0].Offset != 7 {
				t.Fatalf("fetch from 7: %+v %v", resp, err)
			}
		}
	}
	check(c)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A restart reads everything back from the bucket (no tail cache).
	c2 := start(t, dir, nil, 10*time.Millisecond)
	check(c2)
	// And keeps assigning dense offsets.
	resp, err := c2.client.Produce(ctx, "default", "s", []streamapi.Record{{Value: json.RawMessage(`1`), Partition: ptr(int32(0))}})
	if err != nil || resp.Offsets[0].Offset != 10 {
		t.Fatalf("produce after restart: %+v %v", resp, err)
	}
}

func TestLongPoll(t *testing.T) {
	ctx := context.Background()
	c := start(t, t.TempDir(), objstore.NewMem(), 5*time.Millisecond)
	if _, err := c.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "lp"}); err != nil {
		t.Fatal(err)
	}
	// An empty long-poll waits about max_wait.
	t0 := time.Now()
	resp, err := c.client.Fetch(ctx, "default", "lp", 0, 0, 1<<20, 300*time.Millisecond)
	if err != nil || len(resp.Records) != 0 {
		t.Fatalf("%+v %v", resp, err)
	}
	if d := time.Since(t0); d < 250*time.Millisecond {
		t.Fatalf("empty long-poll returned after %v", d)
	}
	// A waiting fetch returns as soon as a record commits.
	got := make(chan streamapi.FetchResponse, 1)
	go func() {
		resp, err := c.client.Fetch(ctx, "default", "lp", 0, 0, 1<<20, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	time.Sleep(100 * time.Millisecond)
	t1 := time.Now()
	if _, err := c.client.Produce(ctx, "default", "lp", []streamapi.Record{{Value: json.RawMessage(`"hi"`)}}); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-got:
		if len(resp.Records) != 1 || string(resp.Records[0].Value) != `"hi"` {
			t.Fatalf("%+v", resp)
		}
		if d := time.Since(t1); d > 2*time.Second {
			t.Fatalf("long-poll woke %v after the produce", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long-poll did not wake")
	}
}

func doJSON(t *testing.T, method, url, body string) (int, streamapi.ErrorDetail) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e streamapi.ErrorBody
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s %s: error body is not JSON: %s", method, url, b)
		}
		if resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("error content type %q", resp.Header.Get("Content-Type"))
		}
	}
	return resp.StatusCode, e.Error
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	c := start(t, t.TempDir(), objstore.NewMem(), 5*time.Millisecond)
	if _, err := c.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "b", Partitions: ptr(int32(2))}); err != nil {
		t.Fatal(err)
	}
	// Something acknowledged first, to check nothing bad input does touches it.
	ack, err := c.client.Produce(ctx, "default", "b", []streamapi.Record{{Value: json.RawMessage(`{"keep":1}`), Partition: ptr(int32(0))}})
	if err != nil {
		t.Fatal(err)
	}
	base := c.url + "/v1/namespaces/default/streams"
	big := `{"records":[{"value":"` + strings.Repeat("x", 2<<20) + `"}]}`
	huge := `{"records":[` + strings.Repeat(`{"value":"`+strings.Repeat("y", 1000)+`"},`, 9000) + `{"value":1}]}`
	tests := []struct {
		method, url, body string
		status            int
		code              string
		msg               string
	}{
		{"POST", base + "/b/records", `{"records": [`, 400, streamapi.CodeInvalidJSON, "JSON"},
		{"POST", base + "/b/records", `{"records": [{"value": 1, "partition": "x"}]}`, 400, streamapi.CodeInvalidJSON, "partition"},
		{"POST", base + "/b/records", `{"records": [{"value": 1, "partition": 2}]}`, 400, streamapi.CodePartitionNotFound, "partition 2"},
		{"POST", base + "/b/records", big, 413, streamapi.CodeRecordTooLarge, "records[0]"},
		{"POST", base + "/b/records", huge, 413, streamapi.CodeRequestTooLarge, "limit"},
		{"POST", base + "/nope/records", `{"records": [{"value": 1}]}`, 404, streamapi.CodeStreamNotFound, ""},
		{"POST", c.url + "/v1/namespaces/nons/streams/b/records", `{"records": [{"value": 1}]}`, 404, streamapi.CodeNamespaceNotFound, ""},
		{"GET", base + "/b/partitions/5/records", "", 404, streamapi.CodePartitionNotFound, "partition 5"},
		{"GET", base + "/b/partitions/x/records", "", 400, streamapi.CodeBadRequest, "partition"},
		{"GET", base + "/b/partitions/0/records?offset=99", "", 416, streamapi.CodeOffsetOutOfRange, "offset 99"},
		{"GET", base + "/b/partitions/0/records?offset=-1", "", 400, streamapi.CodeBadRequest, "offset"},
		{"GET", base + "/b/partitions/0/records?max_wait_ms=abc", "", 400, streamapi.CodeBadRequest, "max_wait_ms"},
		{"GET", base + "/b/partitions/0/records?ofset=1", "", 400, streamapi.CodeBadRequest, "ofset"},
		{"POST", base, `{"name": "bad name!"}`, 400, streamapi.CodeInvalidArgument, "name"},
		{"POST", base, `{"name": "b"}`, 409, streamapi.CodeStreamExists, ""},
		{"POST", base, `{"name": "z", "partitions": 0}`, 400, streamapi.CodeInvalidArgument, "partitions"},
		{"POST", base, `{"name": "z", "class": "quorum"}`, 400, streamapi.CodeUnsupportedClass, "quorum"},
		{"POST", base, `{"name": "z", "partitions": "4"}`, 400, streamapi.CodeInvalidJSON, "partitions"},
		{"PATCH", base + "/b", `{"partitions": 1}`, 400, streamapi.CodeInvalidArgument, "partitions"},
		{"POST", base, `{"name": "z", "retention_ms": 0}`, 400, streamapi.CodeInvalidArgument, "retention_ms"},
		{"PATCH", base + "/b", `{"retention_bytes": 0}`, 400, streamapi.CodeInvalidArgument, "retention_bytes"},
		{"PUT", base + "/b", `{}`, 405, streamapi.CodeMethodNotAllowed, "PUT"},
		{"GET", c.url + "/v2/nothing", "", 404, streamapi.CodeNotFound, "/v2/nothing"},
	}
	for _, tc := range tests {
		status, e := doJSON(t, tc.method, tc.url, tc.body)
		if status != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s %s: got %d %s %q, want %d %s containing %q", tc.method, tc.url, status, e.Code, e.Message, tc.status, tc.code, tc.msg)
		}
	}
	// Wrong content type.
	req, _ := http.NewRequest("POST", base+"/b/records", bytes.NewReader([]byte("x")))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 415 {
		t.Fatalf("text/plain produce: %d", resp.StatusCode)
	}
	// The acknowledged record is untouched and nothing else was written.
	f, err := c.client.Fetch(ctx, "default", "b", 0, 0, 1<<20, 0)
	if err != nil || len(f.Records) != 1 || string(f.Records[0].Value) != `{"keep":1}` || *f.Records[0].Offset != ack.Offsets[0].Offset {
		t.Fatalf("after bad input: %+v %v", f, err)
	}
	f, err = c.client.Fetch(ctx, "default", "b", 1, 0, 1<<20, 0)
	if err != nil || len(f.Records) != 0 || f.HighWatermark != 0 {
		t.Fatalf("partition 1 after bad input: %+v %v", f, err)
	}
}

func TestStreamAdmin(t *testing.T) {
	ctx := context.Background()
	c := start(t, t.TempDir(), objstore.NewMem(), 5*time.Millisecond)
	st, err := c.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "a", Partitions: ptr(int32(2)), RetentionMs: ptr(int64(60000))})
	if err != nil || st.Partitions != 2 || st.Class != "standard" || st.RetentionMs != 60000 || st.CleanupPolicy != "delete" {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := c.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	list, err := c.client.ListStreams(ctx, "default")
	if err != nil || len(list) != 2 {
		t.Fatalf("%+v %v", list, err)
	}
	st, err = c.client.PatchStream(ctx, "default", "a", streamapi.PatchStreamRequest{Partitions: ptr(int32(4))})
	if err != nil || st.Partitions != 4 {
		t.Fatalf("%+v %v", st, err)
	}
	// The new partitions take writes at once.
	resp, err := c.client.Produce(ctx, "default", "a", []streamapi.Record{{Value: json.RawMessage(`3`), Partition: ptr(int32(3))}})
	if err != nil || resp.Offsets[0].Offset != 0 {
		t.Fatalf("%+v %v", resp, err)
	}
	got, err := c.client.GetStream(ctx, "default", "a")
	if err != nil || len(got.PartitionInfo) != 4 || got.PartitionInfo[3].HighWatermark != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	if err := c.client.DeleteStream(ctx, "default", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.GetStream(ctx, "default", "a"); streamapi.ErrorCode(err) != streamapi.CodeStreamNotFound {
		t.Fatalf("get after delete: %v", err)
	}
	// Recreated under its name: a new stream, empty.
	if _, err := c.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	f, err := c.client.Fetch(ctx, "default", "a", 0, 0, 1<<20, 0)
	if err != nil || len(f.Records) != 0 || f.HighWatermark != 0 {
		t.Fatalf("recreated stream: %+v %v", f, err)
	}
}

func TestClusterNodes(t *testing.T) {
	c := start(t, t.TempDir(), objstore.NewMem(), 5*time.Millisecond)
	for _, zone := range []string{"", "local", "elsewhere"} {
		resp, err := http.Get(c.url + "/v1/cluster/nodes?zone=" + zone)
		if err != nil {
			t.Fatal(err)
		}
		var got streamapi.ListNodesResponse
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if len(got.Nodes) != 1 || got.Nodes[0].ID != "dev-1" || got.Nodes[0].Zone != "local" || "http://"+got.Nodes[0].HTTPAddr != c.url {
			t.Fatalf("zone %q: %+v", zone, got)
		}
	}
}

// TestConcurrentProducers: many clients, many partitions, every acknowledged offset is
// dense and holds what was sent.
func TestConcurrentProducers(t *testing.T) {
	ctx := context.Background()
	c := start(t, t.TempDir(), objstore.NewMem(), 20*time.Millisecond)
	if _, err := c.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "c", Partitions: ptr(int32(4))}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[[2]int64]string{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				recs := make([]streamapi.Record, 10)
				for j := range recs {
					k := fmt.Sprintf("w%d-%d-%d", w, i, j)
					recs[j] = streamapi.Record{Key: &k, Value: json.RawMessage(fmt.Sprintf("%q", k))}
				}
				resp, err := c.client.Produce(ctx, "default", "c", recs)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for j, o := range resp.Offsets {
					acked[[2]int64{int64(o.Partition), o.Offset}] = string(recs[j].Value)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for p := range 4 {
		resp, err := c.client.Fetch(ctx, "default", "c", int32(p), 0, 64<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range resp.Records {
			if *r.Offset != int64(i) || acked[[2]int64{int64(p), int64(i)}] != string(r.Value) {
				t.Fatalf("partition %d offset %d: %s", p, *r.Offset, r.Value)
			}
		}
		total += len(resp.Records)
	}
	if total != 1600 || len(acked) != 1600 {
		t.Fatalf("%d records fetched, %d acknowledged, want 1600", total, len(acked))
	}
}

// TestFastClockNodeIsRefused: a log node whose clock runs 2 minutes fast has its commits
// refused (clock_ahead, nothing written), and cannot make the other node's later commits
// stale: the cluster keeps committing.
func TestFastClockNodeIsRefused(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMem()
	c := start(t, t.TempDir(), store, 5*time.Millisecond)
	if _, err := c.client.CreateStream(ctx, "default", streamapi.CreateStreamRequest{Name: "clk"}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fast, err := node.Start(ctx, node.Config{NodeID: "fast", Listener: ln, Bucket: store, Meta: c.Meta(), FlushInterval: 5 * time.Millisecond,
		Now: func() time.Time { return time.Now().Add(2 * time.Minute) }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close(ctx)
	fc, _ := streamapi.NewClient("http://" + fast.Addr())
	for range 3 {
		_, err := fc.Produce(ctx, "default", "clk", []streamapi.Record{{Value: json.RawMessage(`"fast"`)}})
		var ae *streamapi.APIError
		if !errors.As(err, &ae) || ae.Detail.Code != streamapi.CodeCommitFailed || !strings.Contains(ae.Detail.Message, "ahead") {
			t.Fatalf("produce through the fast node: %v, want commit_failed naming the clock", err)
		}
		resp, err := c.client.Produce(ctx, "default", "clk", []streamapi.Record{{Value: json.RawMessage(`"ok"`)}})
		if err != nil {
			t.Fatalf("the healthy node's commit after the fast node's: %v", err)
		}
		_ = resp
	}
	f, err := c.client.Fetch(ctx, "default", "clk", 0, 0, 1<<20, 0)
	if err != nil || len(f.Records) != 3 {
		t.Fatalf("%+v %v: want the 3 healthy records only", f, err)
	}
	for _, r := range f.Records {
		if string(r.Value) != `"ok"` {
			t.Fatalf("a fast-clock record was written: %s", r.Value)
		}
	}
}

// TestObjstoreLatency: Config.ObjstoreLatency (loam dev --objstore-latency) delays the
// cluster's bucket calls by the named model, and an unknown name is refused by name.
func TestObjstoreLatency(t *testing.T) {
	if _, err := Start(context.Background(), Config{DataDir: t.TempDir(), ObjstoreLatency: "s3-slow"}); err == nil || !strings.Contains(err.Error(), `"s3-slow"`) {
		t.Fatalf("unknown latency model: %v, want an error naming it", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), Config{DataDir: t.TempDir(), Store: objstore.NewMem(), HTTPListener: ln,
		ObjstoreLatency: "s3-standard", SequencerRPC: freeAddr(t), SequencerRaft: freeAddr(t),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	t0 := time.Now()
	if err := c.Bucket().Put(context.Background(), "probe", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// S3 Standard PUT: median 100 ms; below 10 ms is more than 3.8 σ under it.
	if d := time.Since(t0); d < 10*time.Millisecond {
		t.Fatalf("PUT through an s3-standard cluster took %v, want the modelled latency", d)
	}
}
