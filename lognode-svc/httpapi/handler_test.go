package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// failingWriter is a writer double whose every Write fails with err.
type failingWriter struct{ err error }

func (w failingWriter) Write(context.Context, []writer.Request) ([]writer.Result, error) {
	return nil, w.err
}
func (failingWriter) Close(context.Context) error { return nil }

type httpReply struct {
	status int
	header http.Header
	body   []byte
}

func call(t *testing.T, method, url, body string) httpReply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpReply{resp.StatusCode, resp.Header, b}
}

func (r httpReply) detail(t *testing.T) streamapi.ErrorDetail {
	t.Helper()
	var eb streamapi.ErrorBody
	if err := json.Unmarshal(r.body, &eb); err != nil {
		t.Fatalf("not the error JSON: %d %s", r.status, r.body)
	}
	return eb.Error
}

// TestWriteErrorMapping: each outcome a writer reports answers its status and code; an
// outcome that may have committed is never answered with a definite code.
func TestWriteErrorMapping(t *testing.T) {
	mc := startSequencer(t)
	ctx := t.Context()
	if _, err := mc.CreateStream(ctx, meta.StreamConfig{Namespace: meta.DefaultNS, Name: "s", Partitions: 1, Class: meta.ClassStandard,
		Encoding: meta.EncodingKafka, RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete}); err != nil {
		t.Fatal(err)
	}
	rd, err := reader.New(reader.Config{Bucket: objstore.NewMem(), Meta: mc, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		err       error
		status    int
		code      string
		retriable bool
	}{
		{"unknown wrapping stream not found", fmt.Errorf("%w: %w", writer.ErrCommitUnknown, meta.ErrStreamNotFound), 503, streamapi.CodeCommitUnknown, true},
		{"unknown wrapping stale commit", fmt.Errorf("%w: %w", writer.ErrCommitUnknown, meta.ErrStaleCommit), 503, streamapi.CodeCommitUnknown, true},
		{"unknown after the deadline", fmt.Errorf("%w: %w", writer.ErrCommitUnknown, context.DeadlineExceeded), 503, streamapi.CodeCommitUnknown, true},
		{"sequencer unavailable on a write", fmt.Errorf("commit wal/x: %w", meta.ErrUnavailable), 503, streamapi.CodeCommitUnknown, true},
		{"bare deadline on a write", context.DeadlineExceeded, 503, streamapi.CodeCommitUnknown, true},
		{"unclassified write error", errors.New("boom"), 503, streamapi.CodeCommitUnknown, true},
		{"failed: stream not found", fmt.Errorf("%w: %w", writer.ErrCommitFailed, meta.ErrStreamNotFound), 404, streamapi.CodeStreamNotFound, false},
		{"failed: partition not found", fmt.Errorf("%w: %w", writer.ErrCommitFailed, meta.ErrPartitionNotFound), 404, streamapi.CodePartitionNotFound, false},
		{"failed: sequencer unavailable", fmt.Errorf("%w: %w", writer.ErrSequencerUnavailable, meta.ErrUnavailable), 503, streamapi.CodeCommitFailed, true},
		{"failed", fmt.Errorf("%w: put wal/x: %w", writer.ErrCommitFailed, errors.New("503 slow down")), 503, streamapi.CodeCommitFailed, true},
		{"writer closed", writer.ErrClosed, 503, streamapi.CodeUnavailable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, err := httpapi.New(httpapi.Config{NodeID: "n", Meta: mc, Reader: rd, Logger: quiet(),
				Writers: map[string]writer.Writer{meta.ClassStandard: failingWriter{tc.err}}})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(api)
			defer srv.Close()
			r := call(t, "POST", srv.URL+"/v1/namespaces/default/streams/s/records", `{"records":[{"value":1}]}`)
			d := r.detail(t)
			if r.status != tc.status || d.Code != tc.code || d.Retriable != tc.retriable || (r.header.Get("Retry-After") != "") != tc.retriable {
				t.Fatalf("%v: answered %d %s (Retry-After %q), want %d %s retriable %v", tc.err, r.status, r.body, r.header.Get("Retry-After"), tc.status, tc.code, tc.retriable)
			}
			if !strings.Contains(d.Message, tc.err.Error()) {
				t.Fatalf("message %q does not carry the writer's error %q", d.Message, tc.err)
			}
		})
	}
}

// TestRoundRobinWraps: the keyless round-robin counter crosses 2^31 and 2^32 and every
// produce still lands on a partition of the stream.
func TestRoundRobinWraps(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	url := n.srv.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", url, `{"name":"rr","partitions":3}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for _, start := range []uint32{math.MaxInt32 - 2, math.MaxUint32 - 2} {
		n.api.SetRoundRobin(start)
		seen := map[int32]bool{}
		for i := range 6 {
			r := call(t, "POST", url+"/rr/records", `{"records":[{"value":1},{"value":2}]}`)
			if r.status != 200 {
				t.Fatalf("counter from %d, request %d: %d %s", start, i, r.status, r.body)
			}
			var res streamapi.ProduceResponse
			if err := json.Unmarshal(r.body, &res); err != nil {
				t.Fatal(err)
			}
			p := res.Offsets[0].Partition
			if p < 0 || p > 2 || res.Offsets[1].Partition != p {
				t.Fatalf("counter from %d, request %d: partitions %+v", start, i, res.Offsets)
			}
			seen[p] = true
		}
		if len(seen) != 3 {
			t.Fatalf("counter from %d: 6 keyless requests used partitions %v, want all 3", start, seen)
		}
	}
}

// rawRequest writes a request's head and the first part of its body on a new connection
// and leaves it open.
func rawRequest(t *testing.T, addr, head string, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head+body); err != nil {
		t.Fatal(err)
	}
	return c
}

func readReply(t *testing.T, c net.Conn) *http.Response {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return resp
}

func TestAdmission(t *testing.T) {
	lim := httpapi.Limits{MaxRequestBytes: 4096, MaxRecordBytes: 4096, MaxInflightBodyBytes: 8192, MaxConcurrent: 4}
	n := startNode(t, lim)
	base := n.srv.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", base, `{"name":"a"}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	addr := strings.TrimPrefix(n.srv.URL, "http://")
	head := func(length int) string {
		return fmt.Sprintf("POST /v1/namespaces/default/streams/a/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", length)
	}

	t.Run("content length over the limit is refused before the body", func(t *testing.T) {
		c := rawRequest(t, addr, head(10<<20), "") // no body follows
		resp := readReply(t, c)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 413 || !strings.Contains(string(b), streamapi.CodeRequestTooLarge) || !strings.Contains(string(b), "4096") {
			t.Fatalf("answered %d %s", resp.StatusCode, b)
		}
	})

	t.Run("body budget", func(t *testing.T) {
		// Two bodies of 4096 announced bytes hold the whole 8192-byte budget while they
		// trickle in; a third is refused at once, named, with Retry-After.
		body := `{"records":[{"value":"` + strings.Repeat("x", 4096-len(`{"records":[{"value":""}]}`)) + `"}]}`
		var held []net.Conn
		for range 2 {
			c := rawRequest(t, addr, head(len(body)), body[:10])
			// Admitted and waiting for the rest of its body: no answer comes.
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("a held request was answered: %v", err)
			}
			held = append(held, c)
		}
		r := call(t, "POST", base+"/a/records", `{"records":[{"value":1}]}`)
		d := r.detail(t)
		if r.status != 429 || d.Code != streamapi.CodeOverloaded || !d.Retriable || r.header.Get("Retry-After") == "" || !strings.Contains(d.Message, "8192") {
			t.Fatalf("over the body budget: %d %s", r.status, r.body)
		}
		// Requests without a body are not held by the body budget.
		if r := call(t, "GET", base+"/a", ""); r.status != 200 {
			t.Fatalf("GET while the body budget is full: %d %s", r.status, r.body)
		}
		for _, c := range held {
			if _, err := io.WriteString(c, body[10:]); err != nil {
				t.Fatal(err)
			}
			if resp := readReply(t, c); resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("held produce: %d %s", resp.StatusCode, b)
			}
		}
		if r := call(t, "POST", base+"/a/records", `{"records":[{"value":1}]}`); r.status != 200 {
			t.Fatalf("after the held bodies were read: %d %s", r.status, r.body)
		}
	})

	t.Run("a body of unannounced length reserves the most it may be", func(t *testing.T) {
		chunked := "POST /v1/namespaces/default/streams/a/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
		var held []net.Conn
		for range 2 {
			c := rawRequest(t, addr, chunked, "a\r\n{\"records\"\r\n")
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("a held request was answered: %v", err)
			}
			held = append(held, c)
		}
		r := call(t, "POST", base+"/a/records", `{"records":[{"value":1}]}`)
		if d := r.detail(t); r.status != 429 || d.Code != streamapi.CodeOverloaded {
			t.Fatalf("two chunked bodies held 2 x 4096 of the 8192-byte budget, yet: %d %s", r.status, r.body)
		}
		for _, c := range held {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(c, "f\r\n:[{\"value\":1}]}\r\n0\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if resp := readReply(t, c); resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("held chunked produce: %d %s", resp.StatusCode, b)
			}
		}
	})

	t.Run("a malformed or cut body is the client's error", func(t *testing.T) {
		chunked := "POST /v1/namespaces/default/streams/a/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
		c := rawRequest(t, addr, chunked, "zz\r\n{}\r\n")
		resp := readReply(t, c)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.Contains(string(b), streamapi.CodeBadRequest) {
			t.Fatalf("malformed chunked body: %d %s", resp.StatusCode, b)
		}
		c = rawRequest(t, addr, head(100), `{"records":[`)
		c.(*net.TCPConn).CloseWrite()
		resp = readReply(t, c)
		b, _ = io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.Contains(string(b), "ended after 12 of its 100") {
			t.Fatalf("body cut short: %d %s", resp.StatusCode, b)
		}
	})

	t.Run("concurrent requests", func(t *testing.T) {
		// Polls at the high watermark hold all 4 slots.
		var wg sync.WaitGroup
		hw := highWatermark(t, base+"/a")
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				call(t, "GET", fmt.Sprintf("%s/a/partitions/0/records?offset=%d&max_wait_ms=8000", base, hw), "")
			}()
		}
		waitFor(t, func() bool { return call(t, "GET", base+"/a", "").status == http.StatusTooManyRequests })
		r := call(t, "GET", base, "")
		if d := r.detail(t); r.status != 429 || d.Code != streamapi.CodeOverloaded || !strings.Contains(d.Message, "4 concurrent") {
			t.Fatalf("over the concurrency cap: %d %s", r.status, r.body)
		}
		if r := call(t, "GET", n.srv.URL+"/healthz", ""); r.status != 200 {
			t.Fatalf("healthz is not counted against the cap: %d %s", r.status, r.body)
		}
		wg.Wait()
		if r := call(t, "GET", base+"/a", ""); r.status != 200 {
			t.Fatalf("after the polls ended: %d %s", r.status, r.body)
		}
	})
}

func highWatermark(t *testing.T, streamURL string) int64 {
	t.Helper()
	r := call(t, "GET", streamURL, "")
	var st streamapi.Stream
	if err := json.Unmarshal(r.body, &st); err != nil || len(st.PartitionInfo) == 0 {
		t.Fatalf("get stream: %d %s", r.status, r.body)
	}
	return st.PartitionInfo[0].HighWatermark
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 15 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOperationalRoutes: /healthz, /metrics and /v1/cluster/nodes on a node with a node
// registry, and /v1/cluster/nodes on one without.
func TestOperationalRoutes(t *testing.T) {
	store, err := coord.NewBolt(filepath.Join(t.TempDir(), "coord.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	n := startNodeWith(t, httpapi.Limits{}, &coord.Registry{Store: store})
	r := call(t, "GET", n.srv.URL+"/healthz", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"status":"ok"`) || !strings.Contains(string(r.body), `"node":"test-1"`) {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
	call(t, "GET", n.srv.URL+"/v1/namespaces/default/streams", "")
	r = call(t, "GET", n.srv.URL+"/metrics", "")
	if r.status != 200 || !strings.Contains(string(r.body), `loam_http_requests_total{route="GET /v1/namespaces/{ns}/streams",status="2xx"}`) ||
		!strings.Contains(string(r.body), "go_goroutines") {
		t.Fatalf("metrics: %d %.300s", r.status, r.body)
	}
	r = call(t, "GET", n.srv.URL+"/v1/cluster/nodes?zone=z1", "")
	var nodes streamapi.ListNodesResponse
	if err := json.Unmarshal(r.body, &nodes); r.status != 200 || err != nil || len(nodes.Nodes) != 1 || nodes.Nodes[0].ID != "test-1" {
		t.Fatalf("cluster nodes: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", n.srv.URL+"/v1/cluster/nodes", "{}"); r.status != 404 && r.status != 405 {
		t.Fatalf("POST cluster nodes: %d %s", r.status, r.body)
	}

	bare := startNode(t, httpapi.Limits{})
	r = call(t, "GET", bare.srv.URL+"/v1/cluster/nodes", "")
	if r.status != http.StatusNotImplemented {
		t.Fatalf("cluster nodes without a registry: %d %s", r.status, r.body)
	}

	// /healthz answers 503 when the sequencer cannot be reached.
	rd, err := reader.New(reader.Config{Bucket: objstore.NewMem(), Meta: n.meta, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{NodeID: "down", Meta: unreachable{n.meta}, Reader: rd, Logger: quiet(),
		Writers: map[string]writer.Writer{meta.ClassStandard: failingWriter{writer.ErrClosed}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	if r := call(t, "GET", srv.URL+"/healthz", ""); r.status != 503 || !strings.Contains(string(r.body), "unavailable") {
		t.Fatalf("healthz with the sequencer out of reach: %d %s", r.status, r.body)
	}
}

// unreachable is a sequencer client whose ListNamespaces fails as an unreachable one does.
type unreachable struct{ meta.Client }

func (unreachable) ListNamespaces(context.Context) ([]string, error) {
	return nil, fmt.Errorf("dial: %w", meta.ErrUnavailable)
}
