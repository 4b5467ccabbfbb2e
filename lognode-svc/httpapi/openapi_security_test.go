package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/shared/streamapi"
)

// TestOpenAPISecurity: every operation of openapi.json declares its security requirement
// and its error responses, and they are what a node checking keys does: an operation
// answered 401 without a key declares the apiKey scheme and 401; one answered 403 to a key
// of another namespace (or to a namespace key, on an admin route) declares the role that
// route needs and 403; an open one declares no requirement. Every operation but /metrics
// (which cannot fail) declares an error response.
func TestOpenAPISecurity(t *testing.T) {
	ctx := context.Background()
	mc := startSequencer(t)
	admin, err := auth.BootstrapNew(ctx, mc)
	if err != nil {
		t.Fatal(err)
	}
	c := authCall{t, startAuthNode(t, mc, "o-1", time.Second)}
	c.want(admin, "POST", "/v1/namespaces", `{"name":"other"}`, 201, "")
	var other streamapi.CreatedKey
	if err := json.Unmarshal([]byte(c.want(admin, "POST", "/v1/keys", `{"namespace":"other"}`, 201, "")), &other); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(httpapi.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	type operation struct {
		Security  *[]map[string][]string     `json:"security"`
		Responses map[string]json.RawMessage `json:"responses"`
	}
	for path, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op operation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			name := strings.ToUpper(method) + " " + path
			url := strings.NewReplacer("{ns}", "default", "{stream}", "nope", "{p}", "0", "{name}", "c", "{id}", "x").Replace(path)
			noKey, _ := c.do("", strings.ToUpper(method), url, "{}")
			wrongNS, _ := c.do(other.Key, strings.ToUpper(method), url, "{}")
			var roles []string
			declared := op.Security != nil && len(*op.Security) > 0
			if declared {
				roles = (*op.Security)[0]["apiKey"]
			}
			switch {
			case op.Security == nil:
				t.Errorf("%s declares no security requirement (an open route declares \"security\": [])", name)
			case noKey == 401 && (!declared || op.Responses["401"] == nil):
				t.Errorf("%s needs a key (401 without one) but declares %v and responses %v", name, *op.Security, keys(op.Responses))
			case noKey != 401 && declared:
				t.Errorf("%s is open (%d without a key) but declares %v", name, noKey, *op.Security)
			case wrongNS == 403 && (len(roles) != 1 || (roles[0] != "namespace" && roles[0] != "admin") || op.Responses["403"] == nil):
				t.Errorf("%s refuses a key of another namespace (403) but declares roles %v and responses %v", name, roles, keys(op.Responses))
			case declared && wrongNS != 403 && len(roles) > 0:
				t.Errorf("%s declares roles %v but serves a key of another namespace (%d)", name, roles, wrongNS)
			}
			errs := 0
			for code := range op.Responses {
				if code[0] == '4' || code[0] == '5' || code == "default" {
					errs++
				}
			}
			if errs == 0 && path != "/metrics" {
				t.Errorf("%s declares no error response", name)
			}
		}
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
