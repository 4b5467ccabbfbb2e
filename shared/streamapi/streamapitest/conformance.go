package streamapitest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/recordbatch"
	"github.com/loamhq/loam/shared/streamapi"
)

// Conformance runs the behaviours of the native HTTP API (docs/http-api.md) against the
// server at baseURL, which must serve namespace "default" without authentication. The fake
// of this package and the log node's real server both run it, so the fake cannot drift
// from the server its users stand it in for. Streams are created under fresh names, so
// one server can run it more than once; subtests run one at a time (keyless round-robin
// is observed across consecutive requests).
func Conformance(t *testing.T, baseURL string) {
	c := &conformer{base: strings.TrimSuffix(baseURL, "/"), prefix: fmt.Sprintf("conf-%06d-", rand.IntN(1e6))}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, c *conformer)
	}{
		{"StreamLifecycle", testStreamLifecycle},
		{"CreateValidation", testCreateValidation},
		{"ProduceFetchRoundTrip", testProduceFetchRoundTrip},
		{"FetchValueEncoding", testFetchValueEncoding},
		{"Partitioning", testPartitioning},
		{"ProduceValidation", testProduceValidation},
		{"FetchMaxBytes", testFetchMaxBytes},
		{"FetchErrors", testFetchErrors},
		{"LongPoll", testLongPoll},
		{"Headers", testHeaders},
		{"BinaryRoundTrip", testBinaryRoundTrip},
		{"BinaryValidation", testBinaryValidation},
		{"BinaryLongPoll", testBinaryLongPoll},
		{"Routes", testRoutes},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, c) })
	}
}

type conformer struct {
	base   string
	prefix string
	n      int
}

const streamsPath = "/v1/namespaces/default/streams"

// name returns a fresh stream name.
func (c *conformer) name() string {
	c.n++
	return fmt.Sprintf("%s%d", c.prefix, c.n)
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

// errorBody decodes the error JSON, failing the test when the answer is not one.
func (r reply) errorDetail(t *testing.T) streamapi.ErrorDetail {
	t.Helper()
	var eb streamapi.ErrorBody
	if err := json.Unmarshal(r.body, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("answer %d is not the error JSON with a code and a message: %s", r.status, r.body)
	}
	return eb.Error
}

func (c *conformer) do(t *testing.T, method, path, contentType string, body []byte) reply {
	t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return c.send(t, req)
}

func (c *conformer) send(t *testing.T, req *http.Request) reply {
	t.Helper()
	method, path := req.Method, req.URL.Path
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, path, err)
	}
	binary := streamapi.IsMediaRecordBatch(resp.Header.Get("Content-Type"))
	if binary && resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: a %d answer in %s: %q", method, path, resp.StatusCode, streamapi.MediaRecordBatch, b)
	}
	if resp.StatusCode != http.StatusNoContent && !binary && !json.Valid(b) {
		t.Fatalf("%s %s: answer %d is not valid JSON: %q", method, path, resp.StatusCode, b)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (c *conformer) json(t *testing.T, method, path, body string) reply {
	t.Helper()
	return c.do(t, method, path, "application/json", []byte(body))
}

// expect checks an answer's status and, for errors, its code.
func expect(t *testing.T, what string, r reply, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.body)
	}
	if code != "" {
		if d := r.errorDetail(t); d.Code != code {
			t.Fatalf("%s: code %q, want %q: %s", what, d.Code, code, r.body)
		}
	}
}

func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, r.body, err)
	}
	return v
}

func (c *conformer) create(t *testing.T, partitions int) string {
	t.Helper()
	name := c.name()
	r := c.json(t, "POST", streamsPath, fmt.Sprintf(`{"name":%q,"partitions":%d}`, name, partitions))
	expect(t, "create "+name, r, http.StatusCreated, "")
	return name
}

func (c *conformer) produce(t *testing.T, stream, body string) streamapi.ProduceResponse {
	t.Helper()
	r := c.json(t, "POST", streamsPath+"/"+stream+"/records", body)
	expect(t, "produce", r, http.StatusOK, "")
	return decode[streamapi.ProduceResponse](t, r)
}

func (c *conformer) fetch(t *testing.T, stream string, p int, query string) (streamapi.FetchResponse, reply) {
	t.Helper()
	r := c.do(t, "GET", fmt.Sprintf("%s/%s/partitions/%d/records?%s", streamsPath, stream, p, query), "", nil)
	expect(t, "fetch "+query, r, http.StatusOK, "")
	return decode[streamapi.FetchResponse](t, r), r
}

func testStreamLifecycle(t *testing.T, c *conformer) {
	name := c.name()
	r := c.json(t, "POST", streamsPath, fmt.Sprintf(`{"name":%q}`, name))
	expect(t, "create", r, http.StatusCreated, "")
	st := decode[streamapi.Stream](t, r)
	want := streamapi.Stream{Namespace: "default", Name: name, Partitions: 1, Class: "standard", Encoding: "kafka",
		RetentionMs: 7 * 24 * 3600 * 1000, RetentionBytes: -1, CleanupPolicy: "delete"}
	if st.ID == 0 || st.CreatedAtMs <= 0 || st.PartitionInfo != nil {
		t.Fatalf("create answer %s: want an id, created_at_ms and no partition_info", r.body)
	}
	st.ID, st.CreatedAtMs = 0, 0
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Fatalf("create answer %+v, want the defaults %+v", st, want)
	}
	expect(t, "create again", c.json(t, "POST", streamsPath, fmt.Sprintf(`{"name":%q}`, name)), http.StatusConflict, streamapi.CodeStreamExists)

	r = c.do(t, "GET", streamsPath+"/"+name, "", nil)
	expect(t, "get", r, http.StatusOK, "")
	if got := decode[streamapi.Stream](t, r); len(got.PartitionInfo) != 1 || got.PartitionInfo[0] != (streamapi.PartitionInfo{}) {
		t.Fatalf("get answer %s: want partition_info of one empty partition", r.body)
	}
	r = c.do(t, "GET", streamsPath, "", nil)
	expect(t, "list", r, http.StatusOK, "")
	found := false
	for _, s := range decode[streamapi.ListStreamsResponse](t, r).Streams {
		if s.Name == name {
			found = true
			if s.PartitionInfo != nil {
				t.Fatalf("list item %+v has partition_info", s)
			}
		}
	}
	if !found {
		t.Fatalf("list %s does not hold %s", r.body, name)
	}

	r = c.json(t, "PATCH", streamsPath+"/"+name, `{"partitions":3,"retention_ms":-1,"cleanup_policy":"compact","key_attribute":"service.name"}`)
	expect(t, "patch", r, http.StatusOK, "")
	if got := decode[streamapi.Stream](t, r); got.Partitions != 3 || got.RetentionMs != -1 || got.CleanupPolicy != "compact" ||
		got.KeyAttribute != "service.name" || got.PartitionInfo != nil {
		t.Fatalf("patch answer %s", r.body)
	}
	r = c.do(t, "GET", streamsPath+"/"+name, "", nil)
	if got := decode[streamapi.Stream](t, r); len(got.PartitionInfo) != 3 || got.KeyAttribute != "service.name" {
		t.Fatalf("get after patch %s: want 3 partitions and key_attribute service.name", r.body)
	}
	expect(t, "patch long key attribute", c.json(t, "PATCH", streamsPath+"/"+name, `{"key_attribute":"`+strings.Repeat("k", 256)+`"}`),
		http.StatusBadRequest, streamapi.CodeInvalidArgument)
	expect(t, "patch shrink", c.json(t, "PATCH", streamsPath+"/"+name, `{"partitions":2}`), http.StatusBadRequest, streamapi.CodeInvalidArgument)
	expect(t, "patch retention 0", c.json(t, "PATCH", streamsPath+"/"+name, `{"retention_ms":0}`), http.StatusBadRequest, streamapi.CodeInvalidArgument)
	expect(t, "patch unknown field", c.json(t, "PATCH", streamsPath+"/"+name, `{"name":"x"}`), http.StatusBadRequest, streamapi.CodeInvalidJSON)
	expect(t, "patch missing", c.json(t, "PATCH", streamsPath+"/"+c.name(), `{"retention_ms":-1}`), http.StatusNotFound, streamapi.CodeStreamNotFound)

	expect(t, "delete", c.do(t, "DELETE", streamsPath+"/"+name, "", nil), http.StatusNoContent, "")
	expect(t, "get deleted", c.do(t, "GET", streamsPath+"/"+name, "", nil), http.StatusNotFound, streamapi.CodeStreamNotFound)
	expect(t, "delete deleted", c.do(t, "DELETE", streamsPath+"/"+name, "", nil), http.StatusNotFound, streamapi.CodeStreamNotFound)
	expect(t, "list unknown namespace", c.do(t, "GET", "/v1/namespaces/nope-ns/streams", "", nil), http.StatusNotFound, streamapi.CodeNamespaceNotFound)
}

func testCreateValidation(t *testing.T, c *conformer) {
	for _, tc := range []struct {
		what, body string
		status     int
		code       string
	}{
		{"bad name", `{"name":"a b"}`, 400, streamapi.CodeInvalidArgument},
		{"no name", `{"partitions":1}`, 400, streamapi.CodeInvalidArgument},
		{"zero partitions", `{"name":%q,"partitions":0}`, 400, streamapi.CodeInvalidArgument},
		{"express", `{"name":%q,"class":"express"}`, 400, streamapi.CodeUnsupportedClass},
		{"quorum", `{"name":%q,"class":"quorum"}`, 400, streamapi.CodeUnsupportedClass},
		{"unknown class", `{"name":%q,"class":"gold"}`, 400, streamapi.CodeInvalidArgument},
		{"arrow", `{"name":%q,"encoding":"arrow"}`, 400, streamapi.CodeInvalidArgument},
		{"retention", `{"name":%q,"retention_ms":-5}`, 400, streamapi.CodeInvalidArgument},
		{"retention bytes", `{"name":%q,"retention_bytes":0}`, 400, streamapi.CodeInvalidArgument},
		{"cleanup", `{"name":%q,"cleanup_policy":"shred"}`, 400, streamapi.CodeInvalidArgument},
		{"long key attribute", `{"name":%q,"key_attribute":"` + strings.Repeat("k", 256) + `"}`, 400, streamapi.CodeInvalidArgument},
		{"leader zone on a standard stream", `{"name":%q,"leader_zone":"zone-a"}`, 400, streamapi.CodeInvalidArgument},
		{"unknown field", `{"name":%q,"bogus":1}`, 400, streamapi.CodeInvalidJSON},
		{"trailing data", `{"name":%q} x`, 400, streamapi.CodeInvalidJSON},
		{"wrong type", `{"name":%q,"partitions":"2"}`, 400, streamapi.CodeInvalidJSON},
		{"empty body", ``, 400, streamapi.CodeInvalidJSON},
	} {
		body := tc.body
		if strings.Contains(body, "%q") {
			body = fmt.Sprintf(body, c.name())
		}
		expect(t, tc.what, c.json(t, "POST", streamsPath, body), tc.status, tc.code)
	}
	expect(t, "wrong content type", c.do(t, "POST", streamsPath, "text/plain", []byte(fmt.Sprintf(`{"name":%q}`, c.name()))),
		http.StatusUnsupportedMediaType, streamapi.CodeUnsupportedMedia)
	expect(t, "unknown namespace", c.json(t, "POST", "/v1/namespaces/nope-ns/streams", fmt.Sprintf(`{"name":%q}`, c.name())),
		http.StatusNotFound, streamapi.CodeNamespaceNotFound)
}

func testProduceFetchRoundTrip(t *testing.T, c *conformer) {
	name := c.create(t, 1)
	res := c.produce(t, name, `{"records":[
		{"key":"k1","value":{"a": [1, 2]},"headers":{"z":"1","a":"2"},"timestamp":1700000000000},
		{"key_base64":"/w==","value_base64":"AAEC/w=="},
		{"key":"k1","value":null},
		{"value":"text"},
		{"value_base64":""}
	]}`)
	if len(res.Offsets) != 5 || !strings.HasPrefix(res.Token, "v1.") {
		t.Fatalf("produce answer %+v: want 5 offsets and a v1. token", res)
	}
	for i, o := range res.Offsets {
		if o.Partition != 0 || o.Offset != int64(i) {
			t.Fatalf("offset %d: %+v, want partition 0 offset %d", i, o, i)
		}
	}
	fr, raw := c.fetch(t, name, 0, "offset=0")
	if fr.NextOffset != 5 || fr.HighWatermark != 5 || fr.LogStart != 0 || len(fr.Records) != 5 {
		t.Fatalf("fetch %s", raw.body)
	}
	var plain []map[string]json.RawMessage
	var outer struct {
		Records *[]map[string]json.RawMessage `json:"records"`
	}
	outer.Records = &plain
	if err := json.Unmarshal(raw.body, &outer); err != nil {
		t.Fatal(err)
	}
	for i, rec := range plain {
		if _, ok := rec["partition"]; ok {
			t.Fatalf("fetched record %d carries a partition field: %s", i, raw.body)
		}
		if _, ok := rec["timestamp"]; !ok {
			t.Fatalf("fetched record %d has no timestamp: %s", i, raw.body)
		}
	}
	want := []struct {
		key, value []byte
		asJSON     bool
	}{
		{[]byte("k1"), []byte(`{"a": [1, 2]}`), true},
		{[]byte{0xff}, []byte{0, 1, 2, 0xff}, false},
		{[]byte("k1"), nil, true},
		{nil, []byte(`"text"`), true},
		{nil, []byte{}, false},
	}
	for i, w := range want {
		r := fr.Records[i]
		k, _ := r.KeyBytes()
		v, err := r.Bytes()
		if err != nil || r.Offset == nil || *r.Offset != int64(i) || !bytes.Equal(k, w.key) || !bytes.Equal(v, w.value) || (v == nil) != (w.value == nil) {
			t.Fatalf("record %d: %s", i, raw.body)
		}
		if w.asJSON != (r.Value != nil) {
			t.Fatalf("record %d: value travels in the wrong field: %s", i, raw.body)
		}
	}
	if *fr.Records[0].Timestamp != 1700000000000 || !fr.Records[0].Headers.Equal(streamapi.Headers{streamapi.StringHeader("z", "1"), streamapi.StringHeader("a", "2")}) {
		t.Fatalf("record 0 timestamp or headers: %s", raw.body)
	}
	fr, raw = c.fetch(t, name, 0, "offset=3")
	if len(fr.Records) != 2 || *fr.Records[0].Offset != 3 || fr.NextOffset != 5 {
		t.Fatalf("fetch from the middle: %s", raw.body)
	}
	fr, raw = c.fetch(t, name, 0, "offset=5")
	if len(fr.Records) != 0 || fr.NextOffset != 5 {
		t.Fatalf("fetch at the high watermark: %s", raw.body)
	}
}

// testFetchValueEncoding: stored bytes come back in "value" only when a JSON decoder hands
// them back unchanged; otherwise in "value_base64". Every answer is valid JSON.
func testFetchValueEncoding(t *testing.T, c *conformer) {
	name := c.create(t, 1)
	values := [][]byte{
		[]byte("\"\xff\""),       // JSON syntax, invalid UTF-8
		[]byte(" 1 "),            // JSON with whitespace around it
		[]byte("null"),           // the bytes "null", not a tombstone
		[]byte(`{"é":"\u00e9"}`), // JSON in valid UTF-8
		[]byte("\xc3"),           // a cut rune
	}
	var body strings.Builder
	body.WriteString(`{"records":[`)
	for i, v := range values {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"value_base64":%q}`, base64.StdEncoding.EncodeToString(v))
	}
	body.WriteString("]}")
	c.produce(t, name, body.String())
	fr, raw := c.fetch(t, name, 0, "offset=0")
	if len(fr.Records) != len(values) {
		t.Fatalf("fetch: %s", raw.body)
	}
	for i, v := range values {
		got, err := fr.Records[i].Bytes()
		if err != nil || !bytes.Equal(got, v) || got == nil {
			t.Fatalf("record %d: %q, want %q exactly: %s", i, got, v, raw.body)
		}
		if wantJSON := i == 3; wantJSON != (fr.Records[i].Value != nil) {
			t.Fatalf("record %d (%q): value travels in the wrong field: %s", i, v, raw.body)
		}
	}
}

func testPartitioning(t *testing.T, c *conformer) {
	name := c.create(t, 3)
	// Kafka's default partitioner: murmur2 of the key, made positive, modulo 3.
	keys := map[string]int32{}
	for _, k := range []string{"21", "foobar", "abc", "a-little-bit-long-string"} {
		keys[k] = int32(murmur2([]byte(k))&0x7fffffff) % 3
	}
	for k, p := range keys {
		res := c.produce(t, name, fmt.Sprintf(`{"records":[{"key":%q,"value":1}]}`, k))
		if res.Offsets[0].Partition != p {
			t.Fatalf("key %q went to partition %d, want %d", k, res.Offsets[0].Partition, p)
		}
	}
	if res := c.produce(t, name, `{"records":[{"partition":2,"value":1},{"partition":0,"value":2}]}`); res.Offsets[0].Partition != 2 || res.Offsets[1].Partition != 0 {
		t.Fatalf("explicit partitions: %+v", res)
	}
	// Keyless records of one request share a partition; consecutive requests rotate.
	seen := map[int32]bool{}
	for range 3 {
		res := c.produce(t, name, `{"records":[{"value":1},{"value":2},{"value":3}]}`)
		p := res.Offsets[0].Partition
		for i, o := range res.Offsets {
			if o.Partition != p || (i > 0 && o.Offset != res.Offsets[i-1].Offset+1) {
				t.Fatalf("keyless request spread over partitions or offsets: %+v", res.Offsets)
			}
		}
		seen[p] = true
	}
	if len(seen) != 3 {
		t.Fatalf("3 consecutive keyless requests used partitions %v, want all 3", seen)
	}
}

func testProduceValidation(t *testing.T, c *conformer) {
	name := c.create(t, 2)
	path := streamsPath + "/" + name + "/records"
	big := strings.Repeat("x", 1<<20)
	for _, tc := range []struct {
		what, body string
		status     int
		code       string
	}{
		{"no records field", `{}`, 400, streamapi.CodeInvalidRecord},
		{"empty records", `{"records":[]}`, 400, streamapi.CodeInvalidRecord},
		{"offset given", `{"records":[{"value":1,"offset":3}]}`, 400, streamapi.CodeInvalidRecord},
		{"both values", `{"records":[{"value":1,"value_base64":"AA=="}]}`, 400, streamapi.CodeInvalidRecord},
		{"both keys", `{"records":[{"key":"a","key_base64":"AA==","value":1}]}`, 400, streamapi.CodeInvalidRecord},
		{"negative timestamp", `{"records":[{"value":1,"timestamp":-1}]}`, 400, streamapi.CodeInvalidRecord},
		{"header without key", `{"records":[{"value":1,"headers":[{"value":"v"}]}]}`, 400, streamapi.CodeInvalidJSON},
		{"header with both values", `{"records":[{"value":1,"headers":[{"key":"k","value":"v","value_base64":"AA=="}]}]}`, 400, streamapi.CodeInvalidJSON},
		{"header value not a string", `{"records":[{"value":1,"headers":[{"key":"k","value":1}]}]}`, 400, streamapi.CodeInvalidJSON},
		{"header unknown field", `{"records":[{"value":1,"headers":[{"key":"k","vaule":"v"}]}]}`, 400, streamapi.CodeInvalidJSON},
		{"headers not a list", `{"records":[{"value":1,"headers":"k=v"}]}`, 400, streamapi.CodeInvalidJSON},
		{"partition out of range", `{"records":[{"value":1,"partition":2}]}`, 400, streamapi.CodePartitionNotFound},
		{"negative partition", `{"records":[{"value":1,"partition":-1}]}`, 400, streamapi.CodePartitionNotFound},
		{"record too large", `{"records":[{"value":"` + big + `"}]}`, 413, streamapi.CodeRecordTooLarge},
		{"not json", `{"records":[`, 400, streamapi.CodeInvalidJSON},
		{"unknown field", `{"records":[{"vaule":1}]}`, 400, streamapi.CodeInvalidJSON},
		{"bad base64", `{"records":[{"value_base64":"!!"}]}`, 400, streamapi.CodeInvalidJSON},
		{"records not an array", `{"records":{}}`, 400, streamapi.CodeInvalidJSON},
	} {
		expect(t, tc.what, c.json(t, "POST", path, tc.body), tc.status, tc.code)
	}
	huge := `{"records":[{"value":"` + strings.Repeat("x", 8<<20) + `"}]}`
	expect(t, "body over 8 MiB", c.json(t, "POST", path, huge), http.StatusRequestEntityTooLarge, streamapi.CodeRequestTooLarge)
	expect(t, "wrong content type", c.do(t, "POST", path, "text/plain", []byte(`{"records":[{"value":1}]}`)), http.StatusUnsupportedMediaType, streamapi.CodeUnsupportedMedia)
	expect(t, "unknown stream", c.json(t, "POST", streamsPath+"/"+c.name()+"/records", `{"records":[{"value":1}]}`), http.StatusNotFound, streamapi.CodeStreamNotFound)
	// Nothing refused was written.
	for p := range 2 {
		if fr, raw := c.fetch(t, name, p, "offset=0"); fr.HighWatermark != 0 {
			t.Fatalf("partition %d holds records after refused produces: %s", p, raw.body)
		}
	}
}

// testFetchMaxBytes: max_bytes counts stored batches (one per produce and partition), and
// a fetch always answers at least one whole batch.
func testFetchMaxBytes(t *testing.T, c *conformer) {
	name := c.create(t, 1)
	c.produce(t, name, `{"records":[{"value":1},{"value":2},{"value":3}]}`)
	c.produce(t, name, `{"records":[{"value":4}]}`)
	c.produce(t, name, `{"records":[{"value":5},{"value":6}]}`)
	for _, tc := range []struct {
		query string
		want  []int64 // offsets
	}{
		{"offset=0&max_bytes=1", []int64{0, 1, 2}},
		{"offset=1&max_bytes=1", []int64{1, 2}},
		{"offset=3&max_bytes=1", []int64{3}},
		{"offset=0", []int64{0, 1, 2, 3, 4, 5}},
		{"offset=4&max_bytes=64", []int64{4, 5}},
	} {
		fr, raw := c.fetch(t, name, 0, tc.query)
		var got []int64
		for _, r := range fr.Records {
			got = append(got, *r.Offset)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || fr.NextOffset != tc.want[len(tc.want)-1]+1 {
			t.Fatalf("fetch %s: offsets %v next %d, want %v: %s", tc.query, got, fr.NextOffset, tc.want, raw.body)
		}
	}
}

func testFetchErrors(t *testing.T, c *conformer) {
	name := c.create(t, 2)
	c.produce(t, name, `{"records":[{"partition":0,"value":1},{"partition":0,"value":2}]}`)
	base := streamsPath + "/" + name + "/partitions/"
	r := c.do(t, "GET", base+"0/records?offset=3", "", nil)
	expect(t, "offset past the high watermark", r, http.StatusRequestedRangeNotSatisfiable, streamapi.CodeOffsetOutOfRange)
	if d := r.errorDetail(t); d.LogStart == nil || d.HighWater == nil || *d.LogStart != 0 || *d.HighWater != 2 {
		t.Fatalf("out of range answer %s: want log_start 0 and high_watermark 2", r.body)
	}
	for _, tc := range []struct {
		what, path string
		status     int
		code       string
	}{
		{"partition past the last", "2/records", 404, streamapi.CodePartitionNotFound},
		{"negative partition", "-1/records", 404, streamapi.CodePartitionNotFound},
		{"partition not a number", "x/records", 400, streamapi.CodeBadRequest},
		{"unknown parameter", "0/records?offest=1", 400, streamapi.CodeBadRequest},
		{"offset not a number", "0/records?offset=abc", 400, streamapi.CodeBadRequest},
		{"negative offset", "0/records?offset=-1", 400, streamapi.CodeBadRequest},
		{"max_bytes zero", "0/records?max_bytes=0", 400, streamapi.CodeBadRequest},
		{"max_bytes over 64 MiB", "0/records?max_bytes=67108865", 400, streamapi.CodeBadRequest},
		{"max_wait_ms over 300000", "0/records?max_wait_ms=300001", 400, streamapi.CodeBadRequest},
	} {
		expect(t, tc.what, c.do(t, "GET", base+tc.path, "", nil), tc.status, tc.code)
	}
	expect(t, "unknown stream", c.do(t, "GET", streamsPath+"/"+c.name()+"/partitions/0/records", "", nil), http.StatusNotFound, streamapi.CodeStreamNotFound)
}

func testLongPoll(t *testing.T, c *conformer) {
	name := c.create(t, 1)
	start := time.Now()
	fr, raw := c.fetch(t, name, 0, "offset=0&max_wait_ms=300")
	if waited := time.Since(start); len(fr.Records) != 0 || fr.NextOffset != 0 || waited < 250*time.Millisecond {
		t.Fatalf("empty poll answered after %v: %s (want no records after about 300 ms)", waited, raw.body)
	}
	type result struct {
		fr      streamapi.FetchResponse
		elapsed time.Duration
	}
	got := make(chan result, 1)
	start = time.Now()
	go func() {
		r, err := http.Get(c.base + streamsPath + "/" + name + "/partitions/0/records?offset=0&max_wait_ms=20000")
		var res result
		if err == nil {
			_ = json.NewDecoder(r.Body).Decode(&res.fr)
			r.Body.Close()
		}
		res.elapsed = time.Since(start)
		got <- res
	}()
	time.Sleep(200 * time.Millisecond)
	c.produce(t, name, `{"records":[{"value":"wake"}]}`)
	select {
	case res := <-got:
		if len(res.fr.Records) != 1 || res.elapsed > 10*time.Second {
			t.Fatalf("poll answered %+v after %v, want the record at once", res.fr, res.elapsed)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the poll did not wake on a produce")
	}
}

func testRoutes(t *testing.T, c *conformer) {
	name := c.create(t, 1)
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/nope", 404, streamapi.CodeNotFound},
		{"GET", "/v1/namespaces/default/streams/" + name + "/partitions", 404, streamapi.CodeNotFound},
		{"PUT", streamsPath, 405, streamapi.CodeMethodNotAllowed},
		{"POST", streamsPath + "/" + name, 405, streamapi.CodeMethodNotAllowed},
		{"GET", streamsPath + "/" + name + "/records", 405, streamapi.CodeMethodNotAllowed},
		{"DELETE", streamsPath + "/" + name + "/partitions/0/records", 405, streamapi.CodeMethodNotAllowed},
	} {
		expect(t, tc.method+" "+tc.path, c.do(t, tc.method, tc.path, "", nil), tc.status, tc.code)
	}
}

// testHeaders: headers keep their order, repeated keys, binary and null values, in the
// list form and in the object form (in the order written); fetch answers the list form.
func testHeaders(t *testing.T, c *conformer) {
	name := c.create(t, 1)
	c.produce(t, name, `{"records":[
		{"value":1,"headers":[{"key":"k","value":"v"},{"key":"k","value_base64":"AA=="},{"key":"n","value":null},{"key":"n2"},{"key_base64":"/w==","value":"x"},{"key":"","value":""},{"key":"a","value_base64":"/w=="}]},
		{"value":2,"headers":{"z":"1","a":"2","n":null}},
		{"value":3,"headers":[]}
	]}`)
	want := []streamapi.Headers{
		{streamapi.StringHeader("k", "v"), {Key: "k", Value: []byte{0}}, {Key: "n"}, {Key: "n2"}, streamapi.StringHeader("\xff", "x"), streamapi.StringHeader("", ""), {Key: "a", Value: []byte{0xff}}},
		{streamapi.StringHeader("z", "1"), streamapi.StringHeader("a", "2"), {Key: "n"}},
		nil,
	}
	fr, raw := c.fetch(t, name, 0, "offset=0")
	if len(fr.Records) != 3 {
		t.Fatalf("fetch: %s", raw.body)
	}
	for i, w := range want {
		if !fr.Records[i].Headers.Equal(w) {
			t.Fatalf("record %d: headers %+v, want %+v: %s", i, fr.Records[i].Headers, w, raw.body)
		}
	}
	if !bytes.Contains(raw.body, []byte(`"headers":[{"key":"k","value":"v"},{"key":"k","value":"\u0000"},{"key":"n","value":null},{"key":"n2","value":null},{"key_base64":"/w==","value":"x"},{"key":"","value":""},{"key":"a","value_base64":"/w=="}]`)) {
		t.Fatalf("fetch does not answer the headers list form: %s", raw.body)
	}
	if bytes.Contains(raw.body, []byte(`"headers":[]`)) {
		t.Fatalf("a record without headers answers an empty list: %s", raw.body)
	}
	// The binary answer carries the same headers, as stored.
	recs, _ := c.fetchBinary(t, name, 0, "offset=0")
	for i, w := range want {
		if hs := toHeaders(recs[i].Headers); !hs.Equal(w) {
			t.Fatalf("binary record %d: headers %+v, want %+v", i, hs, w)
		}
	}
}

func toHeaders(hs []recordbatch.Header) streamapi.Headers {
	var out streamapi.Headers
	for _, h := range hs {
		out = append(out, streamapi.Header{Key: h.Key, Value: h.Value})
	}
	return out
}

// produceBinary posts body as MediaRecordBatch with the given query.
func (c *conformer) produceBinary(t *testing.T, stream, query string, body []byte) reply {
	t.Helper()
	req, err := http.NewRequest("POST", c.base+streamsPath+"/"+stream+"/records?"+query, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", streamapi.MediaRecordBatch)
	return c.send(t, req)
}

// fetchBinary fetches with Accept: MediaRecordBatch, checks the answer's form and returns
// the stored records (offset = base offset + delta in OffsetDelta's place) and the reply.
func (c *conformer) fetchBinary(t *testing.T, stream string, p int, query string) ([]fetchedRecord, reply) {
	t.Helper()
	req, err := http.NewRequest("GET", fmt.Sprintf("%s%s/%s/partitions/%d/records?%s", c.base, streamsPath, stream, p, query), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", streamapi.MediaRecordBatch)
	r := c.send(t, req)
	expect(t, "binary fetch "+query, r, http.StatusOK, "")
	if ct := r.header.Get("Content-Type"); ct != streamapi.MediaRecordBatch {
		t.Fatalf("binary fetch %s: Content-Type %q", query, ct)
	}
	for _, h := range []string{streamapi.HeaderNextOffset, streamapi.HeaderHighWatermark, streamapi.HeaderLogStart} {
		if _, err := strconv.ParseInt(r.header.Get(h), 10, 64); err != nil {
			t.Fatalf("binary fetch %s: header %s %q", query, h, r.header.Get(h))
		}
	}
	var out []fetchedRecord
	for rest := r.body; len(rest) > 0; {
		b, tail, err := recordbatch.Parse(rest)
		if err != nil {
			t.Fatalf("binary fetch %s: %v", query, err)
		}
		recs, err := b.Records()
		if err != nil {
			t.Fatalf("binary fetch %s: %v", query, err)
		}
		for _, rc := range recs {
			out = append(out, fetchedRecord{Record: rc, offset: b.BaseOffset + int64(rc.OffsetDelta)})
		}
		rest = tail
	}
	return out, r
}

type fetchedRecord struct {
	recordbatch.Record
	offset int64
}

func headerInt(t *testing.T, r reply, name string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(r.header.Get(name), 10, 64)
	if err != nil {
		t.Fatalf("header %s %q: %v", name, r.header.Get(name), err)
	}
	return v
}

func mustBatch(t *testing.T, c recordbatch.Compression, recs ...recordbatch.Record) []byte {
	t.Helper()
	opt := recordbatch.DefaultBuildOptions()
	opt.Compression = c
	b, err := recordbatch.Append(nil, recs, opt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testBinaryRoundTrip: batches go in as sent and come out as stored, base offsets set;
// the JSON fetch reads the same records.
func testBinaryRoundTrip(t *testing.T, c *conformer) {
	name := c.create(t, 3)
	b1 := mustBatch(t, recordbatch.None,
		recordbatch.Record{Timestamp: 1700000000000, Key: []byte("k"), Value: []byte(`{"a":1}`), Headers: []recordbatch.Header{{Key: "h", Value: []byte("1")}, {Key: "h", Value: nil}, {Key: "b", Value: []byte{0, 0xff}}}},
		recordbatch.Record{Timestamp: 1700000000005, Value: nil},
		recordbatch.Record{Timestamp: 1700000000001, Key: []byte{0xff}, Value: []byte{}})
	b2 := mustBatch(t, recordbatch.Gzip, recordbatch.Record{Timestamp: 7, Value: []byte("plain text")}, recordbatch.Record{Timestamp: 8, Value: []byte("more")})
	r := c.produceBinary(t, name, "partition=1", append(slices.Clone(b1), b2...))
	expect(t, "binary produce", r, http.StatusOK, "")
	res := decode[streamapi.ProduceResponse](t, r)
	if len(res.Offsets) != 2 || res.Offsets[0] != (streamapi.RecordOffset{Partition: 1, Offset: 0}) || res.Offsets[1] != (streamapi.RecordOffset{Partition: 1, Offset: 3}) || !strings.HasPrefix(res.Token, "v1.") {
		t.Fatalf("binary produce answer %s: want one offset per batch, 1/0 and 1/3, and a token", r.body)
	}
	recs, raw := c.fetchBinary(t, name, 1, "offset=0")
	if headerInt(t, raw, streamapi.HeaderNextOffset) != 5 || headerInt(t, raw, streamapi.HeaderHighWatermark) != 5 || headerInt(t, raw, streamapi.HeaderLogStart) != 0 {
		t.Fatalf("binary fetch headers %v", raw.header)
	}
	// Stored bytes out: the batches as sent, base offsets set.
	want := append(slices.Clone(b1), b2...)
	if err := recordbatch.SetBaseOffset(want[len(b1):], 3); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw.body, want) {
		t.Fatalf("binary fetch body is not the batches as sent:\n got %x\nwant %x", raw.body, want)
	}
	if len(recs) != 5 || recs[4].offset != 4 || string(recs[3].Value) != "plain text" {
		t.Fatalf("binary fetch records %+v", recs)
	}
	// A fetch from inside a batch answers the whole batch; the reader skips what is below.
	_, raw = c.fetchBinary(t, name, 1, "offset=4")
	if !bytes.Equal(raw.body, want[len(b1):]) || headerInt(t, raw, streamapi.HeaderNextOffset) != 5 {
		t.Fatalf("binary fetch from offset 4: %x, next %s", raw.body, raw.header.Get(streamapi.HeaderNextOffset))
	}
	// max_bytes: whole batches, at least one.
	_, raw = c.fetchBinary(t, name, 1, "offset=0&max_bytes=1")
	if !bytes.Equal(raw.body, b1) || headerInt(t, raw, streamapi.HeaderNextOffset) != 3 {
		t.Fatalf("binary fetch max_bytes=1: %d bytes, next %s", len(raw.body), raw.header.Get(streamapi.HeaderNextOffset))
	}
	// At the high watermark without a wait: 200, an empty body.
	_, raw = c.fetchBinary(t, name, 1, "offset=5")
	if len(raw.body) != 0 || headerInt(t, raw, streamapi.HeaderNextOffset) != 5 {
		t.Fatalf("binary fetch at the high watermark: %q %v", raw.body, raw.header)
	}
	// Errors stay JSON.
	req, _ := http.NewRequest("GET", c.base+streamsPath+"/"+name+"/partitions/1/records?offset=6", nil)
	req.Header.Set("Accept", streamapi.MediaRecordBatch)
	expect(t, "binary fetch past the high watermark", c.send(t, req), http.StatusRequestedRangeNotSatisfiable, streamapi.CodeOffsetOutOfRange)
	// The JSON fetch reads the same records.
	fr, jraw := c.fetch(t, name, 1, "offset=0")
	if len(fr.Records) != 5 {
		t.Fatalf("JSON fetch of binary records: %s", jraw.body)
	}
	r0 := fr.Records[0]
	if k, _ := r0.KeyBytes(); string(k) != "k" || string(r0.Value) != `{"a":1}` || *r0.Timestamp != 1700000000000 ||
		!r0.Headers.Equal(streamapi.Headers{streamapi.StringHeader("h", "1"), {Key: "h"}, {Key: "b", Value: []byte{0, 0xff}}}) {
		t.Fatalf("JSON fetch record 0: %s", jraw.body)
	}
	if !fr.Records[1].IsTombstone() || *fr.Records[1].Timestamp != 1700000000005 {
		t.Fatalf("JSON fetch record 1: %s", jraw.body)
	}
	if v, _ := fr.Records[2].Bytes(); v == nil || len(v) != 0 {
		t.Fatalf("JSON fetch record 2 (empty value): %s", jraw.body)
	}
	// JSON records come out as batches too.
	c.produce(t, name, `{"records":[{"partition":1,"key":"j","value":[1],"headers":[{"key":"x","value":"y"}]}]}`)
	recs, _ = c.fetchBinary(t, name, 1, "offset=5")
	if len(recs) != 1 || recs[0].offset != 5 || string(recs[0].Key) != "j" || string(recs[0].Value) != "[1]" || len(recs[0].Headers) != 1 {
		t.Fatalf("binary fetch of a JSON record: %+v", recs)
	}
	// Without a partition, each request goes to one partition, round-robin.
	seen := map[int32]bool{}
	for range 3 {
		r := c.produceBinary(t, name, "", mustBatch(t, recordbatch.None, recordbatch.Record{Timestamp: 1, Value: []byte("a")}, recordbatch.Record{Timestamp: 1, Value: []byte("b")}))
		expect(t, "binary produce without partition", r, http.StatusOK, "")
		seen[decode[streamapi.ProduceResponse](t, r).Offsets[0].Partition] = true
	}
	if len(seen) != 3 {
		t.Fatalf("3 binary produces without partition used partitions %v, want all 3", seen)
	}
}

// recrc recomputes a forged batch's CRC32C, so a test reaches the check behind it.
func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// testBinaryValidation: every bad batch is refused with a 4xx naming the batch, and
// nothing of the request is written.
func testBinaryValidation(t *testing.T, c *conformer) {
	name := c.create(t, 2)
	good := mustBatch(t, recordbatch.None, recordbatch.Record{Timestamp: 10, Value: []byte("a")}, recordbatch.Record{Timestamp: 20, Value: []byte("b")})
	forge := func(f func(b []byte)) []byte {
		b := slices.Clone(good)
		f(b)
		return recrc(b)
	}
	then := func(bad []byte) []byte { return append(slices.Clone(good), bad...) }
	for _, tc := range []struct {
		what, query string
		body        []byte
		status      int
		code, msg   string
	}{
		{"empty body", "partition=0", nil, 400, streamapi.CodeInvalidRecord, "no batch"},
		{"bad crc", "partition=0", then(func() []byte { b := slices.Clone(good); b[len(b)-1] ^= 1; return b }()), 400, streamapi.CodeInvalidRecord, "batch 1"},
		{"bad magic", "partition=0", forge(func(b []byte) { b[16] = 1 }), 400, streamapi.CodeInvalidRecord, "magic"},
		{"truncated", "partition=0", then(good[:40]), 400, streamapi.CodeInvalidRecord, "batch 1"},
		{"trailing bytes", "partition=0", then([]byte{1, 2, 3}), 400, streamapi.CodeInvalidRecord, "batch 1"},
		{"count vs lastOffsetDelta", "partition=0", forge(func(b []byte) { binary.BigEndian.PutUint32(b[23:], 2) }), 400, streamapi.CodeInvalidRecord, "lastOffsetDelta"},
		{"numRecords vs records", "partition=0", forge(func(b []byte) { binary.BigEndian.PutUint32(b[23:], 2); binary.BigEndian.PutUint32(b[57:], 3) }), 400, streamapi.CodeInvalidRecord, "batch 0"},
		{"codec 5", "partition=0", forge(func(b []byte) { b[22] = 5 }), 400, streamapi.CodeInvalidRecord, "compression"},
		{"transactional", "partition=0", forge(func(b []byte) { b[22] = 0x10 }), 400, streamapi.CodeInvalidRecord, "transactional"},
		{"control", "partition=0", forge(func(b []byte) { b[22] = 0x20 }), 400, streamapi.CodeInvalidRecord, "control"},
		{"producer id", "partition=0", forge(func(b []byte) { binary.BigEndian.PutUint64(b[43:], 7) }), 400, streamapi.CodeInvalidRecord, "producerId"},
		{"max timestamp", "partition=0", forge(func(b []byte) { binary.BigEndian.PutUint64(b[35:], 99) }), 400, streamapi.CodeInvalidRecord, "maxTimestamp"},
		{"negative timestamp", "partition=0", mustBatch(t, recordbatch.None, recordbatch.Record{Timestamp: -5, Value: []byte("a")}), 400, streamapi.CodeInvalidRecord, "negative"},
		{"record too large", "partition=0", then(mustBatch(t, recordbatch.None, recordbatch.Record{Timestamp: 1, Value: make([]byte, 1<<20+1)})), 413, streamapi.CodeRecordTooLarge, "batch 1"},
		{"partition not a number", "partition=x", good, 400, streamapi.CodeBadRequest, "partition"},
		{"partition out of range", "partition=2", good, 400, streamapi.CodePartitionNotFound, "partition 2"},
		{"negative partition", "partition=-1", good, 400, streamapi.CodePartitionNotFound, "partition -1"},
		{"unknown parameter", "partiton=0", good, 400, streamapi.CodeBadRequest, "partiton"},
	} {
		r := c.produceBinary(t, name, tc.query, tc.body)
		expect(t, tc.what, r, tc.status, tc.code)
		if d := r.errorDetail(t); !strings.Contains(d.Message, tc.msg) {
			t.Fatalf("%s: message %q does not name %q", tc.what, d.Message, tc.msg)
		}
	}
	expect(t, "binary produce to an unknown stream", c.produceBinary(t, c.name(), "partition=0", good), http.StatusNotFound, streamapi.CodeStreamNotFound)
	for p := range 2 {
		if fr, raw := c.fetch(t, name, p, "offset=0"); fr.HighWatermark != 0 {
			t.Fatalf("partition %d holds records after refused binary produces: %s", p, raw.body)
		}
	}
}

// testBinaryLongPoll: a binary fetch at the high watermark waits, answers 200 with an
// empty body after the wait, and wakes on a produce.
func testBinaryLongPoll(t *testing.T, c *conformer) {
	name := c.create(t, 1)
	start := time.Now()
	_, raw := c.fetchBinary(t, name, 0, "offset=0&max_wait_ms=300")
	if waited := time.Since(start); len(raw.body) != 0 || headerInt(t, raw, streamapi.HeaderNextOffset) != 0 || waited < 250*time.Millisecond {
		t.Fatalf("empty binary poll answered %q after %v (want an empty body after about 300 ms)", raw.body, waited)
	}
	got := make(chan []byte, 1)
	go func() {
		req, _ := http.NewRequest("GET", c.base+streamsPath+"/"+name+"/partitions/0/records?offset=0&max_wait_ms=20000", nil)
		req.Header.Set("Accept", streamapi.MediaRecordBatch)
		var b []byte
		if r, err := http.DefaultClient.Do(req); err == nil {
			b, _ = io.ReadAll(r.Body)
			r.Body.Close()
		}
		got <- b
	}()
	time.Sleep(200 * time.Millisecond)
	r := c.produceBinary(t, name, "partition=0", mustBatch(t, recordbatch.None, recordbatch.Record{Timestamp: 1, Value: []byte("wake")}))
	expect(t, "binary produce", r, http.StatusOK, "")
	select {
	case b := <-got:
		if _, err := recordbatch.Validate(b); err != nil {
			t.Fatalf("woken binary poll answered %q: %v", b, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the binary poll did not wake on a produce")
	}
}
