package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/loamhq/loam/lognode-svc/httpapi"
)

const arrowOrders = `{"name":"orders","partitions":2,"encoding":"arrow","schema":{"fields":[
 {"name":"id","type":"int64","nullable":false},
 {"name":"name","type":"utf8","nullable":true},
 {"name":"ts","type":"timestamp","unit":"ms","nullable":false},
 {"name":"price","type":"decimal128","precision":10,"scale":2,"nullable":true},
 {"name":"tags","type":"list","nullable":true,"item":{"type":"utf8","nullable":true}}
],"key":"id","timestamp":"ts","headers":"column"}}`

func arrowFetch(t *testing.T, url string, accept string) httpReply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpReply{status: resp.StatusCode, header: resp.Header, body: b}
}

// TestArrowStreamHTTP: an arrow stream on a real node and sequencer: create with a schema,
// JSON produce validated against it, fetch as JSON records (all columns and projected) and
// as Arrow IPC, read back with arrow-go.
func TestArrowStreamHTTP(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	base := n.srv.URL + "/v1/namespaces/default/streams"
	// headers "column" needs the _headers column: the create names what is missing.
	if r := call(t, "POST", base, arrowOrders); r.status != 400 || !strings.Contains(string(r.body), `no \"_headers\" column`) {
		t.Fatalf("create without the headers column: %d %s", r.status, r.body)
	}
	create := strings.Replace(arrowOrders, `],"key"`, `,{"name":"_headers","type":"list","nullable":true,"item":{"type":"struct","nullable":false,"fields":[{"name":"key","type":"utf8","nullable":false},{"name":"value","type":"binary","nullable":true}]}}],"key"`, 1)
	r := call(t, "POST", base, create)
	if r.status != 201 || !strings.Contains(string(r.body), `"encoding":"arrow"`) {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for body, want := range map[string]string{
		`{"name":"x","encoding":"arrow"}`:                                                  `needs a \"schema\"`,
		`{"name":"x","schema":{"fields":[{"name":"a","type":"int8"}]}}`:                    `\"schema\" is for encoding \"arrow\"`,
		`{"name":"x","encoding":"arrow","schema":{"fields":[{"name":"a","type":"int9"}]}}`: `unknown type \"int9\"`,
		`{"name":"x","encoding":"parquet"}`:                                                `not one of kafka, arrow`,
	} {
		if r := call(t, "POST", base, body); r.status != 400 || !strings.Contains(string(r.body), want) {
			t.Errorf("create %s: %d %s, want %s", body, r.status, r.body, want)
		}
	}

	recs := `{"records":[
	 {"value":{"id":1,"name":"ada","ts":1700000000001,"price":"1.50","tags":["a","b"]},"headers":[{"key":"h","value":"v"}]},
	 {"value":{"id":2,"ts":1700000000002},"partition":0},
	 {"value":{"id":1,"name":"ada2","ts":1700000000003,"price":"2.00"}}]}`
	r = call(t, "POST", base+"/orders/records", recs)
	if r.status != 200 {
		t.Fatalf("produce: %d %s", r.status, r.body)
	}
	var pr struct {
		Offsets []struct {
			Partition int32 `json:"partition"`
			Offset    int64 `json:"offset"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal(r.body, &pr); err != nil {
		t.Fatal(err)
	}
	// Records 0 and 2 share key 1: same partition, consecutive offsets.
	if pr.Offsets[0].Partition != pr.Offsets[2].Partition || pr.Offsets[2].Offset != pr.Offsets[0].Offset+1 {
		t.Fatalf("offsets %+v", pr.Offsets)
	}
	kp := pr.Offsets[0].Partition
	for body, want := range map[string]string{
		`{"records":[{"value":{"id":"x","ts":1}}]}`:                  `record 0: field id: want an integer (int64), got a string`,
		`{"records":[{"value":{"id":1,"ts":1}},{"value":{"ts":1}}]}`: `record 1: field id: null or missing, but the column is not nullable`,
		`{"records":[{"value":{"id":1,"ts":1,"zz":1}}]}`:             `record 0: field zz: not a column of the schema`,
		`{"records":[{"key":"k","value":{"id":1,"ts":1}}]}`:          `record 0: an arrow stream's key is its schema's key column`,
		`{"records":[{"value":{"id":1,"ts":1,"tags":[1]}}]}`:         `record 0: field tags[0]: want a string, got a number`,
	} {
		if r := call(t, "POST", base+"/orders/records", body); r.status != 400 || !strings.Contains(string(r.body), want) {
			t.Errorf("produce %s: %d %s, want %q", body, r.status, r.body, want)
		}
	}

	part := base + "/orders/partitions/" + string(rune('0'+kp)) + "/records"
	r = arrowFetch(t, part+"?offset=0", "")
	if r.status != 200 {
		t.Fatalf("fetch: %d %s", r.status, r.body)
	}
	got := string(r.body)
	want1 := `{"offset":0,"timestamp":1700000000001,"key":"1","value":{"id":1,"name":"ada","ts":1700000000001,"price":"1.50","tags":["a","b"]},"headers":[{"key":"h","value":"v"}]}`
	want2 := `{"offset":1,"timestamp":1700000000003,"key":"1","value":{"id":1,"name":"ada2","ts":1700000000003,"price":"2.00","tags":null}}`
	if kp == 0 {
		// Record 1 was sent to partition 0 explicitly, between the two.
		want2 = strings.Replace(want2, `"offset":1`, `"offset":2`, 1)
	}
	if !strings.Contains(got, want1) || !strings.Contains(got, want2) {
		t.Fatalf("fetch:\n%s\nwant\n%s\n%s", got, want1, want2)
	}
	r = arrowFetch(t, part+"?offset=1&columns=name,id", "")
	if r.status != 200 || strings.Contains(string(r.body), `"price"`) || !strings.Contains(string(r.body), `"value":{"name":"ada2","id":1}`) || strings.Contains(string(r.body), `"offset":0`) {
		t.Fatalf("projected fetch: %d %s", r.status, r.body)
	}
	if r := arrowFetch(t, part+"?columns=nope", ""); r.status != 400 || !strings.Contains(string(r.body), `column \"nope\" is not in the schema`) {
		t.Fatalf("unknown column: %d %s", r.status, r.body)
	}

	// Arrow IPC: read back with arrow-go's IPC reader.
	r = arrowFetch(t, part+"?offset=0&columns=id,name", httpapi.MediaArrowStream)
	if r.status != 200 || r.header.Get("Content-Type") != httpapi.MediaArrowStream {
		t.Fatalf("ipc fetch: %d %s %s", r.status, r.header, r.body)
	}
	rd, err := ipc.NewReader(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	if rd.Schema().NumFields() != 2 || rd.Schema().Field(0).Name != "id" {
		t.Fatalf("ipc schema %s", rd.Schema())
	}
	var names []string
	for rd.Next() {
		b := rd.RecordBatch()
		for i := 0; i < int(b.NumRows()); i++ {
			names = append(names, b.Column(1).(*array.String).Value(i))
		}
	}
	if kp == 0 {
		if strings.Join(names, ",") != "ada,,ada2" {
			t.Fatalf("ipc rows %q", names)
		}
	} else if strings.Join(names, ",") != "ada,ada2" {
		t.Fatalf("ipc rows %q", names)
	}
}

// TestArrowSchemaEvolutionHTTP: a nullable column added over PUT .../schema; records of
// both versions fetched back, each with its own columns; breaking changes refused with
// their errors.
func TestArrowSchemaEvolutionHTTP(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	base := n.srv.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", base, `{"name":"e","encoding":"arrow","schema":{"fields":[{"name":"id","type":"int64","nullable":false}]}}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", base, `{"name":"k"}`); r.status != 201 {
		t.Fatalf("create kafka: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", base+"/e/records", `{"records":[{"value":{"id":1}}]}`); r.status != 200 {
		t.Fatalf("produce v1: %d %s", r.status, r.body)
	}
	for body, want := range map[string]string{
		`{"schema":{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"n","type":"utf8","nullable":false}]},"expect_version":1}`: `added column \"n\" must be nullable`,
		`{"schema":{"fields":[{"name":"id","type":"int32","nullable":false}]},"expect_version":1}`:                                             `column \"id\" changed type or nullability (int64 not null to int32 not null)`,
		`{"schema":{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"n","type":"utf8","nullable":true}]},"expect_version":7}`:  `latest schema version is 1, not 7`,
		`{"expect_version":1}`: `\"schema\" is required`,
	} {
		if r := call(t, "PUT", base+"/e/schema", body); r.status != 400 || !strings.Contains(string(r.body), want) {
			t.Errorf("put %s: %d %s, want %s", body, r.status, r.body, want)
		}
	}
	if r := call(t, "PUT", base+"/k/schema", `{"schema":{"fields":[{"name":"id","type":"int64"}]},"expect_version":0}`); r.status != 400 || !strings.Contains(string(r.body), "only arrow streams have a schema") {
		t.Errorf("put on kafka stream: %d %s", r.status, r.body)
	}
	r := call(t, "PUT", base+"/e/schema", `{"schema":{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"n","type":"utf8","nullable":true}]},"expect_version":1}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"version":2`) {
		t.Fatalf("put v2: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", base+"/e/records", `{"records":[{"value":{"id":2,"n":"two"}}]}`); r.status != 200 {
		t.Fatalf("produce v2: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", base+"/e/schema?version=1", ""); r.status != 200 || strings.Contains(string(r.body), `"n"`) || !strings.Contains(string(r.body), `"version":1`) {
		t.Errorf("get v1: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", base+"/e/schema", ""); r.status != 200 || !strings.Contains(string(r.body), `"version":2`) {
		t.Errorf("get latest: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", base+"/e/schema?version=5", ""); r.status != 404 {
		t.Errorf("get v5: %d %s", r.status, r.body)
	}
	part := base + "/e/partitions/0/records"
	got := string(arrowFetch(t, part, "").body)
	if !strings.Contains(got, `{"offset":0,"value":{"id":1}}`) || !strings.Contains(got, `{"offset":1,"value":{"id":2,"n":"two"}}`) {
		t.Fatalf("fetch across versions: %s", got)
	}
	// Arrow IPC: one schema per answer; the v2 rows come with the next fetch.
	r = arrowFetch(t, part, httpapi.MediaArrowStream)
	if r.header.Get("Loam-Next-Offset") != "1" {
		t.Fatalf("ipc fetch of v1 rows: next offset %q", r.header.Get("Loam-Next-Offset"))
	}
	r = arrowFetch(t, part+"?offset=1", httpapi.MediaArrowStream)
	rd, err := ipc.NewReader(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	if rd.Schema().NumFields() != 2 || !rd.Next() || rd.RecordBatch().Column(1).(*array.String).Value(0) != "two" {
		t.Fatalf("ipc fetch of v2 rows: %s", rd.Schema())
	}
}
