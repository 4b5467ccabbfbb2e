package streamapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/streamapitest"
)

const ns = "default"

func newFake(t *testing.T, opts ...streamapitest.Option) (*streamapitest.Server, *streamapi.Client) {
	t.Helper()
	return newFakeWith(t, nil, opts...)
}

func newFakeWith(t *testing.T, copts []streamapi.Option, opts ...streamapitest.Option) (*streamapitest.Server, *streamapi.Client) {
	t.Helper()
	fake := streamapitest.New(opts...)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c, err := streamapi.NewClient(srv.URL, copts...)
	if err != nil {
		t.Fatal(err)
	}
	return fake, c
}

func ptr[T any](v T) *T { return &v }

func TestStreamLifecycle(t *testing.T) {
	ctx := t.Context()
	_, c := newFake(t)
	st, err := c.CreateStream(ctx, ns, streamapi.CreateStreamRequest{
		Name: "orders", Partitions: ptr(int32(3)), RetentionMs: ptr(int64(60000)), CleanupPolicy: "compact",
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "orders" || st.Partitions != 3 || st.Class != "standard" || st.RetentionMs != 60000 ||
		st.RetentionBytes != -1 || st.CleanupPolicy != "compact" || st.PartitionInfo != nil {
		t.Fatalf("create answered %+v", st)
	}
	_, err = c.CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: "orders"})
	var ae *streamapi.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Detail.Code != streamapi.CodeStreamExists {
		t.Fatalf("second create: %v", err)
	}
	if _, err := c.CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: "audit"}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListStreams(ctx, ns)
	if err != nil || len(list) != 2 || list[0].Name != "audit" || list[1].Name != "orders" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	st, err = c.PatchStream(ctx, ns, "orders", streamapi.PatchStreamRequest{Partitions: ptr(int32(5)), CleanupPolicy: ptr("delete")})
	if err != nil || st.Partitions != 5 || st.CleanupPolicy != "delete" || st.RetentionMs != 60000 {
		t.Fatalf("patch: %+v, %v", st, err)
	}
	_, err = c.PatchStream(ctx, ns, "orders", streamapi.PatchStreamRequest{Partitions: ptr(int32(2))})
	if streamapi.ErrorCode(err) != streamapi.CodeInvalidArgument {
		t.Fatalf("shrinking patch: %v", err)
	}
	if err := c.DeleteStream(ctx, ns, "orders"); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetStream(ctx, ns, "orders")
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Detail.Code != streamapi.CodeStreamNotFound ||
		!strings.Contains(ae.Detail.Message, "orders") || streamapi.IsRetriable(err) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := c.ListStreams(ctx, "nowhere"); streamapi.ErrorCode(err) != streamapi.CodeNamespaceNotFound {
		t.Fatalf("list of a missing namespace: %v", err)
	}
}

// Path segments are escaped: a name with a slash reaches the stream route, not another one.
func TestPathEscaping(t *testing.T) {
	_, c := newFake(t)
	for _, name := range []string{"a/b", "a?b", "a b", "a#b", "%2F", "..."} {
		_, err := c.GetStream(t.Context(), ns, name)
		if streamapi.ErrorCode(err) != streamapi.CodeStreamNotFound {
			t.Errorf("get %q: %v, want stream_not_found", name, err)
		}
	}
	// These cannot be path segments: refused before sending.
	for _, name := range []string{"", ".", ".."} {
		if _, err := c.GetStream(t.Context(), ns, name); !errors.Is(err, streamapi.ErrInvalidArgument) {
			t.Errorf("get %q: %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestBaseURLWithPrefix(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("/loam", streamapitest.New()))
	defer srv.Close()
	c, err := streamapi.NewClient(srv.URL + "/loam/")
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != srv.URL+"/loam" {
		t.Fatalf("BaseURL %q", c.BaseURL())
	}
	if _, err := c.ListStreams(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
}

func TestNewClientRejects(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://h", "http://", "http://h?x=1", "http://u:p@h", "http://h/#f", "://"} {
		if _, err := streamapi.NewClient(u); !errors.Is(err, streamapi.ErrInvalidArgument) {
			t.Errorf("NewClient(%q): %v, want ErrInvalidArgument", u, err)
		}
	}
}

// TestProduceFetchRoundTrip: every record comes back as produced, on the binary path (the
// default, also compressed) and the JSON one.
func TestProduceFetchRoundTrip(t *testing.T) {
	for _, m := range []struct {
		name string
		opts []streamapi.Option
	}{
		{"binary", nil},
		{"binary zstd", []streamapi.Option{streamapi.WithCompression(recordbatch.Zstd)}},
		{"json", []streamapi.Option{streamapi.WithJSON()}},
	} {
		t.Run(m.name, func(t *testing.T) { testProduceFetchRoundTrip(t, m.opts) })
	}
}

func testProduceFetchRoundTrip(t *testing.T, opts []streamapi.Option) {
	ctx := t.Context()
	_, c := newFakeWith(t, opts)
	if _, err := c.CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: "s", Partitions: ptr(int32(2))}); err != nil {
		t.Fatal(err)
	}
	jv, err := streamapi.JSONValue(map[string]any{"id": 1, "html": "<b>&</b>"})
	if err != nil {
		t.Fatal(err)
	}
	binKey := streamapi.AutoValue([]byte("k"))
	binKey.SetKey([]byte{0xff, 0x00})
	withMeta := streamapi.AutoValue([]byte("plain text"))
	withMeta.SetKey([]byte("user-1"))
	withMeta.Headers = streamapi.Headers{streamapi.StringHeader("trace", "abc"), {Key: "trace", Value: []byte{0xff}}, {Key: "n"}}
	withMeta.Timestamp = ptr(int64(1732870000000))
	tomb := streamapi.Record{}
	tomb.SetKey([]byte("user-1"))
	cases := []struct {
		name      string
		rec       streamapi.Record
		wantValue []byte // nil: tombstone
		wantKey   []byte
		asJSON    bool // fetched in "value" (a tombstone as "value": null)
	}{
		{"json value", jv, []byte(`{"html":"<b>&</b>","id":1}`), nil, true},
		{"auto json verbatim", streamapi.AutoValue([]byte("{\"a\": [1,\n 2]}")), []byte("{\"a\": [1,\n 2]}"), nil, true},
		{"auto json trimmed", streamapi.AutoValue([]byte(" 7 ")), []byte("7"), nil, true},
		{"auto text", streamapi.AutoValue([]byte("hello")), []byte("hello"), nil, false},
		{"auto invalid utf8", streamapi.AutoValue([]byte("\"\xff\"")), []byte("\"\xff\""), nil, false},
		{"bytes that are json", streamapi.BytesValue([]byte(`[1,2]`)), []byte(`[1,2]`), nil, true},
		{"bytes binary", streamapi.BytesValue([]byte{0, 1, 2, 0xfe}), []byte{0, 1, 2, 0xfe}, nil, false},
		{"empty value", streamapi.BytesValue(nil), []byte{}, nil, false},
		{"json null is a tombstone", streamapi.AutoValue([]byte("null")), nil, nil, true},
		{"binary key", binKey, []byte("k"), []byte{0xff, 0x00}, false},
		{"key headers timestamp", withMeta, []byte("plain text"), []byte("user-1"), false},
		{"tombstone", tomb, nil, []byte("user-1"), true},
	}
	recs := make([]streamapi.Record, len(cases))
	for i, cs := range cases {
		recs[i] = cs.rec
		recs[i].Partition = ptr(int32(1))
	}
	res, err := c.Produce(ctx, ns, "s", recs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Token == "" {
		t.Error("no consistency token")
	}
	for i, o := range res.Offsets {
		if o.Partition != 1 || o.Offset != int64(i) {
			t.Fatalf("offsets %+v", res.Offsets)
		}
	}
	got, err := c.Fetch(ctx, ns, "s", 1, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != len(cases) || got.NextOffset != int64(len(cases)) || got.HighWatermark != int64(len(cases)) || got.LogStart != 0 {
		t.Fatalf("fetch: %d records, next %d, hw %d, log start %d", len(got.Records), got.NextOffset, got.HighWatermark, got.LogStart)
	}
	for i, cs := range cases {
		r := got.Records[i]
		v, err := r.Bytes()
		if err != nil {
			t.Fatalf("%s: %v", cs.name, err)
		}
		k, _ := r.KeyBytes()
		switch {
		case *r.Offset != int64(i) || *r.Partition != 1:
			t.Errorf("%s: at %d/%d", cs.name, *r.Partition, *r.Offset)
		case (cs.wantValue == nil) != r.IsTombstone() || !bytes.Equal(v, cs.wantValue) || (cs.wantValue != nil && v == nil):
			t.Errorf("%s: value %q (tombstone %v), want %q", cs.name, v, r.IsTombstone(), cs.wantValue)
		case cs.asJSON != (r.Value != nil):
			t.Errorf("%s: value in %q / base64 %q", cs.name, r.Value, r.ValueBase64)
		case !bytes.Equal(k, cs.wantKey) || (cs.wantKey == nil) != (k == nil):
			t.Errorf("%s: key %q, want %q", cs.name, k, cs.wantKey)
		}
	}
	if r := got.Records[10]; *r.Timestamp != 1732870000000 || !r.Headers.Equal(withMeta.Headers) {
		t.Errorf("timestamp or headers lost: %+v", r)
	}
	// max_bytes counts stored batches and never answers less than one: the records came in
	// one produce, one batch, so max_bytes 1 still answers the rest of it.
	small, err := c.Fetch(ctx, ns, "s", 1, 3, 1, 0)
	if err != nil || len(small.Records) != len(got.Records)-3 || small.NextOffset != got.NextOffset {
		t.Fatalf("max_bytes 1: %+v, %v", small, err)
	}
	// Partition 0 got nothing.
	empty, err := c.Fetch(ctx, ns, "s", 0, 0, 0, 0)
	if err != nil || len(empty.Records) != 0 || empty.NextOffset != 0 || empty.HighWatermark != 0 {
		t.Fatalf("empty partition: %+v, %v", empty, err)
	}
}

func TestProduceRefusedLocally(t *testing.T) {
	fake, c := newFake(t)
	ctx := t.Context()
	both := streamapi.Record{Value: json.RawMessage(`1`), ValueBase64: []byte{1}}
	if _, err := c.Produce(ctx, ns, "s", []streamapi.Record{both}); !errors.Is(err, streamapi.ErrInvalidRecord) {
		t.Errorf("both value forms: %v", err)
	}
	if _, err := c.Produce(ctx, ns, "s", nil); !errors.Is(err, streamapi.ErrInvalidArgument) {
		t.Errorf("no records: %v", err)
	}
	if _, err := c.GetStream(ctx, "", "s"); !errors.Is(err, streamapi.ErrInvalidArgument) {
		t.Errorf("empty namespace: %v", err)
	}
	if _, err := c.Fetch(ctx, ns, "s", -1, 0, 0, 0); !errors.Is(err, streamapi.ErrInvalidArgument) {
		t.Errorf("negative partition: %v", err)
	}
	if n := fake.Requests(); n != 0 {
		t.Errorf("%d requests sent for calls refused locally", n)
	}
}

func TestFetchLongPoll(t *testing.T) {
	ctx := t.Context()
	_, c := newFake(t)
	if _, err := c.CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: "s"}); err != nil {
		t.Fatal(err)
	}
	// At the high watermark with no wait: an empty answer at once.
	start := time.Now()
	res, err := c.Fetch(ctx, ns, "s", 0, 0, 0, 0)
	if err != nil || len(res.Records) != 0 || time.Since(start) > time.Second {
		t.Fatalf("no-wait fetch: %+v, %v after %v", res, err, time.Since(start))
	}
	// A wait that nothing ends: empty after the wait.
	start = time.Now()
	res, err = c.Fetch(ctx, ns, "s", 0, 0, 0, 150*time.Millisecond)
	if err != nil || len(res.Records) != 0 || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("idle long-poll: %+v, %v after %v", res, err, time.Since(start))
	}
	// A wait that a produce ends: the record, well before the wait is over.
	type answer struct {
		res streamapi.FetchResponse
		err error
	}
	done := make(chan answer, 1)
	start = time.Now()
	go func() {
		r, err := c.Fetch(ctx, ns, "s", 0, 0, 0, 20*time.Second)
		done <- answer{r, err}
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := c.Produce(ctx, ns, "s", []streamapi.Record{streamapi.AutoValue([]byte("wake"))}); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || len(a.res.Records) != 1 || string(a.res.Records[0].ValueBase64) != "wake" || time.Since(start) > 10*time.Second {
		t.Fatalf("woken long-poll: %+v, %v after %v", a.res, a.err, time.Since(start))
	}
}

// A long-poll longer than the client's timeout is not cut short: Fetch adds maxWait.
func TestFetchWaitExceedsTimeout(t *testing.T) {
	srv := httptest.NewServer(streamapitest.New())
	defer srv.Close()
	c, _ := streamapi.NewClient(srv.URL, streamapi.WithTimeout(100*time.Millisecond))
	ctx := t.Context()
	if _, err := c.CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(ctx, ns, "s", 0, 0, 0, 300*time.Millisecond); err != nil {
		t.Fatalf("fetch waiting 300ms under a 100ms timeout: %v", err)
	}
}

func TestFetchOutOfRange(t *testing.T) {
	ctx := t.Context()
	fake, c := newFake(t)
	if _, err := c.CreateStream(ctx, ns, streamapi.CreateStreamRequest{Name: "s"}); err != nil {
		t.Fatal(err)
	}
	recs := []streamapi.Record{streamapi.AutoValue([]byte("1")), streamapi.AutoValue([]byte("2")), streamapi.AutoValue([]byte("3"))}
	if _, err := c.Produce(ctx, ns, "s", recs); err != nil {
		t.Fatal(err)
	}
	if err := fake.Trim(ns, "s", 0, 2); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 4} {
		_, err := c.Fetch(ctx, ns, "s", 0, off, 0, 0)
		var ae *streamapi.APIError
		if !errors.As(err, &ae) || ae.Detail.Code != streamapi.CodeOffsetOutOfRange ||
			ae.Detail.LogStart == nil || *ae.Detail.LogStart != 2 || ae.Detail.HighWater == nil || *ae.Detail.HighWater != 3 {
			t.Errorf("fetch at %d: %v", off, err)
		}
	}
	res, err := c.Fetch(ctx, ns, "s", 0, 2, 0, 0)
	if err != nil || len(res.Records) != 1 || string(res.Records[0].Value) != "3" || res.LogStart != 2 {
		t.Fatalf("fetch at the log start: %+v, %v", res, err)
	}
	if _, err := c.Fetch(ctx, ns, "s", 1, 0, 0, 0); streamapi.ErrorCode(err) != streamapi.CodePartitionNotFound {
		t.Errorf("fetch of a missing partition: %v", err)
	}
}

func TestAPIKey(t *testing.T) {
	fake := streamapitest.New(streamapitest.WithAPIKey("s3cret"))
	srv := httptest.NewServer(fake)
	defer srv.Close()
	anon, _ := streamapi.NewClient(srv.URL)
	_, err := anon.ListStreams(t.Context(), ns)
	var ae *streamapi.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Detail.Code != streamapi.CodeUnauthorized {
		t.Fatalf("no key: %v", err)
	}
	wrong, _ := streamapi.NewClient(srv.URL, streamapi.WithAPIKey("guess"))
	if _, err := wrong.ListStreams(t.Context(), ns); streamapi.ErrorCode(err) != streamapi.CodeUnauthorized {
		t.Fatalf("wrong key: %v", err)
	}
	keyed, _ := streamapi.NewClient(srv.URL, streamapi.WithAPIKey("s3cret"))
	if _, err := keyed.ListStreams(t.Context(), ns); err != nil {
		t.Fatalf("right key: %v", err)
	}
}

func TestRetriableAnswers(t *testing.T) {
	fake, c := newFake(t)
	for _, cs := range []struct {
		status    int
		detail    streamapi.ErrorDetail
		retriable bool
	}{
		{503, streamapi.ErrorDetail{Code: streamapi.CodeUnavailable, Message: "sequencer down"}, true},
		{500, streamapi.ErrorDetail{Code: streamapi.CodeCommitUnknown, Message: "timed out", Retriable: true}, true},
		{429, streamapi.ErrorDetail{Code: "quota", Message: "slow down"}, true},
		{500, streamapi.ErrorDetail{Code: streamapi.CodeInternal, Message: "bug"}, false},
		{400, streamapi.ErrorDetail{Code: streamapi.CodeInvalidRecord, Message: "bad"}, false},
	} {
		fake.FailNext(1, cs.status, cs.detail)
		_, err := c.ListStreams(t.Context(), ns)
		var ae *streamapi.APIError
		if !errors.As(err, &ae) || ae.Status != cs.status || ae.Detail != cs.detail || streamapi.IsRetriable(err) != cs.retriable ||
			errors.Is(err, streamapi.ErrNetwork) || !strings.Contains(err.Error(), cs.detail.Message) {
			t.Errorf("%d %s: %v (retriable %v)", cs.status, cs.detail.Code, err, streamapi.IsRetriable(err))
		}
	}
}

// rawServer answers every request with fn; its client uses the JSON path.
func rawServer(t *testing.T, fn http.HandlerFunc) *streamapi.Client {
	t.Helper()
	return rawServerWith(t, fn, streamapi.WithJSON())
}

func rawServerWith(t *testing.T, fn http.HandlerFunc, opts ...streamapi.Option) *streamapi.Client {
	t.Helper()
	srv := httptest.NewServer(fn)
	t.Cleanup(srv.Close)
	c, err := streamapi.NewClient(srv.URL, append([]streamapi.Option{streamapi.WithTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMalformedAnswers(t *testing.T) {
	t.Run("html error page", func(t *testing.T) {
		c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html>upstream down</html>\n<p>more</p>"))
		})
		_, err := c.ListStreams(t.Context(), ns)
		var ae *streamapi.APIError
		if !errors.As(err, &ae) || ae.Status != 502 || ae.Detail.Code != "" || ae.Detail.Message != "<html>upstream down</html>" || !streamapi.IsRetriable(err) {
			t.Fatalf("%#v", err)
		}
	})
	t.Run("empty error body", func(t *testing.T) {
		c := rawServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) })
		_, err := c.ListStreams(t.Context(), ns)
		var ae *streamapi.APIError
		if !errors.As(err, &ae) || ae.Status != 403 || ae.Detail.Message != "Forbidden" || streamapi.IsRetriable(err) {
			t.Fatalf("%v", err)
		}
	})
	for _, cs := range []struct{ name, body string }{
		{"not json", "hello"},
		{"wrong shape", `{"streams": 5}`},
		{"empty", ""},
	} {
		t.Run(cs.name, func(t *testing.T) {
			c := rawServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(cs.body)) })
			_, err := c.ListStreams(t.Context(), ns)
			if !errors.Is(err, streamapi.ErrBadResponse) || streamapi.IsRetriable(err) {
				t.Fatalf("%v", err)
			}
		})
	}
	t.Run("offset count mismatch", func(t *testing.T) {
		c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"offsets":[{"partition":0,"offset":0}],"token":"t"}`))
		})
		recs := []streamapi.Record{streamapi.AutoValue([]byte("a")), streamapi.AutoValue([]byte("b"))}
		if _, err := c.Produce(t.Context(), ns, "s", recs); !errors.Is(err, streamapi.ErrBadResponse) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("body cut short", func(t *testing.T) {
		c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			_, _ = w.Write([]byte(`{"streams": [`))
			// The handler returns early; the server closes the connection.
		})
		_, err := c.ListStreams(t.Context(), ns)
		if !errors.Is(err, streamapi.ErrNetwork) || !streamapi.IsRetriable(err) {
			t.Fatalf("%v", err)
		}
	})
}

func TestNetworkErrors(t *testing.T) {
	// Nothing listens on a port we just closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, _ := streamapi.NewClient("http://" + addr)
	_, err = c.ListStreams(t.Context(), ns)
	var ae *streamapi.APIError
	if !errors.Is(err, streamapi.ErrNetwork) || !streamapi.IsRetriable(err) || errors.As(err, &ae) {
		t.Fatalf("refused: %v", err)
	}

	hang := make(chan struct{})
	defer close(hang)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	// The client's own timeout is a network error: the server did not answer in time.
	slow, _ := streamapi.NewClient(srv.URL, streamapi.WithTimeout(100*time.Millisecond))
	if _, err := slow.ListStreams(t.Context(), ns); !errors.Is(err, streamapi.ErrNetwork) || !streamapi.IsRetriable(err) {
		t.Fatalf("client timeout: %v", err)
	}
	// The caller's context ending is the caller's business: not a network error.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	patient, _ := streamapi.NewClient(srv.URL)
	_, err = patient.ListStreams(ctx, ns)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, streamapi.ErrNetwork) || streamapi.IsRetriable(err) {
		t.Fatalf("caller deadline: %v", err)
	}
}

func TestRequestHeaders(t *testing.T) {
	var got http.Header
	c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		_, _ = w.Write([]byte(`{"offsets":[{"partition":0,"offset":7}],"token":"t"}`))
	})
	srvURL := c.BaseURL()
	for _, m := range []struct {
		opt         streamapi.Option
		contentType string
	}{
		{streamapi.WithJSON(), "application/json"},
		{streamapi.WithUserAgent("test-agent"), streamapi.MediaRecordBatch},
	} {
		c, _ = streamapi.NewClient(srvURL, streamapi.WithAPIKey("k1"), streamapi.WithUserAgent("test-agent"), m.opt)
		res, err := c.Produce(t.Context(), ns, "s", []streamapi.Record{streamapi.AutoValue([]byte("x"))})
		if err != nil || res.Offsets[0].Offset != 7 {
			t.Fatalf("%+v, %v", res, err)
		}
		if got.Get("Authorization") != "Bearer k1" || got.Get("Content-Type") != m.contentType ||
			got.Get("Accept") != "application/json" || got.Get("User-Agent") != "test-agent" {
			t.Fatalf("headers %v", got)
		}
	}
}

// TestProducePartialCommit: a 207 answer returns every record's outcome and
// ErrPartialCommit, never a plain success.
func TestProducePartialCommit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMultiStatus)
		_, _ = w.Write([]byte(`{"offsets":[{"partition":0,"offset":4},{"partition":1,"offset":-1,"error":{"code":"partition_not_found","message":"gone"}}],"token":"v1.9"}`))
	}))
	defer srv.Close()
	c, err := streamapi.NewClient(srv.URL, streamapi.WithJSON())
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Produce(t.Context(), ns, "s", []streamapi.Record{{Value: json.RawMessage(`1`)}, {Value: json.RawMessage(`2`)}})
	if !errors.Is(err, streamapi.ErrPartialCommit) || len(res.Offsets) != 2 || res.Offsets[0].Offset != 4 || res.Offsets[1].Error == nil || res.Offsets[1].Error.Code != "partition_not_found" {
		t.Fatalf("partial answer: %+v %v", res, err)
	}
}

// TestBinaryProduceSplits: on the binary path, records for several partitions go in one
// request each; when some fail the answer holds each record's outcome and ErrPartialCommit
// (never the failed request's own retriable error, which would invite resending what
// committed); when all fail, the error that may have written wins. Keyed records make the
// client learn the partition count once.
func TestBinaryProduceSplits(t *testing.T) {
	var mu sync.Mutex
	fail := map[string]string{} // partition → error code
	gets := 0
	c := rawServerWith(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			mu.Lock()
			gets++
			mu.Unlock()
			_, _ = w.Write([]byte(`{"name":"s","partitions":4}`))
			return
		}
		if !streamapi.IsMediaRecordBatch(r.Header.Get("Content-Type")) {
			t.Errorf("produce of Content-Type %q", r.Header.Get("Content-Type"))
		}
		body, _ := io.ReadAll(r.Body)
		bs, err := streamapi.CheckBatches(body, streamapi.BatchLimits{})
		if err != nil || len(bs) != 1 {
			t.Errorf("client sent %d batches: %v", len(bs), err)
		}
		p := r.URL.Query().Get("partition")
		mu.Lock()
		code := fail[p]
		mu.Unlock()
		if code != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"error":{"code":%q,"message":"no","retriable":true}}`, code)
			return
		}
		fmt.Fprintf(w, `{"offsets":[{"partition":%s,"offset":10}],"token":"v1.%s"}`, p, p)
	}, streamapi.WithUserAgent("binary"))
	recs := []streamapi.Record{
		{Partition: ptr(int32(0)), Value: json.RawMessage(`1`)},
		{Partition: ptr(int32(1)), Value: json.RawMessage(`2`)},
		{Partition: ptr(int32(0)), Value: json.RawMessage(`3`)},
	}
	res, err := c.Produce(t.Context(), ns, "s", recs)
	if err != nil || res.Offsets[0].Offset != 10 || res.Offsets[1].Offset != 10 || res.Offsets[2].Offset != 11 || res.Token != "v1.1" {
		t.Fatalf("split produce: %+v, %v", res, err)
	}
	fail["1"] = streamapi.CodeUnavailable
	res, err = c.Produce(t.Context(), ns, "s", recs)
	var ae *streamapi.APIError
	if !errors.Is(err, streamapi.ErrPartialCommit) || errors.As(err, &ae) || res.Offsets[0].Error != nil || res.Offsets[1].Error == nil ||
		res.Offsets[1].Error.Code != streamapi.CodeUnavailable || res.Offsets[1].Offset != -1 {
		t.Fatalf("partial: %+v, %v", res, err)
	}
	fail["0"] = streamapi.CodeCommitUnknown
	if _, err = c.Produce(t.Context(), ns, "s", recs); streamapi.ErrorCode(err) != streamapi.CodeCommitUnknown {
		t.Fatalf("all failed: %v, want the commit_unknown one", err)
	}
	clear(fail)
	keyed := []streamapi.Record{streamapi.AutoValue([]byte("a")), streamapi.AutoValue([]byte("b"))}
	keyed[0].SetKey([]byte("foobar"))
	keyed[1].SetKey([]byte("21"))
	for range 2 {
		res, err := c.Produce(t.Context(), ns, "s", keyed)
		if err != nil || res.Offsets[0].Partition != streamapi.KeyPartition([]byte("foobar"), 4) || res.Offsets[1].Partition != streamapi.KeyPartition([]byte("21"), 4) {
			t.Fatalf("keyed: %+v, %v", res, err)
		}
	}
	if gets != 1 {
		t.Fatalf("%d stream lookups for two keyed produces, want 1 (cached)", gets)
	}
}

// TestBinaryFetchMalformed: a binary fetch answer that is not what the server sends (no
// offset headers, another Content-Type, corrupt batches) is ErrBadResponse, not records.
func TestBinaryFetchMalformed(t *testing.T) {
	good, err := streamapi.AppendBatch(nil, []streamapi.Record{streamapi.AutoValue([]byte("x"))}, recordbatch.None, 1)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte{}, good...)
	corrupt[len(corrupt)-1] ^= 1
	for _, cs := range []struct {
		name, contentType string
		headers           bool
		body              []byte
	}{
		{"json answer", "application/json", true, []byte(`{"records":[]}`)},
		{"no offset headers", streamapi.MediaRecordBatch, false, good},
		{"corrupt batch", streamapi.MediaRecordBatch, true, corrupt},
		{"truncated batch", streamapi.MediaRecordBatch, true, good[:30]},
	} {
		t.Run(cs.name, func(t *testing.T) {
			c := rawServerWith(t, func(w http.ResponseWriter, r *http.Request) {
				if !streamapi.AcceptsRecordBatch(r.Header.Get("Accept")) {
					t.Errorf("fetch Accept %q", r.Header.Get("Accept"))
				}
				w.Header().Set("Content-Type", cs.contentType)
				if cs.headers {
					for _, h := range []string{streamapi.HeaderNextOffset, streamapi.HeaderHighWatermark, streamapi.HeaderLogStart} {
						w.Header().Set(h, "1")
					}
				}
				_, _ = w.Write(cs.body)
			}, streamapi.WithUserAgent("binary"))
			if _, err := c.Fetch(t.Context(), ns, "s", 0, 0, 0, 0); !errors.Is(err, streamapi.ErrBadResponse) {
				t.Fatalf("%v, want ErrBadResponse", err)
			}
		})
	}
}
