package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/loamhq/loam/lognode-svc/httpapi"
)

const ipcStream = `{"name":"%s","partitions":3,"encoding":"arrow","schema":{"fields":[
 {"name":"id","type":"int64","nullable":false},
 {"name":"name","type":"utf8","nullable":true},
 {"name":"ts","type":"timestamp","unit":"ms","nullable":false},
 {"name":"tags","type":"list","nullable":true,"item":{"type":"utf8","nullable":true}}
],"key":"id","timestamp":"ts"}}`

// ipcOf writes rows (id, name, ts, tags) as an Arrow IPC stream with schema as.
func ipcOf(t testing.TB, as *arrow.Schema, ids []int64, names []string) []byte {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	for i, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		if names[i] == "" {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(names[i])
		}
		if as.NumFields() > 2 {
			b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(1700000000000 + id))
			lb := b.Field(3).(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprint("t", id))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(as))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ipcSchema(nullableID bool) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: nullableID},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: false},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
}

func postIPC(t testing.TB, url string, body []byte) httpReply {
	t.Helper()
	resp, err := http.Post(url, httpapi.MediaArrowStream, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpReply{resp.StatusCode, resp.Header, b}
}

type produced struct {
	Offsets []struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"offset"`
	} `json:"offsets"`
}

// fetchValues returns the JSON fetch of every partition of a stream, records by offset.
func fetchAll(t *testing.T, base, stream string, partitions int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p := 0; p < partitions; p++ {
		r := arrowFetch(t, fmt.Sprintf("%s/%s/partitions/%d/records", base, stream, p), "")
		var f struct {
			Records []json.RawMessage `json:"records"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &f) != nil {
			t.Fatalf("fetch %s %d: %d %s", stream, p, r.status, r.body)
		}
		for _, rec := range f.Records {
			var o struct {
				Offset int64 `json:"offset"`
			}
			_ = json.Unmarshal(rec, &o)
			out[fmt.Sprintf("%d/%d", p, o.Offset)] = string(rec)
		}
	}
	return out
}

// TestArrowIPCProduceHTTP: an Arrow IPC stream written by arrow-go is produced to an arrow
// stream: rows placed by the key column as the JSON produce of the same rows places them,
// fetched back identical to them; an explicit partition; the schema's mismatches, nulls
// in a column that is not nullable and a corrupt body refused naming what is wrong.
func TestArrowIPCProduceHTTP(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	base := n.srv.URL + "/v1/namespaces/default/streams"
	for _, s := range []string{"viajson", "viaipc"} {
		if r := call(t, "POST", base, fmt.Sprintf(ipcStream, s)); r.status != 201 {
			t.Fatalf("create %s: %d %s", s, r.status, r.body)
		}
	}
	ids := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	names := []string{"ada", "", "bob", "cy", "", "dee", "eve", "fay"}
	var recs []string
	for i, id := range ids {
		name := "null"
		if names[i] != "" {
			name = `"` + names[i] + `"`
		}
		recs = append(recs, fmt.Sprintf(`{"value":{"id":%d,"name":%s,"ts":%d,"tags":["t%d"]}}`, id, name, 1700000000000+id, id))
	}
	if r := call(t, "POST", base+"/viajson/records", `{"records":[`+strings.Join(recs, ",")+`]}`); r.status != 200 {
		t.Fatalf("json produce: %d %s", r.status, r.body)
	}
	// A nullable id stands for the stream's not-nullable one when it holds no null.
	r := postIPC(t, base+"/viaipc/records", ipcOf(t, ipcSchema(true), ids, names))
	if r.status != 200 {
		t.Fatalf("ipc produce: %d %s", r.status, r.body)
	}
	var pr produced
	if err := json.Unmarshal(r.body, &pr); err != nil || len(pr.Offsets) != len(ids) {
		t.Fatalf("ipc produce answer %s: %v", r.body, err)
	}
	viaJSON, viaIPC := fetchAll(t, base, "viajson", 3), fetchAll(t, base, "viaipc", 3)
	if len(viaIPC) != len(ids) || fmt.Sprint(viaJSON) != fmt.Sprint(viaIPC) {
		t.Fatalf("fetched:\njson %v\nipc  %v", viaJSON, viaIPC)
	}
	for i, o := range pr.Offsets {
		got := viaIPC[fmt.Sprintf("%d/%d", o.Partition, o.Offset)]
		if !strings.Contains(got, fmt.Sprintf(`"key":"%d"`, ids[i])) {
			t.Errorf("row %d answered at %d/%d, which holds %s", i, o.Partition, o.Offset, got)
		}
	}

	// ?partition= places all rows.
	r = postIPC(t, base+"/viaipc/records?partition=2", ipcOf(t, ipcSchema(false), []int64{10, 11}, []string{"x", "y"}))
	if r.status != 200 || strings.Count(string(r.body), `"partition":2`) != 2 {
		t.Fatalf("explicit partition: %d %s", r.status, r.body)
	}

	wrongType := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	renamed := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "nom", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	short := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	int32Rows := func(as *arrow.Schema) []byte {
		b := array.NewRecordBuilder(memory.DefaultAllocator, as)
		defer b.Release()
		b.Field(0).(*array.Int32Builder).Append(1)
		b.Field(1).AppendNull()
		rec := b.NewRecordBatch()
		defer rec.Release()
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(as))
		_ = w.Write(rec)
		_ = w.Close()
		return buf.Bytes()
	}
	nullID := ipcOf(t, ipcSchema(true), []int64{1}, []string{"a"})
	{
		// Make row 0's id null: rebuild with a null.
		b := array.NewRecordBuilder(memory.DefaultAllocator, ipcSchema(true))
		b.Field(0).(*array.Int64Builder).Append(5)
		b.Field(0).AppendNull()
		for i := 0; i < 2; i++ {
			b.Field(1).AppendNull()
			b.Field(2).(*array.TimestampBuilder).Append(1)
			b.Field(3).AppendNull()
		}
		rec := b.NewRecordBatch()
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(ipcSchema(true)))
		_ = w.Write(rec)
		_ = w.Close()
		rec.Release()
		b.Release()
		nullID = buf.Bytes()
	}
	for name, c := range map[string]struct {
		body []byte
		want string
	}{
		"type":    {int32Rows(wrongType), `column \"id\" is int32, the stream's schema has int64`},
		"renamed": {ipcOf(t, renamed, []int64{1}, []string{"a"}), `column 1 is \"nom\", the stream's schema has \"name\"`},
		"short":   {ipcOf(t, short, []int64{1}, []string{"a"}), `2 columns, the stream's schema has 4 (the first missing: \"ts\")`},
		"null id": {nullID, `row 1: column \"id\" is null; the stream's schema says it is not nullable`},
		"corrupt": {[]byte("not arrow at all"), `invalid arrow ipc stream`},
		"empty":   {nil, `invalid arrow ipc stream: empty`},
	} {
		r := postIPC(t, base+"/viaipc/records", c.body)
		if r.status != 400 || !strings.Contains(string(r.body), c.want) {
			t.Errorf("%s: %d %s, want %s", name, r.status, r.body, c.want)
		}
	}
	if r := postIPC(t, base+"/viaipc/records?partition=3", ipcOf(t, ipcSchema(false), []int64{1}, []string{"a"})); r.status != 400 || !strings.Contains(string(r.body), "partition") {
		t.Errorf("partition 3: %d %s", r.status, r.body)
	}
	if r := postIPC(t, base+"/viaipc/records?key=1", ipcOf(t, ipcSchema(false), []int64{1}, []string{"a"})); r.status != 400 || !strings.Contains(string(r.body), "partition") {
		t.Errorf("unknown parameter: %d %s", r.status, r.body)
	}
	// Nothing of the refused requests was written.
	if got := fetchAll(t, base, "viaipc", 3); len(got) != len(ids)+2 {
		t.Errorf("%d records after the refused produces, want %d", len(got), len(ids)+2)
	}
}

// TestArrowIPCProduceOlderVersion: after a schema evolution an IPC stream of the older
// version is still accepted, stored with that version and fetched with its columns; one of
// neither version is refused naming the difference from the latest.
func TestArrowIPCProduceOlderVersion(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	base := n.srv.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", base, `{"name":"e","encoding":"arrow","schema":{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"name","type":"utf8","nullable":true}]}}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for v := 1; v <= 3; v++ {
		fields := `{"name":"id","type":"int64","nullable":false},{"name":"name","type":"utf8","nullable":true}`
		for j := 1; j <= v; j++ {
			fields += fmt.Sprintf(`,{"name":"c%d","type":"int8","nullable":true}`, j)
		}
		if r := call(t, "PUT", base+"/e/schema", fmt.Sprintf(`{"schema":{"fields":[%s]},"expect_version":%d}`, fields, v)); r.status != 200 {
			t.Fatalf("put v%d: %d %s", v+1, r.status, r.body)
		}
	}
	v1 := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	if r := postIPC(t, base+"/e/records", ipcOf(t, v1, []int64{7}, []string{"old"})); r.status != 200 {
		t.Fatalf("produce of version 1: %d %s", r.status, r.body)
	}
	got := string(arrowFetch(t, base+"/e/partitions/0/records", "").body)
	if !strings.Contains(got, `"value":{"id":7,"name":"old"}`) {
		t.Fatalf("fetch: %s", got)
	}
	bad := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "other", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	if r := postIPC(t, base+"/e/records", ipcOf(t, bad, []int64{7}, []string{"x"})); r.status != 400 || !strings.Contains(string(r.body), `column 1 is \"other\", the stream's schema has \"name\" (schema version 4 of stream \"e\")`) {
		t.Fatalf("produce of no version: %d %s", r.status, r.body)
	}
}

// TestArrowFetchLongPoll: a fetch at the high watermark with max_wait_ms waits for the
// next commit and answers its rows.
func TestArrowFetchLongPoll(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	base := n.srv.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", base, `{"name":"lp","encoding":"arrow","schema":{"fields":[{"name":"id","type":"int64","nullable":false}]}}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		call(t, "POST", base+"/lp/records", `{"records":[{"value":{"id":42}}]}`)
	}()
	start := time.Now()
	r := arrowFetch(t, base+"/lp/partitions/0/records?offset=0&max_wait_ms=10000", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"value":{"id":42}`) {
		t.Fatalf("long-poll: %d %s", r.status, r.body)
	}
	if el := time.Since(start); el < 250*time.Millisecond || el > 8*time.Second {
		t.Fatalf("long-poll answered after %v", el)
	}
	// Without max_wait_ms a fetch at the high watermark answers at once.
	start = time.Now()
	if r := arrowFetch(t, base+"/lp/partitions/0/records?offset=1", ""); r.status != 200 || !strings.Contains(string(r.body), `"records":[]`) || time.Since(start) > 2*time.Second {
		t.Fatalf("fetch at the high watermark: %d %s after %v", r.status, r.body, time.Since(start))
	}
}

// TestArrowIPCProduceByArrowJS: an Arrow IPC stream written by a second implementation,
// npm apache-arrow, is produced and fetched back with its values. Needs node and
// apache-arrow (see TestArrowIPCReadByArrowJS).
func TestArrowIPCProduceByArrowJS(t *testing.T) {
	dir := os.Getenv("LOAM_ARROW_JS")
	if dir == "" {
		if _, err := os.Stat("../../.tools/node/node_modules/apache-arrow/package.json"); err == nil {
			dir, _ = filepath.Abs("../../.tools/node")
		}
	}
	_, nodeErr := exec.LookPath("node")
	if dir == "" || nodeErr != nil {
		if os.Getenv("LOAM_REQUIRE_SERVERS") == "1" {
			t.Fatal("node and LOAM_ARROW_JS (a directory with node_modules/apache-arrow) are required")
		}
		t.Skip("set LOAM_ARROW_JS to a directory with node_modules/apache-arrow")
	}
	n := startNode(t, httpapi.Limits{})
	base := n.srv.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", base, fmt.Sprintf(ipcStream, "js")); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	script := `const A = require(process.argv[1] + "/node_modules/apache-arrow");
const schema = new A.Schema([
  new A.Field("id", new A.Int64(), false),
  new A.Field("name", new A.Utf8(), true),
  new A.Field("ts", new A.TimestampMillisecond(), false),
  new A.Field("tags", new A.List(new A.Field("item", new A.Utf8(), true)), true)]);
const data = {id: [1n, 2n, 3n], name: ["ada", null, "cy"], ts: [1700000000001, 1700000000002, 1700000000003], tags: [["a", "b"], null, []]};
const builders = schema.fields.map(f => A.makeBuilder({type: f.type, nullValues: [null]}));
for (let i = 0; i < 3; i++) schema.fields.forEach((f, j) => builders[j].append(data[f.name][i]));
const children = builders.map(b => b.finish().flush());
const batch = new A.RecordBatch(schema, A.makeData({type: new A.Struct(schema.fields), length: 3, nullCount: 0, children}));
process.stdout.write(A.tableToIPC(new A.Table([batch]), "stream"));`
	cmd := exec.Command("node", "-e", script, filepath.Clean(dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	body, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v: %s", err, stderr.String())
	}
	r := postIPC(t, base+"/js/records?partition=1", body)
	if r.status != 200 {
		t.Fatalf("produce: %d %s", r.status, r.body)
	}
	got := fetchAll(t, base, "js", 3)
	want := []string{
		`{"offset":0,"timestamp":1700000000001,"key":"1","value":{"id":1,"name":"ada","ts":1700000000001,"tags":["a","b"]}}`,
		`{"offset":1,"timestamp":1700000000002,"key":"2","value":{"id":2,"name":null,"ts":1700000000002,"tags":null}}`,
		`{"offset":2,"timestamp":1700000000003,"key":"3","value":{"id":3,"name":"cy","ts":1700000000003,"tags":[]}}`,
	}
	for i, w := range want {
		if g := got[fmt.Sprintf("1/%d", i)]; g != w {
			t.Errorf("offset %d:\n got %s\nwant %s", i, g, w)
		}
	}
}

// TestArrowFetchOutOfRange: a fetch of an arrow stream past its high watermark answers
// 416 offset_out_of_range with the partition's bounds, as a kafka stream's does (it
// answered 500 internal: the sequencer's lookup refusal was passed on as it was).
func TestArrowFetchOutOfRange(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	base := n.srv.URL + "/v1/namespaces/default/streams"
	if r := call(t, "POST", base, `{"name":"oor","encoding":"arrow","schema":{"fields":[{"name":"id","type":"int64","nullable":false}]}}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", base+"/oor/records", `{"records":[{"value":{"id":1}}]}`); r.status != 200 {
		t.Fatalf("produce: %d %s", r.status, r.body)
	}
	for _, accept := range []string{"", httpapi.MediaArrowStream} {
		r := arrowFetch(t, base+"/oor/partitions/0/records?offset=1000", accept)
		if r.status != 416 || !strings.Contains(string(r.body), `"offset_out_of_range"`) {
			t.Errorf("fetch past the end (Accept %q): %d %s", accept, r.status, r.body)
		}
	}
}
