package httpapi_test

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
	"sync/atomic"
	"testing"
	"time"

	ce "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/lognode-svc/writer"
	"github.com/loamhq/loam/shared/cloudevents"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// startCENode is a real log node on a real sequencer with CloudEvents settings.
func startCENode(t testing.TB, cfg httpapi.CloudEventsConfig) *testNode {
	t.Helper()
	mc := startSequencer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: "ce-1", Listener: ln, Bucket: objstore.NewMem(), Meta: mc,
		FlushInterval: 5 * time.Millisecond, Logger: quiet(), Zone: "z1", CloudEvents: cfg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return &testNode{node: n, api: n.Handler().(*httpapi.Server), srv: srv, meta: mc}
}

func (n *testNode) createStream(t testing.TB, name string, parts int32) meta.Stream {
	t.Helper()
	st, err := n.meta.CreateStream(context.Background(), meta.StreamConfig{Namespace: "default", Name: name, Partitions: parts,
		Class: meta.ClassStandard, Encoding: meta.EncodingKafka, RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// recorder keeps the requests an SDK client sends (their headers and bodies).
type recorder struct {
	mu   sync.Mutex
	reqs []sent
}

type sent struct {
	h    http.Header
	body []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var b []byte
	if req.Body != nil {
		b, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, sent{h: req.Header.Clone(), body: b})
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

type ingestAnswer struct {
	Events []struct {
		Status    string `json:"status"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
	} `json:"events"`
	Token string `json:"token"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func cePost(t testing.TB, url, ct string, body []byte, h http.Header) (int, http.Header, ingestAnswer) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a ingestAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %d %s: %v", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, resp.Header, a
}

func ceGet(t testing.TB, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// member is one member of a JSON object: its name and raw value bytes.
type member struct {
	name string
	raw  string
}

// members lists an object's members in order (data and data_base64 apart: the codec
// writes data after the attributes, the SDK between the context attributes and the
// extensions).
func members(t testing.TB, b []byte) (attrs []member, data []member) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", b)
	}
	for dec.More() {
		k, _ := dec.Token()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		m := member{name: k.(string), raw: string(raw)}
		if m.name == "data" || m.name == "data_base64" {
			data = append(data, m)
		} else {
			attrs = append(attrs, m)
		}
	}
	return attrs, data
}

func elements(t testing.TB, b []byte) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("batch %s: %v", b, err)
	}
	return out
}

func sameMembers(t testing.TB, what string, got, want []byte) {
	t.Helper()
	ga, gd := members(t, got)
	wa, wd := members(t, want)
	if fmt.Sprint(ga) != fmt.Sprint(wa) || fmt.Sprint(gd) != fmt.Sprint(wd) {
		t.Fatalf("%s: read back\n %s\nsent\n %s", what, got, want)
	}
}

// TestCloudEventsSDK: the CloudEvents Go SDK sends events in binary mode, structured mode
// and a batch; read back in structured mode every attribute (name, value bytes, order,
// typed extensions) and the data match what the SDK sent byte for byte, and in binary
// mode the SDK reads each event back with the same ce- headers and body.
func TestCloudEventsSDK(t *testing.T) {
	n := startCENode(t, httpapi.CloudEventsConfig{})
	n.createStream(t, "hooks", 1)
	url := n.srv.URL + "/v1/namespaces/default/streams/hooks/events"
	rec := &recorder{}
	c, err := ce.NewClientHTTP(cehttp.WithTarget(url), cehttp.WithClient(http.Client{Transport: rec}))
	if err != nil {
		t.Fatal(err)
	}
	mk := func(id string) ce.Event {
		e := ce.NewEvent()
		e.SetID(id)
		e.SetSource("https://github.com/loamhq/loam")
		e.SetType("com.github.push")
		e.SetSubject("refs/heads/main")
		e.SetTime(time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC))
		e.SetExtension("attempt", 3)
		e.SetExtension("redelivered", true)
		e.SetExtension("tenant", "acme")
		if err := e.SetData(ce.ApplicationJSON, map[string]any{"ref": "main", "commits": []int{1, 2}}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	ctx := context.Background()
	binEv := mk("bin-1")
	binEv.SetExtension("partitionkey", "repo-7")
	if res := c.Send(ce.WithEncodingBinary(ctx), binEv); !ce.IsACK(res) {
		t.Fatalf("binary send: %v", res)
	}
	if res := c.Send(ce.WithEncodingStructured(ctx), mk("str-1")); !ce.IsACK(res) {
		t.Fatalf("structured send: %v", res)
	}
	batchReq, err := cehttp.NewHTTPRequestFromEvents(ctx, url, []ce.Event{mk("b-1"), mk("b-2")})
	if err != nil {
		t.Fatal(err)
	}
	batchBody, _ := io.ReadAll(batchReq.Body)
	code, _, ans := cePost(t, url, cloudevents.MediaBatchJSON, batchBody, nil)
	if code != 200 || len(ans.Events) != 2 || ans.Events[1].Status != "appended" || ans.Events[1].Offset != 3 {
		t.Fatalf("batch: %d %+v", code, ans)
	}
	// Structured read-back.
	resp, body := ceGet(t, n.srv.URL+"/v1/namespaces/default/streams/hooks/partitions/0/events?offset=0")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != cloudevents.MediaBatchJSON ||
		resp.Header.Get("Loam-Next-Offset") != "4" || resp.Header.Get("Loam-High-Watermark") != "4" {
		t.Fatalf("structured read: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	got := elements(t, body)
	if len(got) != 4 {
		t.Fatalf("read %d events", len(got))
	}
	sameMembers(t, "structured ingest", got[1], rec.reqs[1].body)
	sentBatch := elements(t, batchBody)
	sameMembers(t, "batch[0]", got[2], sentBatch[0])
	sameMembers(t, "batch[1]", got[3], sentBatch[1])
	if !strings.Contains(string(got[1]), `"attempt":3`) || !strings.Contains(string(got[1]), `"redelivered":true`) {
		t.Fatalf("typed extensions lost: %s", got[1])
	}
	// The binary-mode event: binary mode has no types, so its extensions read back as
	// strings; every ce- header the SDK sent comes back with the same value.
	var binMembers []member
	for k, v := range rec.reqs[0].h {
		if strings.HasPrefix(strings.ToLower(k), "ce-") {
			binMembers = append(binMembers, member{name: strings.ToLower(k[3:]), raw: v[0]})
		}
	}
	var back map[string]any
	if err := json.Unmarshal(got[0], &back); err != nil {
		t.Fatal(err)
	}
	for _, m := range binMembers {
		if back[m.name] != m.raw {
			t.Errorf("binary ingest: %s = %v, sent %q", m.name, back[m.name], m.raw)
		}
	}
	if back["datacontenttype"] != "application/json" {
		t.Errorf("datacontenttype %v", back["datacontenttype"])
	}
	_, bd := members(t, got[0])
	if len(bd) != 1 || bd[0].raw != string(rec.reqs[0].body) {
		t.Fatalf("binary data: %v, sent %s", bd, rec.reqs[0].body)
	}
	// Binary read-back, through the SDK's own reader.
	for off, want := range []sent{rec.reqs[0], rec.reqs[1]} {
		resp, err := http.Get(fmt.Sprintf("%s/v1/namespaces/default/streams/hooks/partitions/0/events?mode=binary&offset=%d", n.srv.URL, off))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("Loam-Offset") != fmt.Sprint(off) || resp.Header.Get("Loam-Next-Offset") != fmt.Sprint(off+1) {
			t.Fatalf("binary read %d: %v", off, resp.Header)
		}
		ev, err := cehttp.NewEventFromHTTPResponse(resp)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("SDK reading offset %d: %v", off, err)
		}
		sentEv := mk([]string{"bin-1", "str-1"}[off])
		if ev.ID() != sentEv.ID() || ev.Source() != sentEv.Source() || ev.Type() != sentEv.Type() || !ev.Time().Equal(sentEv.Time()) ||
			ev.Subject() != sentEv.Subject() || string(ev.Data()) != string(sentEv.Data()) {
			t.Fatalf("SDK read offset %d: %s", off, ev)
		}
		for _, ext := range []string{"attempt", "redelivered", "tenant"} {
			if fmt.Sprint(ev.Extensions()[ext]) != fmt.Sprint(sentEv.Extensions()[ext]) {
				t.Errorf("offset %d: extension %s = %v, want %v", off, ext, ev.Extensions()[ext], sentEv.Extensions()[ext])
			}
		}
		if off == 0 {
			for k, v := range want.h {
				if strings.HasPrefix(strings.ToLower(k), "ce-") && resp.Header.Get(k) != v[0] {
					t.Errorf("binary header %s = %q, sent %q", k, resp.Header.Get(k), v[0])
				}
			}
		}
	}
	// 204 when the wait ends with no record.
	resp, _ = ceGet(t, n.srv.URL+"/v1/namespaces/default/streams/hooks/partitions/0/events?mode=binary&offset=4&max_wait_ms=50")
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Loam-Next-Offset") != "4" {
		t.Fatalf("empty binary read: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestCloudEventsRetryNeverAppendsTwice: a request retried after its answer was lost is
// answered duplicate with the original offsets and writes nothing; a repeat inside one
// batch is coalesced.
func TestCloudEventsRetryNeverAppendsTwice(t *testing.T) {
	n := startCENode(t, httpapi.CloudEventsConfig{})
	st := n.createStream(t, "orders", 3)
	url := n.srv.URL + "/v1/namespaces/default/streams/orders/events"
	batch := []byte(`[
		{"specversion":"1.0","id":"1","source":"/shop","type":"order.created","partitionkey":"cust-1","data":{"n":1}},
		{"specversion":"1.0","id":"2","source":"/shop","type":"order.created","data":{"n":2}},
		{"specversion":"1.0","id":"1","source":"/shop","type":"order.created","partitionkey":"cust-1","data":{"n":1}},
		{"specversion":"1.0","id":"1","source":"/other","type":"order.created","data":{"n":3}}]`)
	code, _, first := cePost(t, url, cloudevents.MediaBatchJSON, batch, nil)
	if code != 200 || len(first.Events) != 4 {
		t.Fatalf("first: %d %+v", code, first)
	}
	if s := first.Events; s[0].Status != "appended" || s[1].Status != "appended" || s[2].Status != "duplicate" || s[3].Status != "appended" ||
		s[2].Partition != s[0].Partition || s[2].Offset != s[0].Offset {
		t.Fatalf("first answers: %+v", s)
	}
	if p := first.Events[0].Partition; p != streamapi.KeyPartition([]byte("cust-1"), 3) {
		t.Fatalf("partitionkey cust-1 went to %d, murmur2 says %d", p, streamapi.KeyPartition([]byte("cust-1"), 3))
	}
	if first.Token == "" {
		t.Fatal("no consistency token")
	}
	hw := func() (sum int64) {
		_, parts, err := n.meta.GetStream(context.Background(), "default", "orders")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			sum += p.HighWatermark
		}
		return sum
	}
	if got := hw(); got != 3 {
		t.Fatalf("%d records after the first request, want 3", got)
	}
	for range 3 { // the answer was lost: retry the whole request
		code, _, again := cePost(t, url, cloudevents.MediaBatchJSON, batch, nil)
		if code != 200 {
			t.Fatalf("retry: %d %+v", code, again)
		}
		for i, e := range again.Events {
			if e.Status != "duplicate" || e.Partition != first.Events[i].Partition || e.Offset != first.Events[i].Offset {
				t.Fatalf("retry event %d: %+v, first %+v", i, e, first.Events[i])
			}
		}
	}
	if got := hw(); got != 3 {
		t.Fatalf("%d records after retries, want 3", got)
	}
	// The partition parameter places every event.
	code, _, ans := cePost(t, url+"?partition=2", cloudevents.MediaJSON, []byte(`{"specversion":"1.0","id":"9","source":"/shop","type":"t"}`), nil)
	if code != 200 || ans.Events[0].Partition != 2 {
		t.Fatalf("partition=2: %d %+v", code, ans)
	}
	_ = st
}

// TestCloudEventsNodeDiesBeforeComplete: a node stopped after the append and before
// Complete leaves the keys pending: a retry is in flight (409, Retry-After) until the
// claim lapses, then appends again (the documented at most one duplicate), and a retry
// after that answers the second copy's offsets. Nothing is lost.
func TestCloudEventsNodeDiesBeforeComplete(t *testing.T) {
	var die atomic.Bool
	die.Store(true)
	n := startCENode(t, httpapi.CloudEventsConfig{Pending: time.Second, AfterAppend: func() error {
		if die.Load() {
			return errors.New("failpoint: node stopped before Complete")
		}
		return nil
	}})
	n.createStream(t, "hooks", 1)
	url := n.srv.URL + "/v1/namespaces/default/streams/hooks/events"
	ev := []byte(`{"specversion":"1.0","id":"evt-1","source":"/hooks","type":"t","data":"x"}`)
	code, _, a := cePost(t, url, cloudevents.MediaJSON, ev, nil)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("the dying node answered %d %+v", code, a)
	}
	die.Store(false)
	code, h, a := cePost(t, url, cloudevents.MediaJSON, ev, nil)
	if code != http.StatusConflict || h.Get("Retry-After") == "" || a.Events[0].Status != "in_flight" {
		t.Fatalf("retry while pending: %d %v %+v", code, h, a)
	}
	time.Sleep(1200 * time.Millisecond) // the claim lapses
	code, _, a = cePost(t, url, cloudevents.MediaJSON, ev, nil)
	if code != 200 || a.Events[0].Status != "appended" || a.Events[0].Offset != 1 {
		t.Fatalf("retry after the lapse: %d %+v", code, a)
	}
	code, _, again := cePost(t, url, cloudevents.MediaJSON, ev, nil)
	if code != 200 || again.Events[0].Status != "duplicate" || again.Events[0].Offset != 1 {
		t.Fatalf("retry after the second append: %d %+v", code, again)
	}
	resp, body := ceGet(t, n.srv.URL+"/v1/namespaces/default/streams/hooks/partitions/0/events")
	if resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	got := elements(t, body)
	if len(got) != 2 {
		t.Fatalf("%d copies, want the original and one duplicate: %s", len(got), body)
	}
	for _, g := range got {
		sameMembers(t, "copy", g, ev)
	}
}

// TestCloudEventsValidation: every rule refuses the event with 400 invalid_event naming
// the attribute; an invalid event in a batch refuses the whole batch, naming its index,
// before anything is claimed or written.
func TestCloudEventsValidation(t *testing.T) {
	n := startCENode(t, httpapi.CloudEventsConfig{})
	n.createStream(t, "v", 1)
	url := n.srv.URL + "/v1/namespaces/default/streams/v/events"
	base := `"id":"1","source":"/s","type":"t"`
	for _, c := range []struct{ body, attr string }{
		{`{"specversion":"0.3",` + base + `}`, "specversion"},
		{`{` + base + `}`, "specversion"},
		{`{"specversion":"1.0","source":"/s","type":"t"}`, "id"},
		{`{"specversion":"1.0","id":"","source":"/s","type":"t"}`, "id"},
		{`{"specversion":"1.0","id":"1","type":"t"}`, "source"},
		{`{"specversion":"1.0","id":"1","source":"","type":"t"}`, "source"},
		{`{"specversion":"1.0","id":"1","source":"/s"}`, "type"},
		{`{"specversion":"1.0","id":"1","source":"/s","type":""}`, "type"},
		{`{"specversion":"1.0",` + base + `,"time":"last tuesday"}`, "time"},
		{`{"specversion":"1.0",` + base + `,"BadName":"x"}`, "BadName"},
		{`{"specversion":"1.0",` + base + `,"subject":42}`, "subject"},
		{`{"specversion":"1.0",` + base + `,"data":"a","data_base64":"YQ=="}`, "data_base64"},
	} {
		code, _, a := cePost(t, url, cloudevents.MediaJSON, []byte(c.body), nil)
		if code != 400 || a.Error == nil || a.Error.Code != httpapi.CodeInvalidEvent || !strings.Contains(a.Error.Message, `"`+c.attr+`"`) {
			t.Errorf("%s: %d %+v, want 400 naming %q", c.body, code, a.Error, c.attr)
		}
	}
	// Binary mode: the same rules on the ce- headers.
	code, _, a := cePost(t, url, "text/plain", []byte("x"), http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {"1"}, "Ce-Source": {"/s"}})
	if code != 400 || !strings.Contains(a.Error.Message, `"type"`) {
		t.Errorf("binary without type: %d %+v", code, a.Error)
	}
	batch := `[{"specversion":"1.0","id":"ok","source":"/s","type":"t"},{"specversion":"1.0","id":"bad","source":"/s","type":"t","time":"noon"}]`
	code, _, a = cePost(t, url, cloudevents.MediaBatchJSON, []byte(batch), nil)
	if code != 400 || !strings.Contains(a.Error.Message, "event 1") || !strings.Contains(a.Error.Message, `"time"`) {
		t.Fatalf("bad batch: %d %+v", code, a.Error)
	}
	if _, parts, _ := n.meta.GetStream(context.Background(), "default", "v"); parts[0].HighWatermark != 0 {
		t.Fatalf("a refused request wrote %d records", parts[0].HighWatermark)
	}
	// Nothing was claimed either: the good event appends at once.
	code, _, a = cePost(t, url, cloudevents.MediaJSON, []byte(`{"specversion":"1.0","id":"ok","source":"/s","type":"t"}`), nil)
	if code != 200 || a.Events[0].Status != "appended" {
		t.Fatalf("after the refused batch: %d %+v", code, a)
	}
	// 415 without a CloudEvents content type or ce-specversion.
	code, _, a = cePost(t, url, "application/json", []byte(`{}`), nil)
	if code != http.StatusUnsupportedMediaType || a.Error.Code != streamapi.CodeUnsupportedMedia {
		t.Fatalf("plain JSON: %d %+v", code, a.Error)
	}
}

// TestCloudEventsLedgerCap: a request that would take the namespace over its ledger cap
// is refused with 429 naming the namespace, and writes nothing.
func TestCloudEventsLedgerCap(t *testing.T) {
	n := startCENode(t, httpapi.CloudEventsConfig{MaxEntries: 2})
	n.createStream(t, "c", 1)
	url := n.srv.URL + "/v1/namespaces/default/streams/c/events"
	batch := `[{"specversion":"1.0","id":"1","source":"/s","type":"t"},{"specversion":"1.0","id":"2","source":"/s","type":"t"},{"specversion":"1.0","id":"3","source":"/s","type":"t"}]`
	code, h, a := cePost(t, url, cloudevents.MediaBatchJSON, []byte(batch), nil)
	if code != http.StatusTooManyRequests || a.Error.Code != httpapi.CodeDedupLedgerFull || !strings.Contains(a.Error.Message, `"default"`) || h.Get("Retry-After") == "" {
		t.Fatalf("over the cap: %d %+v", code, a.Error)
	}
	if _, parts, _ := n.meta.GetStream(context.Background(), "default", "c"); parts[0].HighWatermark != 0 {
		t.Fatal("a refused request wrote records")
	}
}

// TestCloudEventsReadForms: records produced without the ledger read back as events: ce_
// headers that validate, a Kafka structured-mode value passed through, and any other
// record in a synthesized envelope.
func TestCloudEventsReadForms(t *testing.T) {
	n := startCENode(t, httpapi.CloudEventsConfig{})
	st := n.createStream(t, "plain", 1)
	structured := `{"specversion":"1.0","id":"k1","source":"/kafka","type":"t","data":{"a":1}}`
	body := `{"records":[
		{"value":{"x":1},"headers":[{"key":"ce_specversion","value":"1.0"},{"key":"ce_id","value":"h1"},{"key":"ce_source","value":"/h"},{"key":"ce_type","value":"t"}]},
		{"value":` + structured + `,"headers":[{"key":"content-type","value":"application/cloudevents+json"}]},
		{"key":"k","value":{"plain":true},"timestamp":1764590400123}]}`
	resp, err := http.Post(n.srv.URL+"/v1/namespaces/default/streams/plain/records", "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(err, resp.StatusCode)
	}
	resp.Body.Close()
	_, out := ceGet(t, n.srv.URL+"/v1/namespaces/default/streams/plain/partitions/0/events")
	got := elements(t, out)
	if len(got) != 3 {
		t.Fatalf("%s", out)
	}
	if want := `{"specversion":"1.0","id":"h1","source":"/h","type":"t","data":{"x":1}}`; string(got[0]) != want {
		t.Errorf("ce_ headers: %s", got[0])
	}
	if string(got[1]) != structured {
		t.Errorf("structured mode: %s", got[1])
	}
	want := fmt.Sprintf(`{"specversion":"1.0","id":"%d-2","source":"/namespaces/default/streams/plain/partitions/0","type":"dev.loam.stream.record","time":"2025-12-01T12:00:00.123Z","partitionkey":"k","datacontenttype":"application/json","data":{"plain":true}}`, st.ID)
	if string(got[2]) != want {
		t.Errorf("envelope:\n got %s\nwant %s", got[2], want)
	}
}

// TestCloudEventsConcurrentSenders: 16 clients send the same event at once; exactly one
// record is appended, every answer is appended, duplicate (the one offset) or in_flight
// (409), and once settled every retry answers duplicate.
func TestCloudEventsConcurrentSenders(t *testing.T) {
	n := startCENode(t, httpapi.CloudEventsConfig{})
	n.createStream(t, "race", 2)
	url := n.srv.URL + "/v1/namespaces/default/streams/race/events"
	ev := []byte(`{"specversion":"1.0","id":"same","source":"/race","type":"t","data":1}`)
	var wg sync.WaitGroup
	var appended, dup, inflight atomic.Int32
	offsets := make(chan int64, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, a := cePost(t, url, cloudevents.MediaJSON, ev, nil)
			switch {
			case code == 200 && a.Events[0].Status == "appended":
				appended.Add(1)
				offsets <- a.Events[0].Offset
			case code == 200 && a.Events[0].Status == "duplicate":
				dup.Add(1)
				offsets <- a.Events[0].Offset
			case code == 409 && a.Events[0].Status == "in_flight":
				inflight.Add(1)
			default:
				t.Errorf("answer %d %+v", code, a)
			}
		}()
	}
	wg.Wait()
	close(offsets)
	if appended.Load() != 1 {
		t.Fatalf("%d appended, %d duplicate, %d in flight", appended.Load(), dup.Load(), inflight.Load())
	}
	for o := range offsets {
		if o != 0 {
			t.Fatalf("offset %d", o)
		}
	}
	code, _, a := cePost(t, url, cloudevents.MediaJSON, ev, nil)
	if code != 200 || a.Events[0].Status != "duplicate" || a.Events[0].Offset != 0 {
		t.Fatalf("after the race: %d %+v", code, a)
	}
	_, parts, _ := n.meta.GetStream(context.Background(), "default", "race")
	if parts[0].HighWatermark+parts[1].HighWatermark != 1 {
		t.Fatalf("%d records", parts[0].HighWatermark+parts[1].HighWatermark)
	}
}

// stubWriter fails every write with err.
type stubWriter struct{ err error }

func (w stubWriter) Write(ctx context.Context, reqs []writer.Request) ([]writer.Result, error) {
	return nil, w.err
}
func (w stubWriter) Close(ctx context.Context) error { return nil }

// TestIngestEventsWriteOutcomes: a definitely failed append releases its claims (a retry
// appends at once); an append of unknown outcome keeps them (a retry is in flight until
// they lapse), since it may have committed.
func TestIngestEventsWriteOutcomes(t *testing.T) {
	mc := startSequencer(t)
	ctx := context.Background()
	st, err := mc.CreateStream(ctx, meta.StreamConfig{Namespace: "default", Name: "w", Partitions: 1, Class: meta.ClassStandard,
		Encoding: meta.EncodingKafka, RetentionMs: -1, RetentionBytes: -1, CleanupPolicy: meta.CleanupDelete})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := cloudevents.DecodeJSON([]byte(`{"specversion":"1.0","id":"1","source":"/w","type":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	in := func(err error) httpapi.EventIngest {
		return httpapi.EventIngest{Meta: mc, Writer: stubWriter{err}, NodeID: "n", Logger: quiet()}
	}
	claim := func(id uint64) meta.EventStatus {
		as, err := mc.ClaimEvents(ctx, meta.EventClaim{Namespace: "default", StreamID: st.ID, Node: "probe", Claim: id,
			Keys: []meta.EventKey{ev.Key()}, Pending: time.Second, MaxEntries: 100})
		if err != nil {
			t.Fatal(err)
		}
		if as[0].Status == meta.EventClaimed { // give it back
			_ = mc.ReleaseEvents(ctx, meta.EventRelease{Namespace: "default", StreamID: st.ID, Claim: id, Keys: []meta.EventKey{ev.Key()}})
		}
		return as[0].Status
	}
	_, err = httpapi.IngestEvents(ctx, in(fmt.Errorf("%w: refused", writer.ErrCommitFailed)), st, []*cloudevents.Event{ev}, -1)
	if !errors.Is(err, writer.ErrCommitFailed) {
		t.Fatalf("failed write: %v", err)
	}
	if s := claim(100); s != meta.EventClaimed {
		t.Fatalf("after a failed append the key is %v, want released", s)
	}
	_, err = httpapi.IngestEvents(ctx, in(fmt.Errorf("%w: timeout", writer.ErrCommitUnknown)), st, []*cloudevents.Event{ev}, -1)
	if status, d := httpapi.DescribeError(err); status != 503 || d.Code != streamapi.CodeCommitUnknown {
		t.Fatalf("unknown write: %d %+v", status, d)
	}
	if s := claim(101); s != meta.EventInFlight {
		t.Fatalf("after an append of unknown outcome the key is %v, want in flight", s)
	}
}

// TestCloudEventsProtobufOverHTTP: the protobuf format over HTTP, typed extensions read
// back typed in structured JSON.
func TestCloudEventsProtobufOverHTTP(t *testing.T) {
	n := startCENode(t, httpapi.CloudEventsConfig{})
	n.createStream(t, "pb", 1)
	ev := &cloudevents.Event{Attrs: []cloudevents.Attr{{Name: "specversion", Value: "1.0"}, {Name: "id", Value: "p-1"},
		{Name: "source", Value: "/pb"}, {Name: "type", Value: "t"}, {Name: "n", Value: "-5", Type: cloudevents.Integer},
		{Name: "ok", Value: "false", Type: cloudevents.Boolean}, {Name: "datacontenttype", Value: "application/octet-stream"}},
		Data: []byte{0, 1, 2}, HasData: true}
	code, _, a := cePost(t, n.srv.URL+"/v1/namespaces/default/streams/pb/events", cloudevents.MediaProto, cloudevents.AppendProto(nil, ev), nil)
	if code != 200 || a.Events[0].Status != "appended" {
		t.Fatalf("%d %+v", code, a)
	}
	_, body := ceGet(t, n.srv.URL+"/v1/namespaces/default/streams/pb/partitions/0/events")
	want := `[{"specversion":"1.0","id":"p-1","source":"/pb","type":"t","n":-5,"ok":false,"datacontenttype":"application/octet-stream","data_base64":"AAEC"}]` + "\n"
	if string(body) != want {
		t.Fatalf("got %s want %s", body, want)
	}
}
