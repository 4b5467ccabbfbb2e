package httpapi_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/httpapi"
)

// TestArrowIPCReadByArrowJS: the Arrow IPC a fetch answers is decoded by a second
// implementation, npm apache-arrow (21.x), to the values the JSON fetch answers. Needs
// node and apache-arrow@21 under .tools/node (.ci/tools.sh installs it) or LOAM_ARROW_JS
// naming a directory with node_modules/apache-arrow; skipped without them unless
// LOAM_REQUIRE_SERVERS=1.
func TestArrowIPCReadByArrowJS(t *testing.T) {
	dir := os.Getenv("LOAM_ARROW_JS")
	if dir == "" {
		// .ci/tools.sh installs it under the repository's .tools/node.
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
	if r := call(t, "POST", base, `{"name":"js","encoding":"arrow","schema":{"fields":[
	 {"name":"id","type":"int64","nullable":false},{"name":"name","type":"utf8","nullable":true},
	 {"name":"score","type":"float64","nullable":true},{"name":"ok","type":"bool","nullable":true},
	 {"name":"ts","type":"timestamp","unit":"ms","nullable":false},{"name":"tags","type":"list","nullable":true,"item":{"type":"utf8","nullable":true}}],
	 "timestamp":"ts"}}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", base+"/js/records", `{"records":[
	 {"value":{"id":9007199254740993,"name":"ada","score":1.25,"ok":true,"ts":1700000000001,"tags":["x","y"]}},
	 {"value":{"id":-2,"name":null,"score":null,"ok":false,"ts":1700000000002}}]}`); r.status != 200 {
		t.Fatalf("produce: %d %s", r.status, r.body)
	}
	part := base + "/js/partitions/0/records"
	ipcBody := arrowFetch(t, part, httpapi.MediaArrowStream).body
	script := `const {tableFromIPC} = require(process.argv[1] + "/node_modules/apache-arrow");
const t = tableFromIPC(require("fs").readFileSync(0));
const rows = [];
for (const r of t) { const o = r.toJSON(); if (o.tags) o.tags = Array.from(o.tags); rows.push(o); }
console.log(JSON.stringify(rows, (k, v) => typeof v === "bigint" ? v.toString() : v));`
	cmd := exec.Command("node", "-e", script, filepath.Clean(dir))
	cmd.Stdin = bytes.NewReader(ipcBody)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v: %s", err, out)
	}
	var js []map[string]any
	if err := json.Unmarshal(out, &js); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	// The JSON fetch of the same rows.
	var fetched struct {
		Records []struct {
			Value map[string]any `json:"value"`
		} `json:"records"`
	}
	dec := json.NewDecoder(bytes.NewReader(arrowFetch(t, part, "").body))
	dec.UseNumber()
	if err := dec.Decode(&fetched); err != nil {
		t.Fatal(err)
	}
	if len(js) != 2 || len(fetched.Records) != 2 {
		t.Fatalf("arrow-js rows %v, fetched %v", js, fetched.Records)
	}
	for i := range js {
		for col, v := range fetched.Records[i].Value {
			got, want := norm(js[i][col]), norm(v)
			if got != want {
				t.Errorf("row %d column %s: apache-arrow %s, fetch %s", i, col, got, want)
			}
		}
	}
	if !strings.Contains(string(out), `"id":"9007199254740993"`) {
		t.Errorf("int64 beyond 2^53 lost: %s", out)
	}
}

// norm renders a decoded JSON value for comparison: numbers as their text, int64 strings
// of arrow-js as numbers.
func norm(v any) string {
	switch x := v.(type) {
	case json.Number:
		return x.String()
	case float64:
		b, _ := json.Marshal(x)
		return string(b)
	case string:
		if _, err := json.Number(x).Int64(); err == nil {
			return x
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}
