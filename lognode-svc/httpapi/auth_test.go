package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loamhq/loam/lognode-svc/auth"
	"github.com/loamhq/loam/lognode-svc/httpapi"
	"github.com/loamhq/loam/lognode-svc/node"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/shared/streamapi"
)

// startAuthNode starts a log node checking keys against mc (a real sequencer) and
// returns its URL.
func startAuthNode(t *testing.T, mc meta.Client, id string, ttl time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(context.Background(), node.Config{NodeID: id, Listener: ln, Bucket: objstore.NewMem(), Meta: mc,
		FlushInterval: 5 * time.Millisecond, Logger: quiet(), Zone: "z1", Auth: auth.New(mc, auth.Options{TTL: ttl})})
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
	return srv.URL
}

type authCall struct {
	t    *testing.T
	base string
}

// do sends method path with key (none when "") and body, and returns status and body.
func (c authCall) do(key, method, path, body string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (c authCall) want(key, method, path, body string, status int, code string) string {
	c.t.Helper()
	got, b := c.do(key, method, path, body)
	if got != status || (code != "" && !strings.Contains(b, `"code":"`+code+`"`)) {
		c.t.Fatalf("%s %s (key %.12s…): %d %s; want %d %s", method, path, key, got, b, status, code)
	}
	return b
}

func TestAuthHTTP(t *testing.T) {
	ctx := context.Background()
	mc := startSequencer(t)
	admin, err := auth.BootstrapNew(ctx, mc)
	if err != nil || admin == "" {
		t.Fatalf("bootstrap: %q, %v", admin, err)
	}
	c := authCall{t, startAuthNode(t, mc, "a-1", 200*time.Millisecond)}

	// Open routes.
	c.want("", "GET", "/healthz", "", 200, "")
	c.want("", "GET", "/metrics", "", 200, "")

	// No key, a malformed one, an unknown one: 401 on every kind of route.
	unknown, _, _ := auth.NewKey(true, "", "")
	for _, key := range []string{"", "garbage", unknown} {
		for _, r := range [][2]string{{"GET", "/v1/namespaces"}, {"GET", "/v1/keys"}, {"GET", "/v1/namespaces/default/streams"},
			{"POST", "/v1/namespaces/default/streams/s/records"}, {"GET", "/v1/namespaces/default/streams/s/partitions/0/records"},
			{"POST", "/v1/namespaces/default/producers"}, {"GET", "/v1/cluster/nodes"}, {"DELETE", "/v1/namespaces/team-a"}} {
			status, b := c.do(key, r[0], r[1], "")
			if status != 401 || !strings.Contains(b, `"code":"unauthorized"`) {
				t.Fatalf("%s %s with key %q: %d %s, want 401", r[0], r[1], key, status, b)
			}
		}
	}

	// The admin key manages namespaces and keys.
	c.want(admin, "POST", "/v1/namespaces", `{"name":"team-a"}`, 201, "")
	c.want(admin, "POST", "/v1/namespaces", `{"name":"team-b"}`, 201, "")
	b := c.want(admin, "GET", "/v1/namespaces", "", 200, "")
	if !strings.Contains(b, `"team-a"`) || !strings.Contains(b, `"default"`) {
		t.Fatalf("namespaces: %s", b)
	}
	var ka streamapi.CreatedKey
	if err := json.Unmarshal([]byte(c.want(admin, "POST", "/v1/keys", `{"namespace":"team-a","description":"ci"}`, 201, "")), &ka); err != nil {
		t.Fatal(err)
	}
	if ka.Key == "" || ka.Namespace != "team-a" || ka.CreatedMs == 0 {
		t.Fatalf("created key: %+v", ka)
	}
	c.want(admin, "POST", "/v1/keys", `{"namespace":"nosuch"}`, 404, streamapi.CodeNamespaceNotFound)
	c.want(admin, "POST", "/v1/keys", `{"namespace":"team-a","admin":true}`, 400, streamapi.CodeInvalidArgument)
	c.want(admin, "POST", "/v1/keys", `{}`, 400, streamapi.CodeInvalidArgument)

	// A namespace key: its own namespace yes, another 403, admin routes 403.
	c.want(ka.Key, "POST", "/v1/namespaces/team-a/streams", `{"name":"s","partitions":1}`, 201, "")
	c.want(ka.Key, "POST", "/v1/namespaces/team-a/streams/s/records", `{"records":[{"value":"1"}]}`, 200, "")
	c.want(ka.Key, "GET", "/v1/namespaces/team-a/streams/s/partitions/0/records?offset=0", "", 200, "")
	c.want(ka.Key, "POST", "/v1/namespaces/team-a/producers", `{}`, 200, "")
	c.want(ka.Key, "GET", "/v1/cluster/nodes", "", 501, "") // past the key check (this node keeps no registry)
	c.want(ka.Key, "GET", "/v1/namespaces/team-b/streams", "", 403, streamapi.CodePermissionDenied)
	c.want(ka.Key, "POST", "/v1/namespaces/team-b/streams/s/records", `{"records":[{"value":"1"}]}`, 403, streamapi.CodePermissionDenied)
	c.want(ka.Key, "GET", "/v1/namespaces/default/streams/s/partitions/0/records?offset=0", "", 403, streamapi.CodePermissionDenied)
	c.want(ka.Key, "GET", "/v1/namespaces", "", 403, streamapi.CodePermissionDenied)
	c.want(ka.Key, "POST", "/v1/namespaces", `{"name":"x"}`, 403, streamapi.CodePermissionDenied)
	c.want(ka.Key, "DELETE", "/v1/namespaces/team-a", "", 403, streamapi.CodePermissionDenied)
	c.want(ka.Key, "GET", "/v1/keys", "", 403, streamapi.CodePermissionDenied)
	c.want(ka.Key, "POST", "/v1/keys", `{"namespace":"team-a"}`, 403, streamapi.CodePermissionDenied)
	c.want(ka.Key, "DELETE", "/v1/keys/"+ka.ID, "", 403, streamapi.CodePermissionDenied)

	// The admin key reaches every namespace.
	c.want(admin, "GET", "/v1/namespaces/team-a/streams/s", "", 200, "")

	// Listing shows ids, scope and times, never a secret or hash.
	b = c.want(admin, "GET", "/v1/keys", "", 200, "")
	var kl streamapi.KeyList
	if err := json.Unmarshal([]byte(b), &kl); err != nil || len(kl.Keys) != 2 {
		t.Fatalf("keys: %s (%v)", b, err)
	}
	if strings.Contains(b, ka.Key) || strings.Contains(b, admin) || strings.Contains(b, "hash") {
		t.Fatalf("key list shows a secret: %s", b)
	}

	// Deleting a namespace: refused while it holds streams, then its keys are revoked.
	c.want(admin, "DELETE", "/v1/namespaces/team-a", "", 409, streamapi.CodeNamespaceNotEmpty)
	c.want(admin, "DELETE", "/v1/namespaces/team-a/streams/s", "", 204, "")
	c.want(admin, "DELETE", "/v1/namespaces/team-a", "", 204, "")
	c.want(admin, "DELETE", "/v1/namespaces/team-a", "", 404, streamapi.CodeNamespaceNotFound)
	c.want(admin, "DELETE", "/v1/namespaces/default", "", 400, streamapi.CodeInvalidArgument)
	time.Sleep(250 * time.Millisecond) // the key cache's TTL
	c.want(ka.Key, "GET", "/v1/namespaces/team-a/streams", "", 401, streamapi.CodeUnauthorized)

	// Revocation.
	c.want(admin, "DELETE", "/v1/keys/nosuch", "", 404, streamapi.CodeKeyNotFound)
	var kb streamapi.CreatedKey
	_ = json.Unmarshal([]byte(c.want(admin, "POST", "/v1/keys", `{"namespace":"team-b"}`, 201, "")), &kb)
	c.want(kb.Key, "GET", "/v1/namespaces/team-b/streams", "", 200, "")
	c.want(admin, "DELETE", "/v1/keys/"+kb.ID, "", 204, "")
	time.Sleep(250 * time.Millisecond)
	b = c.want(kb.Key, "GET", "/v1/namespaces/team-b/streams", "", 401, streamapi.CodeUnauthorized)
	if !strings.Contains(b, "revoked") {
		t.Fatalf("revoked key's answer: %s", b)
	}
}

// TestAuthRevocationAcrossNodes: two log nodes on one sequencer, each caching key lookups
// for its TTL (2 s, the default); a key revoked through one node stops working on both
// within the TTL. The time from the revocation's answer to the last node's first 401 is
// logged.
func TestAuthRevocationAcrossNodes(t *testing.T) {
	ctx := context.Background()
	mc := startSequencer(t)
	admin, err := auth.BootstrapNew(ctx, mc)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	n1 := authCall{t, startAuthNode(t, mc, "n-1", ttl)}
	n2 := authCall{t, startAuthNode(t, mc, "n-2", ttl)}
	var k streamapi.CreatedKey
	if err := json.Unmarshal([]byte(n1.want(admin, "POST", "/v1/keys", `{"namespace":"default"}`, 201, "")), &k); err != nil {
		t.Fatal(err)
	}
	// Both nodes have the key cached as live.
	n1.want(k.Key, "GET", "/v1/namespaces/default/streams", "", 200, "")
	n2.want(k.Key, "GET", "/v1/namespaces/default/streams", "", 200, "")
	n1.want(admin, "DELETE", "/v1/keys/"+k.ID, "", 204, "")
	revoked := time.Now()
	var last time.Duration
	for _, n := range []authCall{n1, n2} {
		for {
			status, _ := n.do(k.Key, "GET", "/v1/namespaces/default/streams", "")
			if status == 401 {
				break
			}
			if status != 200 {
				t.Fatalf("status %d", status)
			}
			if time.Since(revoked) > ttl+time.Second {
				t.Fatalf("%s still accepts the key %s after its revocation", n.base, time.Since(revoked))
			}
			time.Sleep(10 * time.Millisecond)
		}
		last = max(last, time.Since(revoked))
	}
	t.Logf("revoked key refused by both nodes %s after the revocation (key cache TTL %s)", last.Round(time.Millisecond), ttl)
	if last > ttl+500*time.Millisecond {
		t.Fatalf("revocation took %s, TTL %s", last, ttl)
	}
}

// TestAuthOffServesWithoutKeys: a node without an Authenticator (loam dev, --insecure-no-auth)
// ignores the header.
func TestAuthOffServesWithoutKeys(t *testing.T) {
	n := startNode(t, httpapi.Limits{})
	c := authCall{t, n.srv.URL}
	c.want("", "GET", "/v1/namespaces/default/streams", "", 200, "")
	c.want("", "POST", "/v1/namespaces", `{"name":"x"}`, 201, "")
	c.want("garbage", "GET", "/v1/namespaces", "", 200, "")
}
