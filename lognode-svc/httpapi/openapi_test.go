package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi/datamodel"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestOpenAPIDocument: GET /v1/openapi.json answers the embedded document; it is valid
// JSON, valid against the OpenAPI 3.1 schema, and builds into a model whose references
// all resolve; it documents the error body, the record JSON and the binary content type.
func TestOpenAPIDocument(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	resp, err := http.Get(n.srv.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, httpapi.OpenAPI()) {
		t.Fatalf("GET /v1/openapi.json: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	// The OpenAPI 3.1 schema (as libopenapi embeds it) with a JSON Schema 2020-12 validator.
	var oas any
	if err := json.Unmarshal([]byte(datamodel.OpenAPI31SchemaData), &oas); err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("oas31.json", oas); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("oas31.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Fatalf("not an OpenAPI 3.1 document: %v", err)
	}
	d, err := libopenapi.NewDocument(body)
	if err != nil {
		t.Fatal(err)
	}
	if v := d.GetSpecInfo().Version; v != "3.1.0" {
		t.Fatalf("version %q", v)
	}
	m, err := d.BuildV3Model()
	if err != nil {
		t.Fatalf("build model: %v", err)
	}
	for _, name := range []string{"ErrorBody", "ErrorDetail", "Record", "Header", "ProduceRequest", "ProduceResponse", "FetchResponse", "Quota"} {
		if _, ok := m.Model.Components.Schemas.Get(name); !ok {
			t.Errorf("schema %s missing", name)
		}
	}
	produce, _ := m.Model.Paths.PathItems.Get("/v1/namespaces/{ns}/streams/{stream}/records")
	if _, ok := produce.Post.RequestBody.Content.Get(streamapi.MediaRecordBatch); !ok {
		t.Errorf("produce does not document %s", streamapi.MediaRecordBatch)
	}
}

// TestOpenAPIMatchesRoutes: every route the server registers is in the document, and every
// documented route is served: a request to it is answered by its handler, not by the
// "no route" or "method not allowed" fallbacks.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(httpapi.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	served := n.api.Routes()
	slices.Sort(documented)
	slices.Sort(served)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is served but not in openapi.json", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("openapi.json documents %s, which the server does not register", r)
		}
		method, path, _ := strings.Cut(r, " ")
		url := n.srv.URL + strings.NewReplacer("{ns}", "default", "{stream}", "nope", "{p}", "0").Replace(path)
		req, _ := http.NewRequest(method, url, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 405 || (resp.StatusCode == 404 && strings.Contains(string(b), "no route")) {
			t.Errorf("documented %s is not served: %d %s", r, resp.StatusCode, b)
		}
	}
}
