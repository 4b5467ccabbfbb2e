package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/streamapi/streamapitest"
)

// TestZoneDiscoveryHTTPS: with an https:// server and --ca-cert, zone discovery talks to
// the node it found over https too (it used to dial http://, which a TLS listener refuses).
func TestZoneDiscoveryHTTPS(t *testing.T) {
	node := httptest.NewTLSServer(streamapitest.New(streamapitest.WithClock(fixedClock)))
	defer node.Close()
	dir := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/cluster/nodes" {
			http.Error(w, `{"error":{"code":"not_found","message":"directory only"}}`, 404)
			return
		}
		json.NewEncoder(w).Encode(streamapi.ListNodesResponse{Nodes: []streamapi.Node{{ID: "n1", Zone: "zone-b", HTTPAddr: strings.TrimPrefix(node.URL, "https://")}}})
	}))
	defer dir.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	// httptest's TLS servers share one self-signed certificate: it is its own CA.
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: node.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--server", dir.URL, "--ca-cert", ca, "--zone", "zone-b", "stream", "create", "z"},
		strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"--server", node.URL, "stream", "list"}, strings.NewReader(""), &out, &errb); code != 1 {
		t.Fatalf("without --ca-cert: exit %d, want 1 (unknown authority): %s", code, out.String())
	}
	if !strings.Contains(errb.String(), "certificate") {
		t.Fatalf("without --ca-cert: %s", errb.String())
	}
	errb.Reset()
	t.Setenv("LOAM_CA_CERT", ca)
	if code := run(context.Background(), []string{"--server", node.URL, "stream", "list"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("LOAM_CA_CERT: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "z") {
		t.Fatalf("list: %s", out.String())
	}
	// --ca-cert with http:// is a usage error; a file that is no CA names the problem.
	if code := run(context.Background(), []string{"--server", "http://127.0.0.1:1", "stream", "list"}, strings.NewReader(""), &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "not https://") {
		t.Fatalf("--ca-cert with http://: exit %d: %s", code, errb.String())
	}
	errb.Reset()
	junk := filepath.Join(t.TempDir(), "junk.pem")
	os.WriteFile(junk, []byte("not a certificate\n"), 0o644)
	t.Setenv("LOAM_CA_CERT", junk)
	if code := run(context.Background(), []string{"--server", node.URL, "stream", "list"}, strings.NewReader(""), &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "holds no PEM certificate") {
		t.Fatalf("a CA file without a certificate: exit %d: %s", code, errb.String())
	}
}
