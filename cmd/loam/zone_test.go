package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/streamapi"
)

// TestZoneDiscovery: with --zone the CLI asks the server for the zone's live nodes and
// talks to one of them; the directory server here serves nothing else, so a listing that
// succeeds went to the node it named.
func TestZoneDiscovery(t *testing.T) {
	e := newEnv(t)
	var asked string
	dir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/cluster/nodes" {
			http.Error(w, `{"error":{"code":"not_found","message":"directory only"}}`, 404)
			return
		}
		asked = r.URL.Query().Get("zone")
		json.NewEncoder(w).Encode(streamapi.ListNodesResponse{Nodes: []streamapi.Node{{ID: "n1", Zone: "zone-b", HTTPAddr: strings.TrimPrefix(e.url, "http://")}}})
	}))
	defer dir.Close()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--server", dir.URL, "--zone", "zone-b", "stream", "create", "z"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if asked != "zone-b" {
		t.Fatalf("asked for zone %q", asked)
	}
	// Without --zone the server given is used as it is: the directory refuses the call.
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"--server", dir.URL, "stream", "list"}, strings.NewReader(""), &out, &errb); code != 1 {
		t.Fatalf("exit %d without --zone, want 1: %s", code, out.String())
	}
}
